package docstore

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// A write tool's Go error says whether the write surely did not start
// (loop.ErrNoEffect: the loop lifts the fence and the run fails as an
// infrastructure failure) or may have happened (the run ends
// interrupted_write). Path problems are error results either way.
func TestWriteToolsSayWhetherAFailedWriteStarted(t *testing.T) {
	eio := fmt.Errorf("read doc.md: %w", syscall.EIO)
	tests := []struct {
		name      string
		fault     faultBackend
		tool      string
		wantNoEff bool   // Go error marked loop.ErrNoEffect
		wantErr   bool   // Go error at all
		wantRes   string // else: this error result
	}{
		{"marker unreadable", faultBackend{appliedErr: eio}, ToolWriteDocument, true, true, ""},
		{"document unreadable", faultBackend{getErr: map[string]error{"doc.md": eio}}, ToolWriteDocument, true, true, ""},
		{"delete: document unreadable", faultBackend{getErr: map[string]error{"doc.md": eio}}, ToolDeleteDocument, true, true, ""},
		{"put refused", faultBackend{putErr: fmt.Errorf("put: %w: %w", ErrNotApplied, eio)}, ToolWriteDocument, true, true, ""},
		{"delete refused", faultBackend{deleteErr: fmt.Errorf("delete: %w: %w", ErrNotApplied, eio)}, ToolDeleteDocument, true, true, ""},
		{"put outcome unknown", faultBackend{putErr: eio}, ToolWriteDocument, false, true, ""},
		{"delete outcome unknown", faultBackend{deleteErr: eio}, ToolDeleteDocument, false, true, ""},
		{"put path conflict", faultBackend{putErr: fmt.Errorf("write doc.md: %w", ErrPathConflict)}, ToolWriteDocument, false, false,
			`cannot use "doc.md": a document or folder in the way conflicts with it`},
		{"document behind a link out", faultBackend{getErr: map[string]error{"doc.md": ErrOutsideStore}}, ToolDeleteDocument, false, false,
			`cannot use "doc.md": it leads outside the document store through a symbolic link`},
		{"cancelled before the write", faultBackend{getErr: map[string]error{"doc.md": context.Canceled}}, ToolWriteDocument, true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestDirBackend(t)
			put(t, b, "doc.md", "old\n")
			f := tt.fault
			f.Backend = b
			input := `{"path":"doc.md","text":"new\n"}`
			if tt.tool == ToolDeleteDocument {
				input = `{"path":"doc.md"}`
			}
			ctx := loop.WithIdempotencyKey(context.Background(), "run/-/c1")
			res, err := toolByName(t, &f, tt.tool).Call(ctx, []byte(input))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Call = %+v, %v; want a Go error: %v", res, err, tt.wantErr)
			}
			if err != nil {
				if got := errors.Is(err, loop.ErrNoEffect); got != tt.wantNoEff {
					t.Errorf("error %q: marked ErrNoEffect = %v, want %v", err, got, tt.wantNoEff)
				}
				return
			}
			wantResult(t, res, true, tt.wantRes)
		})
	}
}

// faultBackend fails chosen calls, for the paths a real store cannot be
// made to fail on demand.
type faultBackend struct {
	Backend
	getErr     map[string]error
	putErr     error
	deleteErr  error
	appliedErr error
}

func (f *faultBackend) Get(ctx context.Context, p string) (string, string, error) {
	if err := f.getErr[p]; err != nil {
		return "", "", err
	}
	return f.Backend.Get(ctx, p)
}

func (f *faultBackend) Put(ctx context.Context, p, text string) error {
	if f.putErr != nil {
		return f.putErr
	}
	return f.Backend.Put(ctx, p, text)
}

func (f *faultBackend) Delete(ctx context.Context, p string) error {
	if f.deleteErr != nil {
		return f.deleteErr
	}
	return f.Backend.Delete(ctx, p)
}

func (f *faultBackend) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if f.appliedErr != nil {
		return nil, false, f.appliedErr
	}
	return f.Backend.Applied(ctx, marker)
}

//go:build unix

package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// Issue #10 item 3 end to end: a document path the model chose — a 256–512
// byte segment, a symbolic link out of the content folder, a link loop —
// used to end reads FAILED/internal_error and approved writes and deletes
// FAILED/interrupted_write although nothing was written. Now the model gets
// an error result and the run goes on to complete.
func TestDocumentPathFaultsDoNotEndTheRun(t *testing.T) {
	long := strings.Repeat("n", 300) + ".md"
	tests := []struct {
		name  string
		tool  string
		input map[string]any
		want  string // the error result the model reads
	}{
		{"read: segment too long", docstore.ToolReadDocument, map[string]any{"path": long}, "each folder or file name may have at most 255 bytes"},
		{"read: link out", docstore.ToolReadDocument, map[string]any{"path": "out/secret.txt"}, "leads outside the document store"},
		{"read: link loop", docstore.ToolReadDocument, map[string]any{"path": "loop.md"}, "loop of symbolic links"},
		{"write: segment too long", docstore.ToolWriteDocument, map[string]any{"path": "docs/" + long, "text": "x"}, "each folder or file name may have at most 255 bytes"},
		{"write: link out", docstore.ToolWriteDocument, map[string]any{"path": "out/planted.md", "text": "x"}, "leads outside the document store"},
		{"write: link loop", docstore.ToolWriteDocument, map[string]any{"path": "loop.md", "text": "x"}, "loop of symbolic links"},
		{"delete: link out", docstore.ToolDeleteDocument, map[string]any{"path": "secret.md"}, "leads outside the document store"},
		{"delete: link loop", docstore.ToolDeleteDocument, map[string]any{"path": "loop.md"}, "loop of symbolic links"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			outside := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600))
			content := filepath.Join(t.TempDir(), "content")
			docs, err := docstore.NewDirBackend(content)
			require.NoError(t, err)
			t.Cleanup(func() { docs.Close() })
			require.NoError(t, os.Symlink(outside, filepath.Join(content, "out")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(content, "secret.md")))
			require.NoError(t, os.Symlink("loop.md", filepath.Join(content, "loop.md")))

			h := runOneCall(t, docs, tt.tool, tt.input)
			got := h.run
			if tt.tool != docstore.ToolReadDocument {
				preview := h.preview
				assert.True(t, strings.HasPrefix(preview, "this call will fail: "), "preview %q", preview)
				assert.Contains(t, preview, tt.want)
				assert.NotContains(t, preview, "openat")
				assert.NotContains(t, preview, content)
			}
			store, r := h.store, h.run
			assert.Equal(t, runs.StatusCompleted, got.Status, "reason %q", got.Reason)
			assert.Empty(t, got.PendingEffect, "no fence left behind")

			evs, err := store.Events(ctx, r.ID, 0, 100)
			require.NoError(t, err)
			var executed int
			for _, ev := range evs {
				if ev.Type != runs.EventToolExecuted {
					continue
				}
				executed++
				var st loop.Step
				require.NoError(t, json.Unmarshal(ev.Data, &st))
				assert.True(t, st.IsError, "the call is recorded as an error result")
			}
			assert.Equal(t, 1, executed)
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "nothing was planted outside the content folder")
		})
	}
}

// oneCall is what runOneCall saw: the run at its end, the preview an
// approver saw (writes), and the store.
type oneCall struct {
	store   *runs.Store
	run     *runs.Run
	preview string
}

// runOneCall runs a scripted model that makes one call of tool over docs
// and then says "done"; a write is approved when it suspends.
func runOneCall(t *testing.T, docs docstore.Backend, tool string, in map[string]any) oneCall {
	t.Helper()
	ctx := context.Background()
	input, _ := json.Marshal(in)
	script := fmt.Sprintf(`{"turns":[{"content":[{"type":"tool_use","id":"c1","name":%q,"input":%s}]},{"content":[{"type":"text","text":"done"}]}]}`, tool, input)
	model, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	tools, err := loop.NewToolbox(docstore.Tools(docs)...)
	require.NoError(t, err)
	now := func() time.Time { return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) }
	store, db, err := embedded.OpenStore(filepath.Join(t.TempDir(), "r.db"), runs.Options{Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	worker := &service.Worker{
		Store:       store,
		Runner:      func(h loop.Hooks) *loop.Runner { return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: now} },
		NewToken:    func() (string, string, error) { return "raw", strings.Repeat("ab", 32), nil },
		Notifier:    service.NotifierFunc(func(context.Context, service.Notification) error { return nil }),
		ApprovalTTL: time.Hour,
		Owner:       "w",
		Now:         now,
	}
	req, _ := json.Marshal(service.StartRequest{Prompt: "go", Approvers: []string{"ops@example.com"}})
	r, err := store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"ops@example.com"}, Request: req})
	require.NoError(t, err)
	require.NoError(t, worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	got, err := store.Get(ctx, r.ID)
	require.NoError(t, err)
	var preview string
	if tool != docstore.ToolReadDocument && tool != docstore.ToolListDocuments && tool != docstore.ToolSearchDocuments {
		require.Equal(t, runs.StatusWaiting, got.Status, "a write waits for its approver")
		require.Len(t, got.PendingCalls, 1)
		preview = got.PendingCalls[0].Preview
		d := loop.Decision{TurnDigest: got.TurnDigest, Action: loop.ActionApprove}
		_, err = store.Decide(ctx, got, runs.NewDecision{SuspensionID: got.SuspensionID, Decider: "ops@example.com", Via: runs.ViaAPI, Decision: d})
		require.NoError(t, err)
		require.NoError(t, worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
		got, err = store.Get(ctx, r.ID)
		require.NoError(t, err)
	}
	return oneCall{store: store, run: got, preview: preview}
}

// brokenStore fails the marker read (before any write) or the put itself.
type brokenStore struct {
	docstore.Backend
	appliedErr, putErr error
}

func (b *brokenStore) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if b.appliedErr != nil {
		return nil, false, b.appliedErr
	}
	return b.Backend.Applied(ctx, marker)
}

func (b *brokenStore) Put(ctx context.Context, p, text string) error {
	if b.putErr != nil {
		return b.putErr
	}
	return b.Backend.Put(ctx, p, text)
}

// An infrastructure failure stops the run; it is an interrupted write only
// when the write may really have begun.
func TestInfrastructureFailureOfAWriteNamesWhetherItBegan(t *testing.T) {
	tests := []struct {
		name       string
		store      brokenStore
		wantReason loop.TerminationReason
	}{
		{"store unreadable before the write", brokenStore{appliedErr: errors.New("connection refused")}, loop.ReasonInternalError},
		{"put refused", brokenStore{putErr: fmt.Errorf("put: %w: %w", docstore.ErrNotApplied, errors.New("AccessDenied"))}, loop.ReasonInternalError},
		{"put outcome unknown", brokenStore{putErr: errors.New("timeout after sending")}, loop.ReasonInterruptedWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := docstore.NewDirBackend(filepath.Join(t.TempDir(), "content"))
			require.NoError(t, err)
			t.Cleanup(func() { docs.Close() })
			b := tt.store
			b.Backend = docs
			got := runOneCall(t, &b, docstore.ToolWriteDocument, map[string]any{"path": "a.md", "text": "x"}).run
			assert.Equal(t, runs.StatusFailed, got.Status)
			assert.Equal(t, tt.wantReason, got.Reason)
		})
	}
}

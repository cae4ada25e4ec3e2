package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// TestOpenLocalDocumentMarkers: on the embedded store a document write's
// idempotency marker is a key in agentgate.db, not a file under
// content/.applied/; on rows and states from elsewhere it stays a file.
func TestOpenLocalDocumentMarkers(t *testing.T) {
	const key = "run-1/s-1/call-1"
	sum := sha256.Sum256([]byte(key))
	marker := hex.EncodeToString(sum[:])
	noModel := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, errors.New("no model in this test")
	})
	for _, tt := range []struct {
		name      string
		elsewhere bool // rows and states from another store
	}{
		{"embedded store", false},
		{"rows and states elsewhere", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := app.LocalOptions{Dir: dir, Model: noModel}
			if tt.elsewhere {
				other, err := embedded.Open(filepath.Join(t.TempDir(), "other.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = other.Close() })
				o.Rows, o.States = other, other
			}
			local, err := app.OpenLocal(o)
			if err != nil {
				t.Fatal(err)
			}
			write, ok := local.Tools.Lookup(docstore.ToolWriteDocument)
			if !ok {
				t.Fatal("no write_document tool")
			}
			ctx := loop.WithIdempotencyKey(context.Background(), key)
			input := json.RawMessage(`{"path":"a.md","text":"one\n"}`)
			for i := range 2 {
				res, err := write.Call(ctx, input)
				if err != nil || res.IsError || res.Content != "created a.md (4 bytes)" {
					t.Fatalf("call %d = %+v, %v; want created a.md", i+1, res, err)
				}
			}
			_, statErr := os.Stat(filepath.Join(dir, "content", ".applied", marker))
			if fileExists := statErr == nil; fileExists != tt.elsewhere {
				t.Errorf("marker file exists = %v (%v), want %v", fileExists, statErr, tt.elsewhere)
			}
			if err := local.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.elsewhere {
				return
			}
			db, err := embedded.Open(filepath.Join(dir, "agentgate.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rec, ok, err := db.Applied(context.Background(), marker)
			if !ok || err != nil {
				t.Fatalf("marker in agentgate.db = %q, %v, %v; want the record", rec, ok, err)
			}
			var got struct{ Tool, Result string }
			if err := json.Unmarshal(rec, &got); err != nil || got.Tool != docstore.ToolWriteDocument || got.Result != "created a.md (4 bytes)" {
				t.Errorf("record = %s (%v), want the write's tool and result", rec, err)
			}
		})
	}
}

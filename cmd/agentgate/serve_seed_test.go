package main

// The demo documents: a new embedded store for the demo script starts with
// them, a store for any other model without them, and a restart never
// writes them again, so a page a run deleted stays deleted.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSeedServer starts `serve` on dir with model (a --model spec) and
// stops it at the end of the test or when stop is called.
func startSeedServer(t *testing.T, dir, model string) (url string, stop func()) {
	t.Helper()
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: model, tokens: linkTokens,
		mailOut: io.Discard, logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			assert.NoError(t, s.Close())
		}
	}
	t.Cleanup(stop)
	return s.URL, stop
}

func TestServeDoesNotBringBackADemoPageARunDeleted(t *testing.T) {
	dir := t.TempDir()
	about := filepath.Join(dir, "content", "pages", "about.md")

	// First start, with the demo script: the new store gets the demo pages.
	_, stop := startSeedServer(t, dir, "")
	stop()
	require.FileExists(t, about)
	require.FileExists(t, filepath.Join(dir, "content", "pages", "pricing.md"))

	// A run deletes about.md, approved by bob.
	script := `{"turns":[{"content":[{"type":"tool_use","id":"d","name":"delete_document","input":{"path":"pages/about.md"}}]},
	 {"content":[{"type":"text","text":"deleted"}],"stop_reason":"end_turn"}]}`
	url, stop := startSeedServer(t, dir, "scripted:"+writeScript(t, t.TempDir(), script))
	alice := &apiClient{t: t, base: url, token: linkAliceToken}
	bob := &apiClient{t: t, base: url, token: linkBobToken}
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "delete the about page", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.waitStatus(run.ID, "COMPLETED")
	stop()
	require.NoFileExists(t, about, "the approved delete ran")

	// Restarts, with the demo script and with another model: still gone.
	for _, model := range []string{"", "scripted:" + writeScript(t, t.TempDir(), `{"turns":[{"content":[{"type":"text","text":"hi"}]}]}`)} {
		_, stop := startSeedServer(t, dir, model)
		stop()
		assert.NoFileExists(t, about, "after a restart with model %q", model)
	}
}

func TestServeSeedsNoDemoPagesForAnotherModel(t *testing.T) {
	dir := t.TempDir()
	_, stop := startSeedServer(t, dir, "scripted:"+writeScript(t, t.TempDir(), `{"turns":[{"content":[{"type":"text","text":"hi"}]}]}`))
	stop()
	entries, err := os.ReadDir(filepath.Join(dir, "content"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "a new store for a model of the user's own starts without documents")

	// The demo script later, on that store: it is not new, nothing is seeded.
	_, stop = startSeedServer(t, dir, "")
	stop()
	assert.NoFileExists(t, filepath.Join(dir, "content", "pages", "pricing.md"))
}

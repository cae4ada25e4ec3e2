package main

// `serve --segment-budget`: a run that works longer than one segment may is
// checkpointed, continued by the in-process dispatcher in a new job, and
// ends as it would in one segment, through the API on the embedded store.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeSegmentBudgetContinuesALongRun(t *testing.T) {
	var turns []string
	for i := range 6 {
		turns = append(turns, fmt.Sprintf(`{"content": [{"type": "tool_use", "id": "toolu_%d", "name": "read_document", "input": {"path": "pages/about.md"}}], "usage": {"input_tokens": 10, "output_tokens": 2}}`, i))
	}
	turns = append(turns, `{"content": [{"type": "text", "text": "Read it six times."}], "usage": {"input_tokens": 10, "output_tokens": 2}}`)
	script := `{"turns": [` + strings.Join(turns, ",") + `]}`
	dir := t.TempDir()
	seedDemoDocuments(t, dir)
	logs := &syncBuffer{}
	// A budget of one nanosecond: every segment makes one model or tool
	// call, then checkpoints.
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: "scripted:" + writeScript(t, dir, script),
		tokens: linkTokens, mailOut: &syncBuffer{}, logger: slog.New(slog.NewJSONHandler(logs, nil)), segmentBudget: 1,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	alice := &apiClient{t: t, base: s.URL, token: linkAliceToken}
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "read about us, six times", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Read it six times.")
	evs := alice.events(run.ID)
	count := map[string]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	assert.GreaterOrEqual(t, count["checkpointed"], 3, "segments")
	assert.LessOrEqual(t, count["checkpointed"], 12, "at most one checkpoint after each of the 13 calls but the last")
	assert.Equal(t, count["checkpointed"], count["continued"])
	assert.Equal(t, 6, toolExecutions(t, evs, "read_document"), "each read ran once")
	assert.Equal(t, 7, count["model_turn"])
}

//go:build integration

package main

// `serve --model openai:…` against an OpenAI-compatible server nobody here
// wrote (@dwmkerr/mock-llm, pinned in tools/npm, rules in
// testdata/mock-llm.yaml): the run reads, proposes a write, suspends, is
// approved through the API and completes.

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/nodeserver"
	"github.com/agentgate/agentgate/internal/provider"
)

func TestServeModelOpenAICompatible(t *testing.T) {
	bin := nodeserver.Bin(t, "mock-llm")
	config, err := filepath.Abs("testdata/mock-llm.yaml")
	require.NoError(t, err)
	base := nodeserver.Start(t, bin, "", nil, "--config", config)
	t.Setenv(provider.EnvOpenAIBaseURL, base+"/v1")
	t.Setenv(provider.EnvOpenAIAPIKey, "")

	dir := t.TempDir()
	seedDemoDocuments(t, dir) // a new store has them only for the demo script
	logs := &syncBuffer{}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: "openai:mock-pricing", tokens: linkTokens,
		mailOut: &syncBuffer{}, logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	alice := &apiClient{t: t, base: s.URL, token: linkAliceToken}
	bob := &apiClient{t: t, base: s.URL, token: linkBobToken}

	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "The Team plan now costs 12 EUR. Update the pricing page.",
		"approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	require.Len(t, run.Pending.Calls, 1)
	assert.Equal(t, "write_document", run.Pending.Calls[0].Tool)
	assert.Equal(t, "call_write", run.Pending.Calls[0].ID)
	assert.Contains(t, run.Pending.Calls[0].Preview, "+- Team: 12 EUR per user and month")
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "read_document"), "the read ran before the suspension")

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Done: the Team plan now costs 12 EUR.")
	ls := &linkServer{t: t, dir: dir}
	assert.Contains(t, ls.documentText("pages/pricing.md"), "Team: 12 EUR per user and month")
}

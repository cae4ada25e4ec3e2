package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/webhook"
)

// TestCLIStartWithWebhook: `runs start --webhook-url --webhook-event` asks
// for webhooks as POST /runs's webhook_url and webhook_events do (the
// traffic checked against openapi.yaml): the run shows the subscription, and
// the receiver gets the event asked for, and only it, signed (verified with
// the Standard Webhooks reference library).
func TestCLIStartWithWebhook(t *testing.T) {
	signer, verifier := webhookKeys(t)
	received := make(chan webhook.Payload, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		assert.NoError(t, verifier.Verify(body, r.Header), "the delivery's signature")
		var p webhook.Payload
		assert.NoError(t, json.Unmarshal(body, &p))
		received <- p
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	allow, err := webhook.ParseAllowList("127.0.0.1")
	require.NoError(t, err)
	e := startCLIEnvWith(t, serveOptions{sweepEvery: time.Hour,
		webhooks: &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: allow}}})

	hook := rcv.URL + "/agentgate"
	r := e.waiting("--webhook-url", hook, "--webhook-event", "run.completed")
	require.NotNil(t, r.Webhook, "the run shows its subscription")
	assert.Equal(t, hook, r.Webhook.URL)
	assert.Equal(t, []string{"run.completed"}, r.Webhook.Events)

	code, _, errOut := e.cli("bob", "runs", "decide", r.ID, "--digest", r.Pending.TurnDigest, "--approve")
	require.Equal(t, 0, code, errOut)
	select {
	case p := <-received:
		assert.Equal(t, webhook.EventType("run.completed"), p.Type, "only the event asked for: no run.waiting_for_approval before it")
		assert.Equal(t, r.ID, p.Data.RunID)
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook within 30 s of the approval")
	}
	done := e.runJSON("alice", "runs", "get", r.ID)
	assert.Equal(t, client.StatusCompleted, done.Status)
}

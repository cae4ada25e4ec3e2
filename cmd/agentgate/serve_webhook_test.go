package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/webhook"
)

// TestServeSendsAWebhookAtOnce: the local server makes a delivery's first
// attempt as soon as the transition that scheduled it is written, not at
// its next sweep (an hour away here, and the start-up sweep ran before the
// run existed): the receiver is told the run waits, and then that it
// completed, each verified with the Standard Webhooks reference library.
// The receiver approves before it answers the first delivery, so its
// record meets a run that moved on (resuming, refused: a record never
// conflicts with a worker; or already completed, taken); either way the
// attempt is recorded once and not made again, so the next delivery is
// the completion (service.TestAnAttemptRecordedLateIsNotSentAgain holds
// the refused case deterministically).
func TestServeSendsAWebhookAtOnce(t *testing.T) {
	signer, verifier := webhookKeys(t)

	type got struct {
		verified bool
		payload  webhook.Payload
	}
	type pendingRun struct {
		Pending struct {
			TurnDigest string `json:"turn_digest"`
		} `json:"pending"`
	}
	received := make(chan got, 16)
	var bob *apitest.Caller
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := got{verified: verifier.Verify(body, r.Header) == nil}
		_ = json.Unmarshal(body, &g.payload)
		if g.payload.Type == "run.waiting_for_approval" {
			id := g.payload.Data.RunID
			var run pendingRun
			err := bob.DoJSON(r.Context(), "GET", "/runs/"+id, nil, http.StatusOK, &run)
			if err == nil {
				err = bob.DoJSON(r.Context(), "POST", "/runs/"+id+"/decision",
					map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
			}
			assert.NoError(t, err, "the decision the receiver takes")
		}
		received <- g
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)

	allow, err := webhook.ParseAllowList("127.0.0.1")
	require.NoError(t, err)
	s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: t.TempDir(),
		tokens: map[string]string{"alice-token": "alice", "bob-token": "bob"}, sweepEvery: time.Hour,
		mailOut: io.Discard, logger: slog.New(slog.DiscardHandler),
		webhooks: &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: allow}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	alice := &apitest.Caller{URL: s.URL, Token: "alice-token"}
	bob = &apitest.Caller{URL: s.URL, Token: "bob-token"}

	next := func(want string) got {
		t.Helper()
		select {
		case g := <-received:
			assert.True(t, g.verified, "signature")
			assert.Equal(t, want, string(g.payload.Type))
			return g
		case <-time.After(time.Minute): // a guard against hanging, not a speed check
			t.Fatalf("no %s delivery without a sweep", want)
			return got{}
		}
	}

	var run struct {
		ID string `json:"id"`
	}
	alice.Do(t, "POST", "/runs", map[string]any{
		"prompt":      "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers":   []string{"bob"},
		"webhook_url": rcv.URL + "/hooks",
	}, http.StatusAccepted, &run)
	assert.Equal(t, run.ID, next("run.waiting_for_approval").payload.Data.RunID)
	assert.Equal(t, run.ID, next("run.completed").payload.Data.RunID, "the first delivery is not sent again")
	alice.WaitStatus(t, run.ID, "COMPLETED", nil)

	// The completion's attempt is recorded after the receiver answered.
	var attempts []string
	for deadline := time.Now().Add(time.Minute); len(attempts) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var events struct {
			Events []struct {
				Type string         `json:"type"`
				Data map[string]any `json:"data"`
			} `json:"events"`
		}
		alice.Do(t, "GET", "/runs/"+run.ID+"/events", nil, http.StatusOK, &events)
		attempts = attempts[:0]
		for _, e := range events.Events {
			if e.Type == "webhook_attempt" {
				attempts = append(attempts, e.Data["type"].(string)+" "+e.Data["state"].(string))
			}
		}
	}
	assert.Equal(t, []string{"run.waiting_for_approval delivered", "run.completed delivered"}, attempts, "each attempt recorded once")
}

// TestServeWithoutASecretKeepsADeliveryForTheSecret: a delivery whose retry
// comes due while serve runs without a webhook secret (an operator left
// the flag off on one restart) is not made, not counted and not recorded;
// serve restarted with the secret sends it as the delivery's second
// attempt, with the same webhook-id, verified with the Standard Webhooks
// reference library. The store's clock is the test's, so the retry and
// the postponement come due without waiting for them.
func TestServeWithoutASecretKeepsADeliveryForTheSecret(t *testing.T) {
	signer, verifier := webhookKeys(t)

	type got struct {
		verified bool
		id       string
		payload  webhook.Payload
	}
	received := make(chan got, 16)
	var down atomic.Bool
	down.Store(true)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := got{verified: verifier.Verify(body, r.Header) == nil, id: r.Header.Get("webhook-id")}
		_ = json.Unmarshal(body, &g.payload)
		received <- g
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	next := func() got {
		t.Helper()
		select {
		case g := <-received:
			assert.True(t, g.verified, "signature")
			assert.Equal(t, "run.waiting_for_approval", string(g.payload.Type))
			return g
		case <-time.After(time.Minute): // a guard against hanging, not a speed check
			t.Fatal("no delivery")
			return got{}
		}
	}

	allow, err := webhook.ParseAllowList("127.0.0.1")
	require.NoError(t, err)
	withSecret := &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: allow}}
	clock := clocktest.New(time.Now())
	dir := t.TempDir()
	start := func(hooks *app.Webhooks) *localServer {
		t.Helper()
		s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: dir,
			tokens: map[string]string{"alice-token": "alice"}, sweepEvery: time.Hour,
			mailOut: io.Discard, logger: slog.New(slog.DiscardHandler), webhooks: hooks, now: clock.Now})
		require.NoError(t, err)
		return s
	}
	type attempt struct {
		State   string          `json:"state"`
		Attempt webhook.Attempt `json:"attempt"`
	}
	attempts := func(t *testing.T, s *localServer, id string) []attempt {
		t.Helper()
		evs, err := s.App.Store.Events(context.Background(), id, 0, 1000)
		require.NoError(t, err)
		var out []attempt
		for _, ev := range evs {
			if ev.Type == "webhook_attempt" {
				var a attempt
				require.NoError(t, json.Unmarshal(ev.Data, &a))
				out = append(out, a)
			}
		}
		return out
	}
	// settled waits until the sweep has dealt with the delivery that was
	// due: it is due later than the clock, or gone.
	settled := func(t *testing.T, s *localServer, id string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			r, err := s.App.Store.Get(context.Background(), id)
			require.NoError(t, err)
			if len(r.Outbox) == 0 || r.Outbox[0].DueAt.After(clock.Now()) {
				return
			}
			require.True(t, time.Now().Before(deadline), "the delivery was not handled")
		}
	}

	// With the secret: the first attempt fails (503), its retry is due in
	// about a minute.
	s := start(withSecret)
	alice := &apitest.Caller{URL: s.URL, Token: "alice-token"}
	var run struct {
		ID string `json:"id"`
	}
	alice.Do(t, "POST", "/runs", map[string]any{
		"prompt":         "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers":      []string{"bob"},
		"webhook_url":    rcv.URL + "/hooks",
		"webhook_events": []string{"run.waiting_for_approval"},
	}, http.StatusAccepted, &run)
	first := next()
	for deadline := time.Now().Add(time.Minute); len(attempts(t, s, run.ID)) == 0; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the first attempt was not recorded")
	}
	require.NoError(t, s.Close())

	// Restarted without the secret after the retry came due: nothing is
	// sent, counted or recorded.
	clock.Advance(2 * time.Minute)
	s = start(nil)
	settled(t, s, run.ID)
	assert.Len(t, attempts(t, s, run.ID), 1, "no attempt recorded without the secret")
	require.NoError(t, s.Close())
	select {
	case g := <-received:
		t.Fatalf("sent without the secret: %+v", g)
	default:
	}

	// Restarted with the secret once the postponement ran out: delivered.
	clock.Advance(webhook.NoSecretRetry)
	down.Store(false)
	s = start(withSecret)
	t.Cleanup(func() { _ = s.Close() })
	again := next()
	assert.Equal(t, first.id, again.id, "the same delivery")
	assert.Equal(t, run.ID, again.payload.Data.RunID)
	settled(t, s, run.ID)
	made := attempts(t, s, run.ID)
	require.Len(t, made, 2)
	assert.Equal(t, "pending", made[0].State)
	assert.Equal(t, 1, made[0].Attempt.Number)
	assert.Equal(t, "delivered", made[1].State)
	assert.Equal(t, 2, made[1].Attempt.Number, "the attempt not made without the secret was not counted")
}

// webhookKeys returns a signer with a new secret and the Standard Webhooks
// reference library's verifier of it.
func webhookKeys(t *testing.T) (*webhook.Signer, *standardwebhooks.Webhook) {
	t.Helper()
	secret, err := webhook.GenerateSecret()
	require.NoError(t, err)
	signer, err := webhook.NewSigner(secret)
	require.NoError(t, err)
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return signer, verifier
}

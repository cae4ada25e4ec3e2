package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/webhook"
)

// slowReceiver is a webhook receiver that holds every request it gets
// until the test lets it answer (204), or the sender gives up on it.
type slowReceiver struct {
	*httptest.Server
	// held gets the run id of each request as it arrives.
	held chan string

	mu sync.Mutex
	// open are the contexts of the requests being held.
	open    []context.Context
	release chan struct{}
	once    sync.Once
}

func newSlowReceiver(t *testing.T) *slowReceiver {
	t.Helper()
	s := &slowReceiver{held: make(chan string, 16), release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &p)
		s.mu.Lock()
		s.open = append(s.open, r.Context())
		s.mu.Unlock()
		s.held <- p.Data.RunID
		select {
		case <-s.release:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done(): // the sender gave up
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// stillHeld reports whether every request the receiver got is still
// waiting for its answer, the sender still waiting for it.
func (s *slowReceiver) stillHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ctx := range s.open {
		if ctx.Err() != nil {
			return false
		}
	}
	return len(s.open) > 0
}

// answer lets the held requests (and those to come) answer.
func (s *slowReceiver) answer() { s.once.Do(func() { close(s.release) }) }

// fastReceiver answers every request at once and passes on what it got.
func fastReceiver(t *testing.T, got chan<- webhook.Payload) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &p)
		got <- p
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// webhookAttempts are the states of run id's recorded webhook attempts,
// as "type state attempt-number".
func webhookAttempts(t *testing.T, s *localServer, id string) []string {
	t.Helper()
	evs, err := s.App.Store.Events(context.Background(), id, 0, 1000)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		if ev.Type != "webhook_attempt" {
			continue
		}
		var a struct {
			Type    string          `json:"type"`
			State   string          `json:"state"`
			Attempt webhook.Attempt `json:"attempt"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &a))
		out = append(out, a.Type+" "+a.State+" "+string(a.Attempt.Outcome))
	}
	return out
}

// TestServeASlowReceiverHoldsUpOnlyItsOwnRun: while a receiver holds the
// first attempt of one run's delivery (it has not answered; the server
// still waits for it), the local server makes another run's first
// attempt, to another receiver, and its sweep keeps running: a third run
// whose approval window closed (the test's clock moved past it) is
// expired. Then the slow receiver answers, and its attempt is recorded as
// delivered, not as a timeout. (Before, one goroutine made first attempts
// and sweeps one after another: everything waited for the slow receiver,
// here until the attempt's 15 s ran out.)
func TestServeASlowReceiverHoldsUpOnlyItsOwnRun(t *testing.T) {
	signer, _ := webhookKeys(t)
	slow := newSlowReceiver(t)
	fastGot := make(chan webhook.Payload, 16)
	fast := fastReceiver(t, fastGot)

	allow, err := webhook.ParseAllowList("127.0.0.1")
	require.NoError(t, err)
	clock := clocktest.New(time.Now())
	s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: t.TempDir(),
		tokens: map[string]string{"alice-token": "alice"}, sweepEvery: 20 * time.Millisecond,
		mailOut: io.Discard, logger: slog.New(slog.DiscardHandler), now: clock.Now,
		webhooks: &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: allow}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(slow.answer) // before the server closes: it waits for the attempt under way
	alice := &apitest.Caller{URL: s.URL, Token: "alice-token"}

	start := func(body map[string]any) string {
		t.Helper()
		body["prompt"] = "The Team plan now costs 12 EUR per user and month. Update the pricing page."
		body["approvers"] = []string{"bob"}
		var run struct {
			ID string `json:"id"`
		}
		alice.Do(t, "POST", "/runs", body, http.StatusAccepted, &run)
		return run.ID
	}

	slowRun := start(map[string]any{"webhook_url": slow.URL + "/hooks"})
	select {
	case id := <-slow.held:
		require.Equal(t, slowRun, id)
	case <-time.After(time.Minute): // a guard against hanging, not a speed check
		t.Fatal("the slow receiver got no request")
	}

	// Another run's first attempt goes while the slow one is held.
	fastRun := start(map[string]any{"webhook_url": fast.URL + "/hooks"})
	select {
	case p := <-fastGot:
		assert.Equal(t, fastRun, p.Data.RunID)
		assert.Equal(t, webhook.EventWaitingForApproval, p.Type)
	case <-time.After(time.Minute):
		t.Fatal("the fast receiver got no request")
	}
	require.True(t, slow.stillHeld(), "the other run's first attempt was made only after the slow receiver's attempt ended")

	// The sweep runs too: a run whose approval window closed is expired.
	expiring := start(map[string]any{"approval_ttl_seconds": 60})
	alice.WaitStatus(t, expiring, "WAITING_FOR_APPROVAL", nil)
	clock.Advance(61 * time.Second)
	alice.WaitStatus(t, expiring, "EXPIRED", nil)
	require.True(t, slow.stillHeld(), "the sweep ran only after the slow receiver's attempt ended")

	slow.answer()
	for deadline := time.Now().Add(time.Minute); len(webhookAttempts(t, s, slowRun)) == 0; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the slow receiver's attempt was not recorded")
	}
	assert.Equal(t, []string{"run.waiting_for_approval delivered delivered"}, webhookAttempts(t, s, slowRun))
	assert.Equal(t, []string{"run.waiting_for_approval delivered delivered"}, webhookAttempts(t, s, fastRun))
}

// TestServeStopFinishesTheFirstAttemptUnderWay: a server told to stop
// (SIGTERM) while a receiver holds a first attempt starts no further
// attempt but lets that one end as the receiver answers, and records it
// before the store closes: delivered, not a failure of the receiver's
// that would be retried. (Before, the attempt was cut off and recorded as
// a connection failure.)
func TestServeStopFinishesTheFirstAttemptUnderWay(t *testing.T) {
	signer, _ := webhookKeys(t)
	slow := newSlowReceiver(t)
	allow, err := webhook.ParseAllowList("127.0.0.1")
	require.NoError(t, err)
	dir := t.TempDir()
	start := func(hooks *app.Webhooks) *localServer {
		t.Helper()
		s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: dir,
			tokens: map[string]string{"alice-token": "alice"}, sweepEvery: time.Hour,
			mailOut: io.Discard, logger: slog.New(slog.DiscardHandler), webhooks: hooks})
		require.NoError(t, err)
		return s
	}
	s := start(&app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: allow}})
	alice := &apitest.Caller{URL: s.URL, Token: "alice-token"}
	var run struct {
		ID string `json:"id"`
	}
	alice.Do(t, "POST", "/runs", map[string]any{
		"prompt":      "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers":   []string{"bob"},
		"webhook_url": slow.URL + "/hooks",
	}, http.StatusAccepted, &run)
	select {
	case id := <-slow.held:
		require.Equal(t, run.ID, id)
	case <-time.After(time.Minute): // a guard against hanging, not a speed check
		t.Fatal("the receiver got no request")
	}

	s.stop() // what SIGTERM does first (Close does it again)
	slow.answer()
	require.NoError(t, s.Close())

	s = start(nil)
	t.Cleanup(func() { _ = s.Close() })
	assert.Equal(t, []string{"run.waiting_for_approval delivered delivered"}, webhookAttempts(t, s, run.ID))
}

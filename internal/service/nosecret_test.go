package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// noSecretEnv is an embedded store whose settled runs have a delivery due,
// and the sweeps of processes without a webhook secret (Webhooks nil).
type noSecretEnv struct {
	store *runs.Store
	clock *clocktest.Clock
	logs  *recordedLogs
	// noSecret is a process without a webhook secret.
	noSecret *service.Sweeper
}

func newNoSecretEnv(t *testing.T, retention time.Duration) *noSecretEnv {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	store, db, err := embedded.OpenStore(filepath.Join(t.TempDir(), "r.db"),
		runs.Options{Now: clock.Now, Retention: retention, Outbound: webhook.Outbound(nil)})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	logs := &recordedLogs{}
	return &noSecretEnv{store: store, clock: clock, logs: logs,
		noSecret: &service.Sweeper{Store: store, Now: clock.Now, Logger: slog.New(logs)}}
}

// settled is a completed run whose run.completed delivery is due now.
func (e *noSecretEnv) settled(t *testing.T) *runs.Run {
	t.Helper()
	return e.settledTo(t, "https://hooks.example.com/x")
}

// settledTo is a completed run whose run.completed delivery to url is due
// now.
func (e *noSecretEnv) settledTo(t *testing.T, url string) *runs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := e.store.Create(ctx, runs.NewRun{ID: runs.NewRunID(), Initiator: "alice", Approvers: []string{"bob"},
		Request: json.RawMessage(`{"prompt":"hi"}`), Webhook: &runs.Subscription{URL: url}})
	require.NoError(t, err)
	r, err = e.store.Claim(ctx, r.ID, "w")
	require.NoError(t, err)
	r, err = e.store.Settle(ctx, r, "w", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	require.Len(t, r.Outbox, 1)
	return r
}

// sweep runs one sweep of s at the clock's time.
func (e *noSecretEnv) sweep(t *testing.T, s *service.Sweeper) service.SweepSummary {
	t.Helper()
	sum, err := s.Sweep(context.Background())
	require.NoError(t, err)
	return sum
}

// delivery is the pending delivery of run id.
func (e *noSecretEnv) delivery(t *testing.T, id string) (*runs.Run, *webhook.Delivery) {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, r.Outbox, 1, "the delivery is still pending")
	d, err := webhook.DeliveryOf(r.Outbox[0])
	require.NoError(t, err)
	return r, d
}

// events are the events of run id of type typ.
func (e *noSecretEnv) events(t *testing.T, id, typ string) []runs.Event {
	t.Helper()
	evs, err := e.store.Events(context.Background(), id, 0, 1000)
	require.NoError(t, err)
	var out []runs.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// TestNoSecretIsNotAnAttempt: a due delivery a process without a webhook
// secret finds is not an attempt: its attempts stay at none, it records
// no event, it is postponed by webhook.NoSecretRetry (out of the front of
// the due index), and the sweep warns once, not once per delivery.
func TestNoSecretIsNotAnAttempt(t *testing.T) {
	e := newNoSecretEnv(t, 0)
	a, b := e.settled(t), e.settled(t)

	sum := e.sweep(t, e.noSecret)
	assert.Zero(t, sum.Deliveries, "no attempt made")
	assert.Equal(t, 2, sum.WaitingForSecret)
	assert.Equal(t, 1, e.logs.count(slog.LevelWarn, "no webhook secret"), "one warning for the sweep, not one per delivery")
	for _, id := range []string{a.ID, b.ID} {
		r, d := e.delivery(t, id)
		assert.Zero(t, d.Attempts, "not counted")
		assert.Nil(t, d.Last)
		assert.Equal(t, webhook.DeliveryPending, d.State)
		want := e.clock.Now().Add(webhook.NoSecretRetry)
		assert.True(t, r.DueAt.Equal(want), "due again after NoSecretRetry: got %v, want %v", r.DueAt, want)
	}

	// Two hours of sweeps: without the fix the schedule's first five
	// attempts would be used up by now.
	for range 24 {
		e.clock.Advance(webhook.NoSecretRetry)
		e.sweep(t, e.noSecret)
	}
	_, d := e.delivery(t, a.ID)
	assert.Zero(t, d.Attempts, "still not counted")
	assert.Equal(t, webhook.DeliveryPending, d.State)
	assert.Empty(t, e.events(t, a.ID, runs.EventWebhookAttempt), "no attempt recorded")
	assert.Empty(t, e.events(t, a.ID, runs.EventWebhookGivenUp))
	assert.Equal(t, 25, e.logs.count(slog.LevelWarn, "no webhook secret"), "one warning per sweep")
	assert.False(t, e.logs.contains("whsec_"), "no secret in the log")
}

// TestDeliveredOnceTheSecretIsBack: a delivery that came due while the
// processes had no webhook secret (20 hours of hourly sweeps, by when the
// old behaviour had used up seven of its nine attempts and the next was
// two hours off) is sent by the first sweep of a process with the secret
// within NoSecretRetry, as its first attempt; a failure then is retried on
// the schedule, its window counted without the time it waited.
func TestDeliveredOnceTheSecretIsBack(t *testing.T) {
	e := newNoSecretEnv(t, 0)
	r := e.settled(t)
	for range 20 {
		e.sweep(t, e.noSecret)
		e.clock.Advance(time.Hour)
	}

	var sent []string
	outcome := webhook.OutcomeFailed
	withSecret := &service.Sweeper{Store: e.store, Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler),
		Webhooks: sendingFunc(func(d *webhook.Delivery) webhook.Attempt {
			sent = append(sent, d.ID)
			return webhook.Attempt{At: e.clock.Now(), Outcome: outcome, Error: webhook.ErrClassStatus, StatusCode: 503}
		})}
	e.clock.Advance(webhook.NoSecretRetry)
	sum := e.sweep(t, withSecret)
	assert.Equal(t, 1, sum.Deliveries)
	assert.Equal(t, []string{r.Outbox[0].ID}, sent, "sent once a process has the secret")
	_, d := e.delivery(t, r.ID)
	assert.Equal(t, 1, d.Attempts, "its first attempt")
	assert.True(t, d.WaitingSince.IsZero(), "no longer waiting for a secret")
	assert.GreaterOrEqual(t, d.Waited, 20*time.Hour)

	// Retried past the 24 h window from the event: the waiting did not
	// use it up.
	outcome = webhook.OutcomeDelivered
	e.clock.Set(d.NextAttemptAt.Add(webhook.NoSecretRetry))
	e.clock.Advance(5 * time.Hour) // 26 h after the event
	sum = e.sweep(t, withSecret)
	assert.Equal(t, 1, sum.Deliveries)
	assert.Len(t, sent, 2)
	got, err := e.store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Outbox, "delivered")
	attempts := e.events(t, r.ID, runs.EventWebhookAttempt)
	require.Len(t, attempts, 2, "the two attempts made, and only those")
	var last struct {
		State   string          `json:"state"`
		Attempt webhook.Attempt `json:"attempt"`
	}
	require.NoError(t, json.Unmarshal(attempts[1].Data, &last))
	assert.Equal(t, "delivered", last.State)
	assert.Equal(t, 2, last.Attempt.Number)
	assert.Empty(t, e.events(t, r.ID, runs.EventWebhookGivenUp))
}

// TestGivenUpAfterWaitingTheSpan: a delivery no process could send for the
// schedule's whole span (23 h 41 min by default) is given up, recorded once
// as a webhook_given_up event with error not_configured, and later sweeps
// record nothing more.
func TestGivenUpAfterWaitingTheSpan(t *testing.T) {
	e := newNoSecretEnv(t, 0)
	r := e.settled(t)
	span := webhook.DefaultSchedule.Span()
	require.Equal(t, 23*time.Hour+41*time.Minute, span)

	start := e.clock.Now()
	for h := range 24 { // hourly up to 23 h
		e.clock.Set(start.Add(time.Duration(h) * time.Hour))
		assert.Zero(t, e.sweep(t, e.noSecret).GivenUp, "not before the span, at %d h", h)
	}
	e.clock.Set(start.Add(span - time.Minute))
	assert.Zero(t, e.sweep(t, e.noSecret).GivenUp)
	_, d := e.delivery(t, r.ID)
	assert.True(t, d.NextAttemptAt.Equal(start.Add(span)), "the last postponement ends at the span: got %v", d.NextAttemptAt.Sub(start))

	e.clock.Set(d.NextAttemptAt)
	sum := e.sweep(t, e.noSecret)
	assert.Equal(t, 1, sum.GivenUp)
	for range 3 {
		e.clock.Advance(time.Hour)
		assert.Zero(t, e.sweep(t, e.noSecret).GivenUp)
	}
	got, err := e.store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Outbox, "given up")
	assert.Empty(t, e.events(t, r.ID, runs.EventWebhookAttempt), "no attempt was made")
	given := e.events(t, r.ID, runs.EventWebhookGivenUp)
	require.Len(t, given, 1, "recorded once")
	var data map[string]any
	require.NoError(t, json.Unmarshal(given[0].Data, &data))
	assert.Equal(t, "failed", data["state"])
	assert.Equal(t, "not_configured", data["error"])
	assert.Equal(t, r.Outbox[0].ID, data["id"])
	assert.Equal(t, "run.completed", data["type"])
	assert.EqualValues(t, 0, data["attempts"])
	assert.EqualValues(t, span.Milliseconds(), data["waited_ms"])
	assert.Equal(t, 1, e.logs.count(slog.LevelWarn, "given up"), "one line for the delivery given up")
}

// TestRetentionDoesNotWaitForeverForASecret: a settled run past its
// retention is kept while its delivery waits for a process with the
// secret, and purged by the sweep that gives the delivery up.
func TestRetentionDoesNotWaitForeverForASecret(t *testing.T) {
	e := newNoSecretEnv(t, time.Minute)
	r := e.settled(t)
	start := e.clock.Now()
	span := webhook.DefaultSchedule.Span()
	for e.clock.Now().Before(start.Add(span)) {
		sum := e.sweep(t, e.noSecret)
		assert.Zero(t, sum.Purged, "kept while its delivery waits, at %v", e.clock.Now().Sub(start))
		e.clock.Advance(time.Hour)
	}
	sum := e.sweep(t, e.noSecret)
	assert.Equal(t, 1, sum.GivenUp)
	assert.Equal(t, 1, sum.Purged, "purged once the delivery is given up")
	_, err := e.store.Get(context.Background(), r.ID)
	assert.Equal(t, runs.ENotFound, runs.ErrorCode(err))
}

// recordedLogs is a slog.Handler that keeps the records.
type recordedLogs struct {
	mu      sync.Mutex
	records []string
	levels  []slog.Level
}

func (h *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, b.String())
	h.levels = append(h.levels, r.Level)
	return nil
}

func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler      { return h }

// count is the number of records at level whose message or attributes
// contain s.
func (h *recordedLogs) count(level slog.Level, s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i, r := range h.records {
		if h.levels[i] == level && strings.Contains(r, s) {
			n++
		}
	}
	return n
}

func (h *recordedLogs) contains(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

package service_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// secretSwitch is a webhook secret in a Secrets Manager (a fake here, the
// emulator's in the integration test) that a test makes unreadable and
// readable again.
type secretSwitch struct {
	// secrets reads it; id names it.
	secrets webhook.SecretsGetter
	id      string
	// value is its value while it can be read.
	value      string
	unreadable func(t *testing.T)
	readable   func(t *testing.T)
	// reason is what the warning gives as why it could not be read.
	reason string
	// reads counts the reads so far (nil: not counted).
	reads func() int
}

// flakySecrets is a Secrets Manager whose reads fail with err while it is
// set (webhook.SecretsGetter).
type flakySecrets struct {
	mu    sync.Mutex
	value string
	err   error
	reads int
}

func (f *flakySecrets) SecretString(context.Context, string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return "", f.err
	}
	return f.value, nil
}

func (f *flakySecrets) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *flakySecrets) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// deniedSecretID names the fake secret; deniedRead is the error of a read
// its caller may not make, as awscall returns it (the service's message
// names the caller's role, which is not for the log).
const deniedSecretID = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/webhook-AbCdEf"

var deniedRead = &awscall.APIError{Status: 400, Code: "AccessDeniedException",
	Message: "User: arn:aws:sts::123456789012:assumed-role/agentgate-purge/fn is not authorized to perform: secretsmanager:GetSecretValue"}

// fakeSecretSwitch is a readable fake secret that access denied makes
// unreadable.
func fakeSecretSwitch(t *testing.T) secretSwitch {
	t.Helper()
	value, err := webhook.GenerateSecret()
	require.NoError(t, err)
	f := &flakySecrets{value: value}
	return secretSwitch{secrets: f, id: deniedSecretID, value: value, reason: "AccessDeniedException", reads: f.count,
		unreadable: func(*testing.T) { f.fail(deniedRead) }, readable: func(*testing.T) { f.fail(nil) }}
}

// hookReceiver is a plain-http receiver on 127.0.0.1 that checks each
// request's signature with the Standard Webhooks reference library (the
// timestamp is the test clock's, so not against the wall clock) and
// answers with status.
type hookReceiver struct {
	url string

	mu       sync.Mutex
	verifier *standardwebhooks.Webhook
	status   int
	got      []receivedHook
}

// receivedHook is one request the receiver got.
type receivedHook struct {
	id        string
	timestamp string
	verified  bool
	payload   webhook.Payload
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	t.Helper()
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	h := &hookReceiver{verifier: verifier, status: http.StatusNoContent}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g := receivedHook{id: r.Header.Get(webhook.HeaderID), timestamp: r.Header.Get(webhook.HeaderTimestamp),
			verified: verifier.VerifyIgnoringTimestamp(body, r.Header) == nil}
		_ = json.Unmarshal(body, &g.payload)
		h.mu.Lock()
		h.got = append(h.got, g)
		status := h.status
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hooks"
	return h
}

func (h *hookReceiver) answer(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = status
}

func (h *hookReceiver) received() []receivedHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]receivedHook(nil), h.got...)
}

// secretEnv is a store whose settled runs have deliveries for a receiver,
// and the sweeps of a process whose webhook secret is configured and read
// from a Secrets Manager, on the test's clock (the source's refresh and
// hour of grace, webhook-timestamp, the schedule).
type secretEnv struct {
	*noSecretEnv
	sweeper *service.Sweeper
	rcv     *hookReceiver
}

func newSecretEnv(t *testing.T, rows runs.RowStore, states runs.StateStore, clock *clocktest.Clock, sw secretSwitch) *secretEnv {
	t.Helper()
	store := runs.NewStore(rows, states, runs.Options{Now: clock.Now, Outbound: webhook.Outbound(nil)})
	logs := &recordedLogs{}
	sender, err := webhook.NewSender(webhook.SenderConfig{
		Signer: webhook.NewSecretsManagerSource(sw.secrets, sw.id, clock.Now),
		Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Now:    clock.Now,
	})
	require.NoError(t, err)
	t.Cleanup(sender.Close)
	return &secretEnv{
		noSecretEnv: &noSecretEnv{store: store, clock: clock, logs: logs},
		sweeper:     &service.Sweeper{Store: store, Now: clock.Now, Logger: slog.New(logs), Webhooks: sender},
		rcv:         newHookReceiver(t, sw.value),
	}
}

// attempts are the webhook_attempt events of run id.
func (e *secretEnv) attempts(t *testing.T, id string) []webhook.Attempt {
	t.Helper()
	var out []webhook.Attempt
	for _, ev := range e.events(t, id, runs.EventWebhookAttempt) {
		var data struct {
			Attempt webhook.Attempt `json:"attempt"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		out = append(out, data.Attempt)
	}
	return out
}

// unreadableWarnings counts the warnings that the secret could not be read.
func (e *secretEnv) unreadableWarnings() int {
	return e.logs.count(slog.LevelWarn, "the webhook secret could not be read")
}

// runKeptWhileTheSecretIsUnreadable: a process whose configured webhook
// secret cannot be read makes no attempt and counts none, in the sweep's
// retries and in a first attempt made right after a job
// (Sweeper.DeliverRun, as the workers and the deliver job make it): the
// deliveries are postponed by webhook.NoSecretRetry without an event, and
// each sweep that finds them due warns once, naming the secret and why.
// Failures on the receiver's side still count, also while the last value
// read keeps signing in the hour after a failed re-read. Once the secret
// can be read, each delivery goes with its next attempt number and the
// same webhook-id, verified with the reference library.
func runKeptWhileTheSecretIsUnreadable(t *testing.T, rows runs.RowStore, states runs.StateStore, sw secretSwitch) {
	ctx := context.Background()
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := clocktest.New(start)
	e := newSecretEnv(t, rows, states, clock, sw)

	// The secret is read; the receiver fails the first attempt: counted.
	e.rcv.answer(http.StatusServiceUnavailable)
	a := e.settledTo(t, e.rcv.url)
	sum := e.sweep(t, e.sweeper)
	require.Equal(t, 1, sum.Deliveries)
	require.Len(t, e.rcv.received(), 1)
	firstID := e.rcv.received()[0].id

	// Unreadable from now on. Within the hour after the failed re-read the
	// last value read signs: the receiver's failure is attempt 2.
	sw.unreadable(t)
	clock.Advance(webhook.SecretRefresh + time.Minute)
	sum = e.sweep(t, e.sweeper)
	assert.Equal(t, 1, sum.Deliveries, "signed with the value read before")
	assert.Zero(t, sum.WaitingForSecret)
	require.Len(t, e.rcv.received(), 2)
	assert.Len(t, e.attempts(t, a.ID), 2, "a receiver's failure is an attempt")

	// Past the hour: no attempt, none counted, one warning.
	clock.Set(start.Add(webhook.SecretRefresh + time.Hour + 2*time.Minute))
	sum = e.sweep(t, e.sweeper)
	assert.Zero(t, sum.Deliveries, "no attempt made")
	assert.Equal(t, 1, sum.WaitingForSecret)
	assert.Len(t, e.rcv.received(), 2, "nothing sent")
	r, d := e.delivery(t, a.ID)
	assert.Equal(t, 2, d.Attempts, "not counted")
	assert.Equal(t, webhook.ErrClassStatus, d.Last.Error, "the last attempt is still the receiver's failure")
	assert.True(t, r.DueAt.Equal(clock.Now().Add(webhook.NoSecretRetry)), "due again after NoSecretRetry: got %v", r.DueAt.Sub(clock.Now()))
	assert.Len(t, e.attempts(t, a.ID), 2, "no attempt recorded")
	assert.Equal(t, 1, e.unreadableWarnings())

	// A run that ends now: its first attempt, made right after the job
	// (DeliverRun), is not made either.
	b := e.settledTo(t, e.rcv.url)
	sum, err := e.sweeper.DeliverRun(ctx, b.ID)
	require.NoError(t, err)
	assert.Zero(t, sum.Deliveries, "no first attempt made")
	assert.Equal(t, 1, sum.WaitingForSecret)
	assert.Len(t, e.rcv.received(), 2, "nothing sent")
	r, d = e.delivery(t, b.ID)
	assert.Zero(t, d.Attempts)
	assert.Nil(t, d.Last)
	assert.True(t, r.DueAt.Equal(clock.Now().Add(webhook.NoSecretRetry)), "due again after NoSecretRetry: got %v", r.DueAt.Sub(clock.Now()))
	assert.Empty(t, e.attempts(t, b.ID))
	assert.Equal(t, 2, e.unreadableWarnings(), "DeliverRun warns too")

	// Two hours of sweeps finding both due: one warning and (on the fake)
	// one read of the secret each, nothing sent.
	readsBefore := 0
	if sw.reads != nil {
		readsBefore = sw.reads()
	}
	for range 24 {
		clock.Advance(webhook.NoSecretRetry)
		sum = e.sweep(t, e.sweeper)
		assert.Equal(t, 2, sum.WaitingForSecret)
		assert.Zero(t, sum.Deliveries)
	}
	if sw.reads != nil {
		assert.Equal(t, 24, sw.reads()-readsBefore, "one read a sweep, not one a delivery")
	}
	assert.Len(t, e.rcv.received(), 2, "nothing sent")
	assert.Equal(t, 26, e.unreadableWarnings(), "one warning a sweep")
	assert.Equal(t, 26, e.logs.count(slog.LevelWarn, sw.id), "the warning names the secret")
	assert.Equal(t, 26, e.logs.count(slog.LevelWarn, sw.reason), "and why it could not be read")
	assert.False(t, e.logs.contains(sw.value), "no secret in the log")
	assert.False(t, e.logs.contains("assumed-role"), "not the service's message")
	assert.Zero(t, e.logs.count(slog.LevelWarn, "no webhook secret"), "not told as a missing secret")

	// Readable again: both go, as their next attempts.
	sw.readable(t)
	e.rcv.answer(http.StatusNoContent)
	clock.Advance(webhook.NoSecretRetry)
	sum = e.sweep(t, e.sweeper)
	assert.Equal(t, 2, sum.Deliveries)
	assert.Zero(t, sum.WaitingForSecret)
	got := e.rcv.received()
	require.Len(t, got, 4)
	byRun := map[string]receivedHook{}
	for _, g := range got {
		assert.True(t, g.verified, "signature of %s", g.id)
		byRun[g.payload.Data.RunID] = g
	}
	assert.Equal(t, firstID, byRun[a.ID].id, "the same delivery")
	assert.Equal(t, strconv.FormatInt(clock.Now().Unix(), 10), byRun[a.ID].timestamp, "the attempt's time")
	for _, tt := range []struct {
		id     string
		number int
	}{{a.ID, 3}, {b.ID, 1}} {
		made := e.attempts(t, tt.id)
		require.Len(t, made, tt.number, "the attempts made, and only those")
		last := made[len(made)-1]
		assert.Equal(t, webhook.OutcomeDelivered, last.Outcome)
		assert.Equal(t, tt.number, last.Number, "the attempts not made were not counted")
		assert.Empty(t, e.events(t, tt.id, runs.EventWebhookGivenUp))
		done, err := e.store.Get(ctx, tt.id)
		require.NoError(t, err)
		assert.Empty(t, done.Outbox, "delivered")
	}
}

func TestKeptWhileTheSecretIsUnreadable(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	runKeptWhileTheSecretIsUnreadable(t, db, db, fakeSecretSwitch(t))
}

// TestGivenUpWhileTheSecretIsUnreadable: a delivery whose process could
// never read its configured secret, for the schedule's whole span, is
// given up once, with error secret_unavailable, nothing sent; a process
// without a secret configured still says not_configured
// (TestGivenUpAfterWaitingTheSpan).
func TestGivenUpWhileTheSecretIsUnreadable(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	sw := fakeSecretSwitch(t)
	sw.unreadable(t) // a cold function: no value read before
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	clock := clocktest.New(start)
	e := newSecretEnv(t, db, db, clock, sw)
	r := e.settledTo(t, e.rcv.url)
	span := webhook.DefaultSchedule.Span()

	givenUp := 0
	for clock.Now().Before(start.Add(span + 2*time.Hour)) {
		givenUp += e.sweep(t, e.sweeper).GivenUp
		clock.Advance(time.Hour)
	}
	assert.Equal(t, 1, givenUp)
	assert.Empty(t, e.rcv.received(), "nothing sent")
	got, err := e.store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Outbox, "given up")
	assert.Empty(t, e.attempts(t, r.ID), "no attempt was made")
	given := e.events(t, r.ID, runs.EventWebhookGivenUp)
	require.Len(t, given, 1, "recorded once")
	var data map[string]any
	require.NoError(t, json.Unmarshal(given[0].Data, &data))
	assert.Equal(t, "failed", data["state"])
	assert.Equal(t, "secret_unavailable", data["error"])
	assert.EqualValues(t, 0, data["attempts"])
	assert.GreaterOrEqual(t, data["waited_ms"], float64(span.Milliseconds()), "given up by the first sweep after the span")
	assert.Less(t, data["waited_ms"], float64((span + time.Hour).Milliseconds()))
	assert.Equal(t, 1, e.logs.count(slog.LevelWarn, "given up: the webhook secret could not be read"))
}

// TestAReceiverFailureIsStillAnAttempt: with the secret readable, a
// receiver that fails (an HTTP error, or no answer at all) uses up an
// attempt as before; only a secret that cannot be read does not.
func TestAReceiverFailureIsStillAnAttempt(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	e := newSecretEnv(t, db, db, clock, fakeSecretSwitch(t))
	e.rcv.answer(http.StatusInternalServerError)
	r := e.settledTo(t, e.rcv.url)
	e.sweep(t, e.sweeper)
	// A receiver nobody listens on any more.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	down := e.settledTo(t, gone.URL+"/hooks")
	e.sweep(t, e.sweeper)

	for _, tt := range []struct {
		id, class string
	}{{r.ID, webhook.ErrClassStatus}, {down.ID, webhook.ErrClassConnection}} {
		made := e.attempts(t, tt.id)
		require.Len(t, made, 1)
		assert.Equal(t, webhook.OutcomeFailed, made[0].Outcome)
		assert.Equal(t, tt.class, made[0].Error)
		_, d := e.delivery(t, tt.id)
		assert.Equal(t, 1, d.Attempts)
		assert.True(t, d.WaitingSince.IsZero(), "not waiting for a secret")
	}
	assert.Zero(t, e.unreadableWarnings())
}

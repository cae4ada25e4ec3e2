package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// heldSender is a receiver behind a WebhookSender: it records each
// delivery sent to it, by run, in the order sent, and holds the sends that
// hold picks until the test lets them go (a receiver that takes its time).
type heldSender struct {
	clock *clocktest.Clock
	// hold, when set, picks the sends that wait (called with mu held).
	hold func(d *webhook.Delivery) bool
	// started gets the run id of each send as it starts (room for 1,024).
	started chan string

	mu          sync.Mutex
	sent        map[string][]webhook.EventType
	held        []chan struct{}
	heldRuns    []string
	inFlight    int
	maxInFlight int
	ready       int
}

func newHeldSender(clock *clocktest.Clock, hold func(d *webhook.Delivery) bool) *heldSender {
	return &heldSender{clock: clock, hold: hold, started: make(chan string, 1024), sent: map[string][]webhook.EventType{}}
}

func (h *heldSender) Send(_ context.Context, d *webhook.Delivery) (webhook.Attempt, error) {
	h.mu.Lock()
	h.sent[d.RunID] = append(h.sent[d.RunID], d.Type)
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	var wait chan struct{}
	if h.hold != nil && h.hold(d) {
		wait = make(chan struct{})
		h.held = append(h.held, wait)
		h.heldRuns = append(h.heldRuns, d.RunID)
	}
	h.mu.Unlock()
	h.started <- d.RunID
	if wait != nil {
		<-wait
	}
	h.mu.Lock()
	h.inFlight--
	h.mu.Unlock()
	return webhook.Attempt{At: h.clock.Now(), Outcome: webhook.OutcomeDelivered, StatusCode: 204}, nil
}

func (h *heldSender) Ready(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready++
	return nil
}

// stopHolding lets every held send go and holds none from now on.
func (h *heldSender) stopHolding() {
	h.mu.Lock()
	h.hold = nil
	h.mu.Unlock()
	h.release(-1)
}

// release lets the held sends go, the first n of them (n < 0: all).
func (h *heldSender) release(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n < 0 || n > len(h.held) {
		n = len(h.held)
	}
	for _, c := range h.held[:n] {
		close(c)
	}
	h.held, h.heldRuns = h.held[n:], h.heldRuns[n:]
}

// releaseAllBut lets the held sends go but those to run id; it reports
// how many it let go.
func (h *heldSender) releaseAllBut(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var held []chan struct{}
	var heldRuns []string
	for i, c := range h.held {
		if h.heldRuns[i] == id {
			held, heldRuns = append(held, c), append(heldRuns, id)
			continue
		}
		close(c)
	}
	n := len(h.held) - len(held)
	h.held, h.heldRuns = held, heldRuns
	return n
}

// firstHeld is the run of the first send held ("" when none was).
func (h *heldSender) firstHeld() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.heldRuns) == 0 {
		return ""
	}
	return h.heldRuns[0]
}

// sentTo is what run id was sent, in order.
func (h *heldSender) sentTo(id string) []webhook.EventType {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhook.EventType(nil), h.sent[id]...)
}

// inFlightNow is the number of sends under way; most is the most there
// were at once.
func (h *heldSender) inFlightNow() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.maxInFlight
}

// webhookStore is a run store over rows and states whose subscribed runs
// get deliveries, on clock.
func webhookStore(rows runs.RowStore, states runs.StateStore, clock *clocktest.Clock) *runs.Store {
	return runs.NewStore(rows, states, runs.Options{Now: clock.Now, Outbound: webhook.Outbound(nil)})
}

// openWebhookStore is webhookStore on a new embedded store.
func openWebhookStore(t *testing.T, clock *clocktest.Clock) *runs.Store {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return webhookStore(db, db, clock)
}

// waitingRun is a run waiting for approval (for an hour) whose
// run.waiting_for_approval delivery is due now.
func waitingRun(t *testing.T, store *runs.Store, clock *clocktest.Clock) *runs.Run {
	t.Helper()
	r := claimedRun(t, store)
	r, err := store.Suspend(context.Background(), r, "w", runs.Suspension{State: runstest.SuspendedState(r.ID, "s1"), Deadline: clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Len(t, r.Outbox, 1)
	return r
}

// cancelledRun is a run cancelled while it waited for approval: its
// run.waiting_for_approval and run.cancelled deliveries are due now, in
// that order.
func cancelledRun(t *testing.T, store *runs.Store, clock *clocktest.Clock) *runs.Run {
	t.Helper()
	r, err := store.Cancel(context.Background(), waitingRun(t, store, clock), "alice")
	require.NoError(t, err)
	require.Len(t, r.Outbox, 2)
	return r
}

// completedRun is a completed run whose run.completed delivery is due now.
func completedRun(t *testing.T, store *runs.Store) *runs.Run {
	t.Helper()
	r, err := store.Settle(context.Background(), claimedRun(t, store), "w", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	require.Len(t, r.Outbox, 1)
	return r
}

// claimedRun is a run with a webhook subscription that worker "w" has
// claimed.
func claimedRun(t *testing.T, store *runs.Store) *runs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := store.Create(ctx, runs.NewRun{ID: runs.NewRunID(), Initiator: "alice", Approvers: []string{"bob"},
		Request: json.RawMessage(`{"prompt":"hi"}`), Webhook: &runs.Subscription{URL: "https://hooks.example.com/x"}})
	require.NoError(t, err)
	r, err = store.Claim(ctx, r.ID, "w")
	require.NoError(t, err)
	return r
}

// attemptedTypes are the event types of run id's webhook_attempt events,
// in the order recorded.
func attemptedTypes(t *testing.T, store *runs.Store, id string) []webhook.EventType {
	t.Helper()
	evs, err := store.Events(context.Background(), id, 0, 1000)
	require.NoError(t, err)
	var out []webhook.EventType
	for _, ev := range evs {
		if ev.Type != runs.EventWebhookAttempt {
			continue
		}
		var data struct {
			Type webhook.EventType `json:"type"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		out = append(out, data.Type)
	}
	return out
}

// sweepResult is what a Sweep run on a goroutine of its own returned.
type sweepResult struct {
	sum service.SweepSummary
	err error
}

// sweepAsync runs a sweep of s on a goroutine of its own; when the test
// ends (before the store closes), rcv stops holding sends and the sweep
// is waited for.
func sweepAsync(t *testing.T, s *service.Sweeper, rcv *heldSender) <-chan sweepResult {
	t.Helper()
	done := make(chan sweepResult, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sum, err := s.Sweep(context.Background())
		done <- sweepResult{sum, err}
	}()
	t.Cleanup(func() {
		rcv.stopHolding()
		<-exited
	})
	return done
}

// counts are the counters of sum (its exported fields).
func counts(t *testing.T, sum service.SweepSummary) service.SweepSummary {
	t.Helper()
	b, err := json.Marshal(sum)
	require.NoError(t, err)
	var c service.SweepSummary
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// runOtherRunsDeliveredWhileOneHangs: while the receiver of the first run
// a sweep sends to does not answer, the sweep makes the other runs' due
// attempts, each run's in order, and takes the lifecycle step of a run
// once its deliveries are done (an expiry here); the hanging run's next
// delivery waits for its first. The counters are exact.
func runOtherRunsDeliveredWhileOneHangs(t *testing.T, rows runs.RowStore, states runs.StateStore) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := webhookStore(rows, states, clock)
	cancelled := []*runs.Run{cancelledRun(t, store, clock), cancelledRun(t, store, clock)}
	overdue := waitingRun(t, store, clock)
	clock.Advance(time.Hour + time.Minute) // overdue's approval window has closed
	want := map[string][]webhook.EventType{
		cancelled[0].ID: {webhook.EventWaitingForApproval, webhook.EventCancelled},
		cancelled[1].ID: {webhook.EventWaitingForApproval, webhook.EventCancelled},
		overdue.ID:      {webhook.EventWaitingForApproval},
	}

	first := true
	rcv := newHeldSender(clock, func(*webhook.Delivery) bool {
		hang := first // the first send of the sweep, whichever run it is for
		first = false
		return hang
	})
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler)}
	done := sweepAsync(t, sweeper, rcv)

	// The hanging run's send, and every other run's, in this sweep. The
	// send held is the first made: it is known once any send started.
	waitForSend(t, rcv)
	hung := rcv.firstHeld()
	require.NotEmpty(t, hung)
	others := 0
	for id, types := range want {
		if id != hung {
			others += len(types)
		}
	}
	for n := range others {
		select {
		case <-rcv.started:
		case <-time.After(20 * time.Second):
			t.Fatalf("while run %s's receiver hung, %d of the other runs' %d attempts were made, want all", hung, n, others)
		}
	}
	assert.Equal(t, want[hung][:1], rcv.sentTo(hung), "the hanging run's next delivery waits for the one under way")

	rcv.release(-1)
	res := <-done
	require.NoError(t, res.err)
	for id, types := range want {
		assert.Equal(t, types, rcv.sentTo(id), "run %s: its deliveries in order", id)
		assert.Equal(t, types, attemptedTypes(t, store, id), "run %s: its attempts recorded in order", id)
	}
	for _, r := range cancelled {
		got, err := store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Empty(t, got.Outbox, "run %s: delivered", r.ID)
	}
	got, err := store.Get(ctx, overdue.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusExpired, got.Status, "expired once its delivery was made")
	require.Len(t, got.Outbox, 1, "its run.expired delivery, for the next sweep")
	assert.Equal(t, string(webhook.EventExpired), got.Outbox[0].Type)
	assert.Equal(t, service.SweepSummary{Scanned: 3, Expired: 1, Deliveries: 5}, counts(t, res.sum))
}

// waitForSend waits for a send of rcv to start.
func waitForSend(t *testing.T, rcv *heldSender) {
	t.Helper()
	select {
	case <-rcv.started:
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt was made")
	}
}

func TestOtherRunsDeliveredWhileOneReceiverHangs(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	runOtherRunsDeliveredWhileOneHangs(t, db, db)
}

// TestDeliveryConcurrencyBoundsTheRunsAtOnce: a sweep sends to no more
// than DeliveryConcurrency runs at the same time, and to that many while
// runs are left: each send that returns lets the next run's go.
func TestDeliveryConcurrencyBoundsTheRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound, total = 3, 7
		clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		for range total {
			completedRun(t, store)
		}
		rcv := newHeldSender(clock, func(*webhook.Delivery) bool { return true })
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, DeliveryConcurrency: bound,
			Logger: slog.New(slog.DiscardHandler)}
		done := sweepAsync(t, sweeper, rcv)
		for returned := range total {
			synctest.Wait() // every send the sweep would start has started
			now, _ := rcv.inFlightNow()
			require.Equal(t, min(bound, total-returned), now, "sends under way after %d returned", returned)
			rcv.release(1)
		}
		res := <-done
		require.NoError(t, res.err)
		_, most := rcv.inFlightNow()
		assert.Equal(t, bound, most)
		assert.Equal(t, service.SweepSummary{Scanned: total, Deliveries: total}, counts(t, res.sum))
	})
}

// TestDeliveryBudgetStopsNewAttempts: once one more attempt could overrun
// the sweep's delivery budget, no run's next attempt starts, neither a run
// not begun nor the next delivery of a run whose attempt was under way;
// the attempts under way finish and are recorded, and the sweep says
// there is more. The next sweep makes the rest, each run's in order.
func TestDeliveryBudgetStopsNewAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		var all []*runs.Run
		for range 4 {
			all = append(all, cancelledRun(t, store, clock))
		}
		hold := true
		rcv := newHeldSender(clock, func(*webhook.Delivery) bool { return hold })
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, DeliveryConcurrency: 2,
			DeliveryBudget: time.Minute, Logger: slog.New(slog.DiscardHandler)}
		done := sweepAsync(t, sweeper, rcv)
		synctest.Wait()
		now, _ := rcv.inFlightNow()
		require.Equal(t, 2, now, "two runs' first attempts under way")
		// The receivers take 50 s: one more attempt, at its longest
		// (15 s), would end past the minute.
		clock.Advance(50 * time.Second)
		rcv.release(-1)
		res := <-done
		require.NoError(t, res.err)
		assert.Equal(t, service.SweepSummary{Scanned: 4, Deliveries: 2, More: true}, counts(t, res.sum))
		pending := 0
		for _, r := range all {
			got, err := store.Get(ctx, r.ID)
			require.NoError(t, err)
			pending += len(got.Outbox)
			assert.Len(t, rcv.sentTo(r.ID), 2-len(got.Outbox), "run %s: sent what was recorded, no more", r.ID)
		}
		assert.Equal(t, 6, pending, "the attempts under way, and only those, were made")

		hold = false
		clock.Advance(time.Minute) // a sweep later: its own budget
		sum, err := sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, service.SweepSummary{Scanned: 4, Deliveries: 6}, counts(t, sum))
		for _, r := range all {
			types := []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}
			assert.Equal(t, types, rcv.sentTo(r.ID), "run %s: in order", r.ID)
			assert.Equal(t, types, attemptedTypes(t, store, r.ID), "run %s: recorded in order", r.ID)
		}
	})
}

// TestMaxDeliveriesBoundsTheSweep: MaxDeliveries bounds the attempts a
// sweep makes across all the runs it sends to at the same time.
func TestMaxDeliveriesBoundsTheSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		for range 5 {
			completedRun(t, store)
		}
		rcv := newHeldSender(clock, func(*webhook.Delivery) bool { return true })
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, MaxDeliveries: 3,
			Logger: slog.New(slog.DiscardHandler)}
		done := sweepAsync(t, sweeper, rcv)
		synctest.Wait()
		now, _ := rcv.inFlightNow()
		assert.Equal(t, 3, now, "attempts begun")
		rcv.release(-1)
		res := <-done
		require.NoError(t, res.err)
		assert.Equal(t, service.SweepSummary{Scanned: 5, Deliveries: 3, More: true}, counts(t, res.sum))
	})
}

// unreadableSender is a WebhookSender whose secret cannot be read: Ready
// and Send say so. A Send waits (up to a second) for a second one to come
// along, so that sends made at the same time show.
type unreadableSender struct {
	mu     sync.Mutex
	ready  int
	sends  int
	second chan struct{}
}

func (u *unreadableSender) Ready(context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ready++
	return deniedReadError()
}

func (u *unreadableSender) Send(context.Context, *webhook.Delivery) (webhook.Attempt, error) {
	u.mu.Lock()
	u.sends++
	if u.sends == 2 {
		close(u.second)
	}
	u.mu.Unlock()
	select {
	case <-u.second:
	case <-time.After(time.Second):
	}
	return webhook.Attempt{}, deniedReadError()
}

func deniedReadError() error {
	return &webhook.SecretUnavailableError{SecretID: deniedSecretID, Reason: "AccessDeniedException"}
}

// TestAnUnreadableSecretIsAskedForOnceASweep: a sweep whose secret cannot
// be read asks for it once, whatever the number of runs it would send to
// at the same time; every due delivery waits, and it warns once.
func TestAnUnreadableSecretIsAskedForOnceASweep(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	for range 6 {
		completedRun(t, store)
	}
	logs := &recordedLogs{}
	u := &unreadableSender{second: make(chan struct{})}
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: u, Logger: slog.New(logs)}
	sum, err := sweeper.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, service.SweepSummary{Scanned: 6, WaitingForSecret: 6}, counts(t, sum))
	assert.Equal(t, 1, u.ready, "asked once")
	assert.Zero(t, u.sends, "no attempt")
	assert.Equal(t, 1, logs.count(slog.LevelWarn, "the webhook secret could not be read"), "one warning")
	assert.Equal(t, 1, logs.count(slog.LevelWarn, "AccessDeniedException"), "saying why")
}

// TestARunIsTakenUpOnceASweep: a run whose deliveries are under way moves
// within the due index with each attempt recorded, and a later page of the
// same sweep can hold it again; the sweep does not take it up a second
// time (which would send its next delivery twice at once).
func TestARunIsTakenUpOnceASweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		// Its first delivery due now, its second in a minute: the run
		// sorts first in the due index, and after its first attempt is
		// recorded, last, past a page (100) of other runs.
		moving := waitingRun(t, store, clock)
		clock.Advance(30 * time.Second)
		for range 100 {
			completedRun(t, store)
		}
		clock.Advance(30 * time.Second)
		moving, err := store.Cancel(ctx, moving, "alice")
		require.NoError(t, err)
		require.Len(t, moving.Outbox, 2)

		// The other runs' sends wait until the moving run's second is
		// under way: by then its first is recorded.
		others := true
		rcv := newHeldSender(clock, func(d *webhook.Delivery) bool {
			if d.RunID == moving.ID {
				return d.Type == webhook.EventCancelled
			}
			return others
		})
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler)}
		done := sweepAsync(t, sweeper, rcv)
		synctest.Wait()
		require.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}, rcv.sentTo(moving.ID))
		got, err := store.Get(ctx, moving.ID)
		require.NoError(t, err)
		require.Len(t, got.Outbox, 1, "its first attempt recorded")
		require.True(t, got.DueAt.Equal(clock.Now()), "due now, after the first page")

		// The other runs go; the sweep reads its next page meanwhile, and
		// finds the run there again.
		rcv.mu.Lock()
		others = false
		rcv.mu.Unlock()
		for rcv.releaseAllBut(moving.ID) > 0 {
			synctest.Wait()
		}
		rcv.release(-1)
		res := <-done
		require.NoError(t, res.err)
		assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}, rcv.sentTo(moving.ID), "each sent once")
		assert.Equal(t, service.SweepSummary{Scanned: 101, Deliveries: 102}, counts(t, res.sum))
	})
}

// ctxSender is a heldSender whose attempts fail as a real send's do when
// their context ends before the receiver answers (webhook.Sender's HTTP
// request is cut short).
type ctxSender struct{ *heldSender }

func (c ctxSender) Send(ctx context.Context, d *webhook.Delivery) (webhook.Attempt, error) {
	a, err := c.heldSender.Send(ctx, d)
	if ctx.Err() != nil {
		return webhook.Attempt{At: a.At, Outcome: webhook.OutcomeFailed, Error: webhook.ErrClassTimeout}, nil
	}
	return a, err
}

// TestAStoppedSweepFinishesTheAttemptUnderWay: a sweep whose context ends
// (the process stops) while a receiver is answering starts no further
// attempt, but lets the one under way end as the receiver answers and
// records it so (delivered), not as a failure of the receiver's; the
// run's next delivery is left to the next sweep.
func TestAStoppedSweepFinishesTheAttemptUnderWay(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	r := cancelledRun(t, store, clock)
	held := newHeldSender(clock, func(*webhook.Delivery) bool { return true })
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: ctxSender{held}, Logger: slog.New(slog.DiscardHandler)}
	done := make(chan sweepResult, 1)
	go func() {
		sum, err := sweeper.Sweep(ctx)
		done <- sweepResult{sum, err}
	}()
	waitForSend(t, held)
	stop()
	held.stopHolding()
	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, 1, res.sum.Deliveries)
	assert.True(t, res.sum.More, "the run's second delivery is left for the next sweep")
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval}, held.sentTo(r.ID), "no attempt started once stopped")

	got, err := store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	require.Equal(t, 1, len(got.Outbox), "the attempt under way was recorded as delivered")
	evs, err := store.Events(context.Background(), r.ID, 0, 1000)
	require.NoError(t, err)
	var outcome webhook.Outcome
	for _, ev := range evs {
		if ev.Type == runs.EventWebhookAttempt {
			var data struct {
				Attempt webhook.Attempt `json:"attempt"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			outcome = data.Attempt.Outcome
		}
	}
	assert.Equal(t, webhook.OutcomeDelivered, outcome)
}

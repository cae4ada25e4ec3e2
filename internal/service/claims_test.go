package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// deliverResult is what a DeliverRun run on a goroutine of its own
// returned.
type deliverResult struct {
	sum service.SweepSummary
	err error
}

// deliverAsync runs s.DeliverRun(ctx, id) on a goroutine of its own; when
// the test ends (before the store closes), rcv stops holding sends and
// the call is waited for.
func deliverAsync(t *testing.T, ctx context.Context, s *service.Sweeper, rcv *heldSender, id string) <-chan deliverResult {
	t.Helper()
	done := make(chan deliverResult, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sum, err := s.DeliverRun(ctx, id)
		done <- deliverResult{sum, err}
	}()
	t.Cleanup(func() {
		rcv.stopHolding()
		<-exited
	})
	return done
}

// holdFirst holds the first send to run id, and no other.
func holdFirst(id *string) func(d *webhook.Delivery) bool {
	held := false
	return func(d *webhook.Delivery) bool {
		if held || d.RunID != *id {
			return false
		}
		held = true
		return true
	}
}

// TestASweepLeavesARunAFirstAttemptHas: while a first attempt (DeliverRun)
// waits for a slow receiver, a sweep of the same process that makes its
// attempts itself (the purge function's) is not held up by it and does
// not attempt that run's deliveries (it would send the entry under way a
// second time, at the same time): it leaves the run and makes the other
// runs' attempts and lifecycle steps (an expiry). A DeliverRun for the run
// meanwhile leaves it too. Each delivery is sent once, in order.
func TestASweepLeavesARunAFirstAttemptHas(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	slow := cancelledRun(t, store, clock)
	done := completedRun(t, store)
	overdue := waitingRun(t, store, clock)
	clock.Advance(time.Hour + time.Minute) // overdue's approval window has closed

	rcv := newHeldSender(clock, holdFirst(&slow.ID))
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler)}
	first := deliverAsync(t, ctx, sweeper, rcv, slow.ID)
	waitForSend(t, rcv)
	require.Equal(t, slow.ID, rcv.firstHeld())

	sum, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, service.SweepSummary{Scanned: 3, Expired: 1, Skipped: 1, Deliveries: 2}, counts(t, sum))
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval}, rcv.sentTo(slow.ID), "the entry under way is not sent again")
	assert.Equal(t, []webhook.EventType{webhook.EventCompleted}, rcv.sentTo(done.ID))
	got, err := store.Get(ctx, overdue.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusExpired, got.Status)

	again, err := sweeper.DeliverRun(ctx, slow.ID)
	require.NoError(t, err)
	assert.Equal(t, service.SweepSummary{Skipped: 1}, counts(t, again), "left to the pass that has it")

	rcv.release(-1)
	res := <-first
	require.NoError(t, res.err)
	assert.Equal(t, 2, res.sum.Deliveries)
	types := []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}
	assert.Equal(t, types, rcv.sentTo(slow.ID), "each sent once, in order")
	assert.Equal(t, types, attemptedTypes(t, store, slow.ID))
}

// TestADeliverRunLeftForAnotherIsQueuedWhenLetGo: a DeliverRun for a run
// whose attempts another DeliverRun has under way leaves it at once; the
// run is given to QueueDeliveries when that pass lets it go (the pass may
// have read the run before the delivery the second call was for), once.
func TestADeliverRunLeftForAnotherIsQueuedWhenLetGo(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	r := cancelledRun(t, store, clock)
	rcv := newHeldSender(clock, holdFirst(&r.ID))
	queued := make(chan string, 8)
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler),
		QueueDeliveries: func(id string) { queued <- id }}
	first := deliverAsync(t, ctx, sweeper, rcv, r.ID)
	waitForSend(t, rcv)

	for range 2 {
		sum, err := sweeper.DeliverRun(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, service.SweepSummary{Skipped: 1}, counts(t, sum))
	}
	assert.Empty(t, queued, "not while the pass has it")

	rcv.release(-1)
	res := <-first
	require.NoError(t, res.err)
	assert.Equal(t, 2, res.sum.Deliveries)
	require.Len(t, queued, 1, "queued once")
	assert.Equal(t, r.ID, <-queued)
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}, rcv.sentTo(r.ID))
}

// TestASweepWithAQueueMakesNoAttempt: a sweep of a Sweeper with
// QueueDeliveries (serve's) makes no webhook attempt, so no receiver holds
// it up: it takes the lifecycle steps (an expiry) and gives the runs with
// deliveries due to QueueDeliveries once it lets them go; a run a
// DeliverRun has is left to it.
func TestASweepWithAQueueMakesNoAttempt(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	slow := completedRun(t, store)
	done := completedRun(t, store)
	overdue := waitingRun(t, store, clock)
	clock.Advance(time.Hour + time.Minute) // overdue's approval window has closed

	rcv := newHeldSender(clock, holdFirst(&slow.ID))
	queued := make(chan string, 8)
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler),
		QueueDeliveries: func(id string) { queued <- id }}
	first := deliverAsync(t, ctx, sweeper, rcv, slow.ID)
	waitForSend(t, rcv)

	sum, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, service.SweepSummary{Scanned: 3, Expired: 1, Skipped: 1, Queued: 2}, counts(t, sum))
	assert.Empty(t, rcv.sentTo(done.ID), "no attempt by the sweep")
	assert.Empty(t, rcv.sentTo(overdue.ID), "no attempt by the sweep")
	got, err := store.Get(ctx, overdue.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusExpired, got.Status)
	require.Len(t, queued, 2)
	assert.ElementsMatch(t, []string{done.ID, overdue.ID}, []string{<-queued, <-queued})

	rcv.release(-1)
	res := <-first
	require.NoError(t, res.err)
	assert.Empty(t, queued, "the run the DeliverRun had is not queued: nothing asked for it")
	for _, id := range []string{done.ID, overdue.ID} {
		_, err := sweeper.DeliverRun(ctx, id)
		require.NoError(t, err)
	}
	assert.Equal(t, []webhook.EventType{webhook.EventCompleted}, rcv.sentTo(done.ID))
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventExpired}, rcv.sentTo(overdue.ID), "in order")
}

// TestAPassStopsWithItsContextOnceTheAttemptUnderWayIsRecorded: when the
// context of a pass ends (the process stops) during an attempt, the
// attempt is not cut short: it is recorded as the receiver answered, and
// the run's next delivery is left for later.
func TestAPassStopsWithItsContextOnceTheAttemptUnderWayIsRecorded(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	r := cancelledRun(t, store, clock)
	rcv := newHeldSender(clock, holdFirst(&r.ID))
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler)}
	ctx, stop := context.WithCancel(context.Background())
	first := deliverAsync(t, ctx, sweeper, rcv, r.ID)
	waitForSend(t, rcv)
	stop()
	rcv.release(-1)
	res := <-first
	require.NoError(t, res.err)
	assert.Equal(t, service.SweepSummary{Deliveries: 1, More: true}, counts(t, res.sum))
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval}, rcv.sentTo(r.ID), "no attempt after the context ended")
	assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval}, attemptedTypes(t, store, r.ID), "the attempt under way recorded")
	got, err := store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	require.Len(t, got.Outbox, 1)
	assert.Equal(t, string(webhook.EventCancelled), got.Outbox[0].Type, "left for later")
}

// overlapSender is a receiver that notes every send that starts while
// another send to the same run is under way, and counts the sends of each
// delivery (webhook-id). Each send takes a moment, so that passes
// interleave.
type overlapSender struct {
	clock *clocktest.Clock

	mu       sync.Mutex
	inFlight map[string]bool
	overlaps []string
	sends    map[string]int
}

func (o *overlapSender) Send(_ context.Context, d *webhook.Delivery) (webhook.Attempt, error) {
	o.mu.Lock()
	if o.inFlight[d.RunID] {
		o.overlaps = append(o.overlaps, fmt.Sprintf("run %s: %s sent while another send to the run was under way", d.RunID, d.Type))
	}
	o.inFlight[d.RunID] = true
	o.sends[d.ID]++
	o.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	o.mu.Lock()
	o.inFlight[d.RunID] = false
	o.mu.Unlock()
	return webhook.Attempt{At: o.clock.Now(), Outcome: webhook.OutcomeDelivered, StatusCode: 204}, nil
}

func (*overlapSender) Ready(context.Context) error { return nil }

// TestConcurrentPassesNeverAttemptOneRunAtOnce: sweeps and DeliverRuns of
// one Sweeper running at the same time, on several goroutines each, over
// the same runs (a DeliverRun for each run, and again for each run given
// to QueueDeliveries), never make two attempts to one run at the same
// time, and send each delivery once: a pass leaves a run another has, and
// a sweep reads again a run another pass let go since it began. With
// sweeps that make attempts themselves (purge's) and with sweeps that
// queue them (serve's). Run it with -race.
func TestConcurrentPassesNeverAttemptOneRunAtOnce(t *testing.T) {
	for _, sweepsQueue := range []bool{false, true} {
		t.Run(fmt.Sprintf("sweeps queue %t", sweepsQueue), func(t *testing.T) {
			concurrentPasses(t, sweepsQueue)
		})
	}
}

func concurrentPasses(t *testing.T, sweepsQueue bool) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC))
	store := openWebhookStore(t, clock)
	const total = 40
	var ids []string
	entries := 0
	for i := range total {
		var r *runs.Run
		if i%2 == 0 {
			r = cancelledRun(t, store, clock)
		} else {
			r = completedRun(t, store)
		}
		ids = append(ids, r.ID)
		entries += len(r.Outbox)
	}
	rcv := &overlapSender{clock: clock, inFlight: map[string]bool{}, sends: map[string]int{}}
	queue := make(chan string, 4*total)
	for _, id := range ids {
		queue <- id
	}
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Logger: slog.New(slog.DiscardHandler), DeliveryConcurrency: 4}
	if sweepsQueue {
		sweeper.QueueDeliveries = func(id string) {
			select {
			case queue <- id:
			default: // the next sweep gives it again
			}
		}
	}

	pending := func() int {
		n := 0
		for _, id := range ids {
			r, err := store.Get(ctx, id)
			require.NoError(t, err)
			n += len(r.Outbox)
		}
		return n
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = sweeper.Sweep(ctx)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case id := <-queue:
					_, _ = sweeper.DeliverRun(ctx, id)
				}
			}
		})
	}
	for deadline := time.Now().Add(time.Minute); pending() > 0; time.Sleep(time.Millisecond) { // a guard against hanging
		require.True(t, time.Now().Before(deadline), "deliveries left undone")
	}
	close(stop)
	wg.Wait()

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	assert.Empty(t, rcv.overlaps)
	assert.Len(t, rcv.sends, entries, "every delivery sent")
	for id, n := range rcv.sends {
		assert.Equal(t, 1, n, "delivery %s: sent once", id)
	}
}

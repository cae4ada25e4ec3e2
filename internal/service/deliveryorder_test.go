package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// orderReceiver is a receiver that answers 500 until it is told to answer
// 200, and keeps what it took (answered 2xx), in order.
type orderReceiver struct {
	clock *clocktest.Clock
	up    bool
	// gone is an event type answered 410 while up.
	gone webhook.EventType
	took []webhook.EventType
}

func (o *orderReceiver) Send(_ context.Context, d *webhook.Delivery) (webhook.Attempt, error) {
	if o.up && d.Type == o.gone {
		return webhook.Attempt{At: o.clock.Now(), Outcome: webhook.OutcomeGone, StatusCode: 410, Error: webhook.ErrClassStatus}, nil
	}
	if !o.up {
		return webhook.Attempt{At: o.clock.Now(), Outcome: webhook.OutcomeFailed, StatusCode: 500, Error: webhook.ErrClassStatus}, nil
	}
	o.took = append(o.took, d.Type)
	return webhook.Attempt{At: o.clock.Now(), Outcome: webhook.OutcomeDelivered, StatusCode: 204}, nil
}

func (*orderReceiver) Ready(context.Context) error { return nil }

// noJitter is the default schedule without jitter: a retry is due exactly
// a minute after a first attempt that failed.
var noJitter = func() webhook.Schedule { s := webhook.DefaultSchedule; s.Jitter = 0; return s }()

// TestOneRunsDeliveriesGoOldestFirst: a run's deliveries reach a receiver
// that comes back oldest first (README: "one run's one after another,
// oldest first"). Before, each delivery was attempted when its own retry
// was due: a retry whose jitter came out shorter, or the first attempt of
// a later event, went ahead of an older delivery still waiting for its
// retry (tester helper-77: "completed" arrived first). Now nothing of a run
// goes before its oldest pending delivery is due, and the later ones go
// right after it, in the same pass.
func TestOneRunsDeliveriesGoOldestFirst(t *testing.T) {
	ctx := context.Background()
	t.Run("a retry that came out earlier waits for the older delivery's", func(t *testing.T) {
		clock := clocktest.New(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		rcv := &orderReceiver{clock: clock}
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Schedule: noJitter}
		r := cancelledRun(t, store, clock) // run.waiting_for_approval, then run.cancelled, both due now

		sum, err := sweeper.Sweep(ctx) // both first attempts fail (500)
		require.NoError(t, err)
		require.Equal(t, 2, sum.Deliveries)
		r, err = store.Get(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, r.Outbox, 2)
		// The jitter of each delivery's retry as it may come out: the
		// older one's drawn 10 s later than the newer one's.
		older := r.Outbox[0]
		older.DueAt = older.DueAt.Add(10 * time.Second)
		r, err = store.PostponeOutbox(ctx, r, older.ID, older)
		require.NoError(t, err)
		assert.True(t, r.DueAt.Equal(older.DueAt), "the run is due when its oldest delivery is (%s), not its newer one's %s", r.DueAt, r.Outbox[1].DueAt)

		rcv.up = true
		clock.Advance(65 * time.Second) // the newer retry is due, the older not yet
		sum, err = sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.Deliveries, "the newer delivery does not go ahead of the older one")
		assert.Empty(t, rcv.took)

		clock.Advance(5 * time.Second)
		sum, err = sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, sum.Deliveries)
		assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}, rcv.took, "oldest first")
		assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled, webhook.EventWaitingForApproval, webhook.EventCancelled},
			attemptedTypes(t, store, r.ID))
		done, err := store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Empty(t, done.Outbox)
	})

	t.Run("a first attempt waits for an older delivery's retry", func(t *testing.T) {
		clock := clocktest.New(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		rcv := &orderReceiver{clock: clock}
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Schedule: noJitter}
		r := waitingRun(t, store, clock)
		_, err := sweeper.DeliverRun(ctx, r.ID) // the first attempt fails; its retry is due in a minute
		require.NoError(t, err)

		clock.Advance(30 * time.Second)
		rcv.up = true
		r, err = store.Get(ctx, r.ID)
		require.NoError(t, err)
		r, err = store.Cancel(ctx, r, "alice") // run.cancelled, due at once
		require.NoError(t, err)
		require.Len(t, r.Outbox, 2)
		sum, err := sweeper.DeliverRun(ctx, r.ID) // as serve does when the write is durable
		require.NoError(t, err)
		assert.Zero(t, sum.Deliveries, "the cancel's first attempt does not go ahead of the older delivery's retry")
		r, err = store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.True(t, r.DueAt.Equal(r.Outbox[0].DueAt), "due for the older retry")

		clock.Advance(30 * time.Second)
		sum, err = sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, sum.Deliveries)
		assert.Equal(t, []webhook.EventType{webhook.EventWaitingForApproval, webhook.EventCancelled}, rcv.took, "oldest first")
	})

	t.Run("a delivery behind a failing one goes with it, at its pace", func(t *testing.T) {
		clock := clocktest.New(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		rcv := &orderReceiver{clock: clock}
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Schedule: noJitter}
		r := cancelledRun(t, store, clock)
		var last *runs.Run
		// Four rounds of failures, each pass at the older delivery's
		// retry: each attempts both, older first, though the newer one's
		// own retry is drawn 20 s later each time (as jitter may).
		for _, wait := range []time.Duration{0, time.Minute, 4 * time.Minute, 16 * time.Minute} {
			clock.Advance(wait)
			sum, err := sweeper.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, sum.Deliveries, "after %s", wait)
			last, err = store.Get(ctx, r.ID)
			require.NoError(t, err)
			newer := last.Outbox[1]
			newer.DueAt = newer.DueAt.Add(20 * time.Second)
			last, err = store.PostponeOutbox(ctx, last, newer.ID, newer)
			require.NoError(t, err)
		}
		require.Len(t, last.Outbox, 2)
		for _, e := range last.Outbox {
			d, err := webhook.DeliveryOf(e)
			require.NoError(t, err)
			assert.Equal(t, 4, d.Attempts, "%s: as many attempts as the older one", d.Type)
		}
		assert.Equal(t, []webhook.EventType{
			webhook.EventWaitingForApproval, webhook.EventCancelled, webhook.EventWaitingForApproval, webhook.EventCancelled,
			webhook.EventWaitingForApproval, webhook.EventCancelled, webhook.EventWaitingForApproval, webhook.EventCancelled,
		}, attemptedTypes(t, store, r.ID))
	})

	t.Run("410 on the older one stops it and lets the newer one go", func(t *testing.T) {
		clock := clocktest.New(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
		store := openWebhookStore(t, clock)
		rcv := &orderReceiver{clock: clock}
		sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: rcv, Schedule: noJitter}
		r := cancelledRun(t, store, clock)
		_, err := sweeper.Sweep(ctx) // both fail
		require.NoError(t, err)
		rcv.up, rcv.gone = true, webhook.EventWaitingForApproval
		clock.Advance(time.Minute)
		sum, err := sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, sum.Deliveries)
		assert.Equal(t, []webhook.EventType{webhook.EventCancelled}, rcv.took, "the older one stopped by 410, the newer delivered in the same pass")
		done, err := store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Empty(t, done.Outbox)
	})
}

package service_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// senderFunc is a WebhookSender that answers with an attempt of its own.
type senderFunc func() webhook.Attempt

func (f senderFunc) Send(context.Context, *webhook.Delivery) (webhook.Attempt, error) {
	return f(), nil
}

func (senderFunc) Ready(context.Context) error { return nil }

// TestRetentionWaitsForDeliveries: a settled run past a retention shorter
// than its webhook's retries (the tester's --retention 10s) is not purged
// while a delivery is pending, which would lose it; it is purged by the
// sweep that delivers its last one.
func TestRetentionWaitsForDeliveries(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	store, db, err := embedded.OpenStore(filepath.Join(t.TempDir(), "r.db"),
		runs.Options{Now: clock.Now, Retention: time.Minute, Outbound: webhook.Outbound(nil)})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	outcome := webhook.OutcomeFailed
	sweeper := &service.Sweeper{Store: store, Now: clock.Now, Webhooks: senderFunc(func() webhook.Attempt {
		return webhook.Attempt{At: clock.Now(), Outcome: outcome}
	})}

	r, err := store.Create(ctx, runs.NewRun{ID: runs.NewRunID(), Initiator: "alice", Approvers: []string{"bob"},
		Request: json.RawMessage(`{"prompt":"hi"}`), Webhook: &runs.Subscription{URL: "https://hooks.example.com/x"}})
	require.NoError(t, err)
	r, err = store.Claim(ctx, r.ID, "w")
	require.NoError(t, err)
	_, err = store.Settle(ctx, r, "w", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)

	sum, err := sweeper.Sweep(ctx) // attempt 1 fails; the retry is due in a minute
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Deliveries)
	clock.Advance(10 * time.Minute) // past the retention and the retry
	sum, err = sweeper.Sweep(ctx)   // attempt 2 fails; the run stays for the next
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Deliveries)
	assert.Zero(t, sum.Purged, "not purged with a delivery pending")
	kept, err := store.Get(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, kept.Outbox, 1)
	assert.True(t, kept.DueAt.Equal(kept.Outbox[0].DueAt), "due for the retry, not at once again")

	outcome = webhook.OutcomeDelivered
	clock.Advance(time.Hour)
	sum, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Deliveries)
	assert.Equal(t, 1, sum.Purged, "purged once delivered")
	_, err = store.Get(ctx, r.ID)
	assert.Equal(t, runs.ENotFound, runs.ErrorCode(err))
}

// TestAnAttemptRecordedLateIsNotSentAgain: a receiver that approves the
// run before it answers makes the attempt's record conflict (the run is
// resuming: a record never conflicts with a worker); the process keeps
// the attempt and records it once the run stops, without sending it again.
func TestAnAttemptRecordedLateIsNotSentAgain(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	env := runstest.NewEnv(t, runstest.Harness{Rows: db, States: db})
	store := runs.NewStore(db, db, runs.Options{Now: env.Clock.Now, Outbound: webhook.Outbound(nil)})
	r, err := store.Create(ctx, runs.NewRun{ID: runs.NewRunID(), Initiator: "alice", Approvers: []string{"bob"},
		Request: json.RawMessage(`{"prompt":"hi"}`), Webhook: &runs.Subscription{URL: "https://hooks.example.com/x"}})
	require.NoError(t, err)
	r, err = store.Claim(ctx, r.ID, "w")
	require.NoError(t, err)
	sp, _ := env.Suspension(r, "s1")
	r, err = store.Suspend(ctx, r, "w", sp)
	require.NoError(t, err)
	require.Len(t, r.Outbox, 1)
	waitingID := r.Outbox[0].ID

	var sent []string
	sweeper := &service.Sweeper{Store: store, Now: env.Clock.Now}
	sweeper.Webhooks = sendingFunc(func(d *webhook.Delivery) webhook.Attempt {
		sent = append(sent, d.ID)
		if d.ID == waitingID { // the receiver decides before it answers
			cur, err := store.Get(ctx, r.ID)
			require.NoError(t, err)
			_, err = store.Decide(ctx, cur, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI,
				Decision: loop.Decision{TurnDigest: cur.TurnDigest, Action: loop.ActionApprove}})
			require.NoError(t, err)
		}
		return webhook.Attempt{At: env.Clock.Now(), Outcome: webhook.OutcomeDelivered}
	})
	_, err = sweeper.DeliverRun(ctx, r.ID)
	require.NoError(t, err)
	resuming, err := store.Get(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, resuming.Status)
	require.Len(t, resuming.Outbox, 1, "the attempt's record was refused")

	r, err = store.Claim(ctx, r.ID, "w")
	require.NoError(t, err)
	_, err = store.Settle(ctx, r, "w", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	_, err = sweeper.DeliverRun(ctx, r.ID)
	require.NoError(t, err)
	done, err := store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Empty(t, done.Outbox, "both recorded")
	require.Len(t, sent, 2, "the first delivery is not sent again")
	assert.Equal(t, waitingID, sent[0])
	assert.NotEqual(t, waitingID, sent[1])
}

// sendingFunc is a WebhookSender that sees the delivery.
type sendingFunc func(*webhook.Delivery) webhook.Attempt

func (f sendingFunc) Send(_ context.Context, d *webhook.Delivery) (webhook.Attempt, error) {
	return f(d), nil
}

func (sendingFunc) Ready(context.Context) error { return nil }

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
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// senderFunc is a WebhookSender that answers with an attempt of its own.
type senderFunc func() webhook.Attempt

func (f senderFunc) Send(context.Context, *webhook.Delivery) webhook.Attempt { return f() }

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

package runstest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// outboxEntries is the suite's Outbound: one entry per new status (and
// suspension), plus extra entries when the run's subscription asks for
// "burst" (to exceed MaxOutbox in one write).
func outboxEntries(next *runs.Run, at time.Time) ([]runs.OutboxEntry, error) {
	if next.Status != runs.StatusWaiting && !next.Status.Terminal() {
		return nil, nil
	}
	n := 1
	if len(next.Webhook.Events) > 0 && next.Webhook.Events[0] == "burst" {
		n = runs.MaxOutbox + 2
	}
	var out []runs.OutboxEntry
	for i := range n {
		out = append(out, runs.OutboxEntry{
			ID: fmt.Sprintf("msg_%s_%s_%s_%d", next.ID, next.Status, next.SuspensionID, i), Type: string(next.Status), DueAt: at,
			Data: json.RawMessage(`{"attempts":0}`),
		})
	}
	return out, nil
}

func testOutbox(t *testing.T, h Harness) {
	e := NewEnv(t, h)
	e.Store = runs.NewStore(h.Rows, h.States, runs.Options{Now: e.Clock.Now, LeaseTTL: LeaseTTL, DispatchGrace: DispatchGrace, Retention: Retention, Outbound: outboxEntries})
	ctx := t.Context()
	create := func(events ...string) *runs.Run {
		r, err := e.Store.Create(ctx, runs.NewRun{
			ID: fmt.Sprintf("run-wh-%d-%s", e.n.Add(1), rand.Text()[:8]), Initiator: "alice", Approvers: []string{"bob"},
			Request: json.RawMessage(`{"prompt":"hi"}`), Webhook: &runs.Subscription{URL: "https://hooks.example.com/x", Events: events},
		})
		require.NoError(t, err)
		return r
	}

	t.Run("scheduled with the transition, due before the deadline", func(t *testing.T) {
		r := create()
		require.Equal(t, "https://hooks.example.com/x", r.Webhook.URL)
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		assert.Empty(t, r.Outbox, "RUNNING is not announced")
		sp, _ := e.Suspension(r, "s1")
		before := r.Version
		r, err = e.Store.Suspend(ctx, r, "w1", sp)
		require.NoError(t, err)
		assert.Equal(t, before+1, r.Version, "one write")
		require.Len(t, r.Outbox, 1)
		now := e.Clock.Now().UTC().Truncate(time.Millisecond)
		assert.Equal(t, now, r.DueAt, "due at once for its first attempt, not at the approval deadline")
		assert.Equal(t, r.ApprovalDeadline, e.Store.LifecycleDue(r))
		types := e.eventTypes(t, r.ID)
		assert.Equal(t, []string{runs.EventSuspended, runs.EventWebhookScheduled}, types[len(types)-2:])
		got, err := e.Store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r, got, "the outbox round-trips through the adapter")

		due, _, err := e.Store.Due(ctx, now, 100, "")
		require.NoError(t, err)
		assert.True(t, containsRun(due, r.ID), "the due index holds the run for its delivery")

		id := r.Outbox[0].ID
		next := r.Outbox[0]
		next.DueAt = now.Add(time.Minute)
		next.Data = json.RawMessage(`{"attempts":1}`)
		r, err = e.Store.RecordOutbox(ctx, r, id, &next, runs.Event{Data: json.RawMessage(`{"status_code":500}`)})
		require.NoError(t, err)
		assert.Equal(t, now.Add(time.Minute), r.DueAt)
		assert.JSONEq(t, `{"attempts":1}`, string(r.Outbox[0].Data))
		types = e.eventTypes(t, r.ID)
		assert.Equal(t, runs.EventWebhookAttempt, types[len(types)-1])

		r, err = e.Store.RecordOutbox(ctx, r, id, nil, runs.Event{})
		require.NoError(t, err)
		assert.Empty(t, r.Outbox)
		assert.Equal(t, r.ApprovalDeadline, r.DueAt)
		_, err = e.Store.RecordOutbox(ctx, r, id, nil, runs.Event{})
		AssertCode(t, runs.EConflict, err)

		r, err = e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
		require.Len(t, r.Outbox, 1, "the terminal event is scheduled by the cancel")
		assert.Equal(t, string(runs.StatusCancelled), r.Outbox[0].Type)
	})

	t.Run("postponed without an event", func(t *testing.T) {
		r := create()
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		r, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
		require.NoError(t, err)
		require.Len(t, r.Outbox, 1)
		before := e.eventTypes(t, r.ID)
		now := e.Clock.Now().UTC().Truncate(time.Millisecond)
		next := r.Outbox[0]
		next.DueAt = now.Add(5 * time.Minute)
		next.Data = json.RawMessage(`{"attempts":0,"waiting_since":"x"}`)
		r, err = e.Store.PostponeOutbox(ctx, r, next.ID, next)
		require.NoError(t, err)
		assert.Equal(t, now.Add(5*time.Minute), r.DueAt, "due when postponed to")
		assert.Equal(t, before, e.eventTypes(t, r.ID), "no event")
		got, err := e.Store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r, got)
		assert.JSONEq(t, string(next.Data), string(got.Outbox[0].Data))
		due, _, err := e.Store.Due(ctx, now, 100, "")
		require.NoError(t, err)
		assert.False(t, containsRun(due, r.ID), "out of the due index until then")
		_, err = e.Store.PostponeOutbox(ctx, r, "msg_other", next)
		AssertCode(t, runs.EConflict, err)
	})

	t.Run("due when the front entry is: the outbox goes oldest first", func(t *testing.T) {
		r := create()
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		sp, _ := e.Suspension(r, "s1")
		r, err = e.Store.Suspend(ctx, r, "w1", sp)
		require.NoError(t, err)
		now := e.Clock.Now().UTC().Truncate(time.Millisecond)
		front := r.Outbox[0]
		front.DueAt = now.Add(5 * time.Minute) // its retry
		front.Data = json.RawMessage(`{"attempts":1}`)
		r, err = e.Store.RecordOutbox(ctx, r, front.ID, &front, runs.Event{})
		require.NoError(t, err)
		r, err = e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
		require.Len(t, r.Outbox, 2)
		assert.Equal(t, front.ID, r.Outbox[0].ID, "the older entry stays in front")
		assert.Equal(t, now, r.Outbox[1].DueAt, "the new entry's own due time is now")
		assert.Equal(t, now.Add(5*time.Minute), r.DueAt, "but the run is due when its front entry is")
		assert.Equal(t, now.Add(5*time.Minute), r.OutboxDue())
		due, _, err := e.Store.Due(ctx, now, 100, "")
		require.NoError(t, err)
		assert.False(t, containsRun(due, r.ID), "nothing of the run may be sent before its front entry")
		got, err := e.Store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r, got)

		r, err = e.Store.RecordOutbox(ctx, r, front.ID, nil, runs.Event{})
		require.NoError(t, err)
		assert.Equal(t, now, r.DueAt, "the next entry is the front now")
		due, _, err = e.Store.Due(ctx, now, 100, "")
		require.NoError(t, err)
		assert.True(t, containsRun(due, r.ID))
	})

	t.Run("NotifyScheduled names a run whose new entries may be sent", func(t *testing.T) {
		var named []string
		e.Store.NotifyScheduled(func(id string) { named = append(named, id) })
		defer e.Store.NotifyScheduled(nil)
		r := create()
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		assert.Empty(t, named, "a claim schedules nothing")
		sp, _ := e.Suspension(r, "s1")
		r, err = e.Store.Suspend(ctx, r, "w1", sp)
		require.NoError(t, err)
		assert.Equal(t, []string{r.ID}, named, "the suspension scheduled an entry on a waiting run")
		r, err = e.Store.RecordOutbox(ctx, r, r.Outbox[0].ID, nil, runs.Event{})
		require.NoError(t, err)
		assert.Len(t, named, 1, "recording an attempt schedules nothing")
		r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decision: Approve, Decider: "bob", Via: runs.ViaAPI})
		require.NoError(t, err)
		r, err = e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		assert.Len(t, named, 1, "nothing new while it executes")
		_, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
		require.NoError(t, err)
		assert.Equal(t, []string{r.ID, r.ID}, named, "the settle scheduled the terminal entry")
	})

	t.Run("not while executing", func(t *testing.T) {
		r := create()
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		sp, _ := e.Suspension(r, "s1")
		r, err = e.Store.Suspend(ctx, r, "w1", sp)
		require.NoError(t, err)
		r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decision: Approve, Decider: "bob", Via: runs.ViaAPI})
		require.NoError(t, err)
		require.Len(t, r.Outbox, 1, "still pending")
		assert.Equal(t, e.Store.LifecycleDue(r), r.DueAt, "a resuming run is due for its dispatch, not its outbox")
		_, err = e.Store.RecordOutbox(ctx, r, r.Outbox[0].ID, nil, runs.Event{})
		AssertCode(t, runs.EConflict, err)
		r, err = e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		assert.Equal(t, r.LeaseUntil, r.DueAt)
		r, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
		require.NoError(t, err)
		require.Len(t, r.Outbox, 2, "the old entry waited for the run to stop; the terminal one joins it")
		assert.True(t, r.DueAt.Before(r.RetainUntil))
	})

	t.Run("unsubscribed runs get nothing", func(t *testing.T) {
		r, _ := e.Waiting(t)
		assert.Empty(t, r.Outbox)
		assert.Equal(t, r.ApprovalDeadline, r.DueAt)
	})

	t.Run("bounded", func(t *testing.T) {
		r := create("burst")
		r, err := e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err)
		r, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
		require.NoError(t, err)
		assert.Len(t, r.Outbox, runs.MaxOutbox)
		assert.Equal(t, 2, count(e.eventTypes(t, r.ID), runs.EventWebhookDropped))
	})
}

func containsRun(rs []*runs.Run, id string) bool {
	for _, r := range rs {
		if r.ID == id {
			return true
		}
	}
	return false
}

package runstest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// waitingForOne creates a run suspended on "s1" whose turn holds two calls
// that need one approval each (call-1 of the writers, call-3 of the
// mailers) and a read, held for one decision (erin could decide both when
// it was held): erin alone is asked, with no reminder (no link was
// mailed) and a quorum check due.
func (e *Env) waitingForOne(t *testing.T) *runs.Run {
	t.Helper()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls[0].Rule, st.PendingCalls[0].Approval = "writers", &loop.ApprovalRule{Approvers: []string{"group:writers"}}
	st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: "call-3", Name: "send_email", Input: json.RawMessage(`{"to":"y@example.com"}`),
		NeedsApproval: true, Effect: loop.EffectWrite, Rule: "mailers", Approval: &loop.ApprovalRule{Approvers: []string{"group:mailers"}}})
	sp.Tokens = nil
	sp.InboxKeys = []string{"person:erin"}
	sp.QuorumCheckAt = e.Clock.Now().Add(10 * time.Minute)
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	require.False(t, r.Voting())
	require.True(t, r.RemindAt.IsZero())
	return r
}

// person is an eligible decider of the suite: person:<id>, mailed at
// <id>@example.com.
func person(id string) identity.Eligible {
	return identity.Eligible{Subject: identity.Subject{Person: &identity.Person{ID: id}}, Mailbox: id + "@example.com"}
}

// decidersEvent returns the data of r's last event, a deciders_changed
// event of purge's.
func (e *Env) decidersEvent(t *testing.T, r *runs.Run) runs.DecidersEventData {
	t.Helper()
	evs, err := e.Store.Events(e.ctx, r.ID, r.LastSeq-1, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, runs.EventDecidersChanged, evs[0].Type)
	require.Equal(t, "purge", evs[0].Actor)
	var data runs.DecidersEventData
	require.NoError(t, json.Unmarshal(evs[0].Data, &data))
	return data
}

// testReviseDeciders: a quorum check that finds a turn held for one
// decision can no longer be decided by one person, while each call keeps
// its own deciders, switches it to per-call votes and asks those who may
// decide now, in one write conditional on the row it read: the flag, the
// next check, their inbox entries, their links' tokens (hashes) and a
// deciders_changed event saying why; a reminder is set, as after a hold
// that mailed links. A decision built on the row before the switch is
// refused (409), the new deciders' votes decide the turn, and a decision
// that lands before the switch wins over it. A check also drops the inbox
// entries of those who may decide nothing and restores them, remembering
// whom it dropped until the run leaves the suspension. Refusals change
// nothing.
func testReviseDeciders(t *testing.T, e *Env) {
	ctx := t.Context()

	t.Run("switches to per-call votes and asks the new deciders", func(t *testing.T) {
		r := e.waitingForOne(t)
		e.Clock.Advance(10 * time.Minute)
		raw := NewToken()
		rev := runs.DeciderRevision{PerCallVotes: true, Ask: []identity.Eligible{person("ann"), person("carol")},
			Tokens: []runs.TokenGrant{{Hash: HashToken(raw), Approver: "ann@example.com"}}}
		next, err := e.Store.ReviseDeciders(ctx, r, e.Clock.Now().Add(20*time.Minute), nothingLost, rev)
		require.NoError(t, err)
		assert.True(t, next.PerCallVotes)
		assert.True(t, next.Voting())
		assert.Equal(t, r.Version+1, next.Version)
		assert.Equal(t, []string{"person:erin", "person:ann", "person:carol"}, next.InboxKeys)
		assert.Equal(t, e.Clock.Now().Add(20*time.Minute), next.QuorumCheckAt)
		assert.Equal(t, next.QuorumCheckAt, next.DueAt, "the next check comes before the reminder")
		assert.Equal(t, r.SuspendedAt.Add(r.ApprovalDeadline.Sub(r.SuspendedAt)*8/10), next.RemindAt, "a reminder follows the links, as after a hold")
		assert.Equal(t, runs.NotificationSent, next.Notification)
		e.Unchanged(t, next)
		for _, k := range []string{"person:erin", "person:ann", "person:carol"} {
			assert.Contains(t, e.inboxIDs(t, k, 10), r.ID, "%s's inbox lists the run", k)
		}
		tok, err := e.Store.LookupToken(ctx, HashToken(raw))
		require.NoError(t, err)
		assert.Equal(t, runs.ApprovalToken{Hash: HashToken(raw), RunID: r.ID, SuspensionID: "s1", Approver: "ann@example.com", ExpiresAt: r.ApprovalDeadline}, *tok)
		assert.Equal(t, runs.DecidersEventData{SuspensionID: "s1", PerCallVotes: true, Reason: runs.PerCallVotesReason,
			Asked: []string{"person:ann", "person:carol"}, Links: 1}, e.decidersEvent(t, next))

		// One decision built on the row as it was: read the run again.
		_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "erin@example.com", Via: runs.ViaAPI, Decision: Approve})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, next)

		// The new deciders' votes decide the turn, each call by its own.
		v, err := e.Store.Decide(ctx, next, wholeVote("ann", loop.ActionApprove, "call-1"))
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, v.Status)
		assert.NotContains(t, e.inboxIDs(t, "person:ann", 10), r.ID, "ann voted")
		v, err = e.Store.Decide(ctx, v, wholeVote("carol", loop.ActionApprove, "call-3"))
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, v.Status)
		assert.Equal(t, loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{
			{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionApprove}}}, *v.Decision)
		for _, k := range []string{"person:erin", "person:carol"} {
			assert.NotContains(t, e.inboxIDs(t, k, 10), r.ID, "the run left %s's inbox", k)
		}
	})

	t.Run("a decision that lands first wins", func(t *testing.T) {
		r := e.waitingForOne(t)
		checked := r // the row the sweep's check read
		decided, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "erin@example.com", Via: runs.ViaAPI, Decision: Approve})
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, decided.Status)
		_, err = e.Store.ReviseDeciders(ctx, checked, e.Clock.Now().Add(time.Hour), nothingLost,
			runs.DeciderRevision{PerCallVotes: true, Ask: []identity.Eligible{person("ann")}})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, decided)
		assert.False(t, decided.PerCallVotes)
		assert.NotContains(t, e.inboxIDs(t, "person:ann", 10), r.ID)

		// A vote that lands first wins too.
		r = e.waitingPerCall(t)
		voted, err := e.Store.Decide(ctx, r, wholeVote("ann", loop.ActionApprove, "call-1"))
		require.NoError(t, err)
		_, err = e.Store.ReviseDeciders(ctx, r, e.Clock.Now().Add(time.Hour), nothingLost, runs.DeciderRevision{Ask: []identity.Eligible{person("dave")}})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, voted)
	})

	t.Run("drops and restores inbox entries", func(t *testing.T) {
		r := e.waitingForOne(t)
		r, err := e.Store.ReviseDeciders(ctx, r, e.Clock.Now().Add(time.Hour), nothingLost, runs.DeciderRevision{Ask: []identity.Eligible{person("ann")}})
		require.NoError(t, err)
		require.Equal(t, []string{"person:erin", "person:ann"}, r.InboxKeys)
		assert.True(t, r.RemindAt.IsZero(), "no link, no reminder")
		assert.False(t, r.PerCallVotes)

		dropped, err := e.Store.ReviseDeciders(ctx, r, e.Clock.Now().Add(time.Hour), call1Lost(e.Clock.Now()), runs.DeciderRevision{Drop: []string{"person:ann"}})
		require.NoError(t, err)
		assert.Equal(t, []string{"person:erin"}, dropped.InboxKeys)
		assert.Equal(t, []string{"person:ann"}, dropped.InboxDropped)
		assert.Equal(t, map[string]time.Time{"call-1": e.Clock.Now()}, marks(dropped), "what the check found is recorded in the same write")
		e.Unchanged(t, dropped)
		assert.NotContains(t, e.inboxIDs(t, "person:ann", 10), r.ID)
		assert.Contains(t, e.inboxIDs(t, "person:erin", 10), r.ID)
		assert.Equal(t, runs.DecidersEventData{SuspensionID: "s1", Dropped: []string{"person:ann"}}, e.decidersEvent(t, dropped))

		restored, err := e.Store.ReviseDeciders(ctx, dropped, e.Clock.Now().Add(time.Hour), nothingLost, runs.DeciderRevision{Restore: []string{"person:ann"}})
		require.NoError(t, err)
		assert.Equal(t, []string{"person:erin", "person:ann"}, restored.InboxKeys)
		assert.Nil(t, restored.InboxDropped)
		assert.Empty(t, restored.QuorumLost)
		e.Unchanged(t, restored)
		assert.Contains(t, e.inboxIDs(t, "person:ann", 10), r.ID, "listed again")
		assert.Equal(t, runs.DecidersEventData{SuspensionID: "s1", Restored: []string{"person:ann"}}, e.decidersEvent(t, restored))

		// Dropped again; the run then leaves the suspension (a cancel): no
		// entry is left, and nothing is remembered.
		dropped, err = e.Store.ReviseDeciders(ctx, restored, e.Clock.Now().Add(time.Hour), nothingLost, runs.DeciderRevision{Drop: []string{"person:ann"}})
		require.NoError(t, err)
		cancelled, err := e.Store.Cancel(ctx, dropped, "alice")
		require.NoError(t, err)
		assert.Nil(t, cancelled.InboxKeys)
		assert.Nil(t, cancelled.InboxDropped)
		for _, k := range []string{"person:erin", "person:ann"} {
			assert.NotContains(t, e.inboxIDs(t, k, 10), r.ID, "%s", k)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		at := e.Clock.Now().Add(time.Hour)
		r := e.waitingForOne(t)
		many := make([]identity.Eligible, runs.MaxApprovers)
		for i := range many {
			many[i] = person(fmt.Sprintf("p%02d", i))
		}
		for name, rev := range map[string]runs.DeciderRevision{
			"asked, listed already":      {Ask: []identity.Eligible{person("erin")}},
			"asked twice":                {Ask: []identity.Eligible{person("ann"), person("ann")}},
			"dropped, not listed":        {Drop: []string{"person:ann"}},
			"restored, not dropped":      {Restore: []string{"person:ann"}},
			"tokens, nobody asked":       {Tokens: []runs.TokenGrant{{Hash: HashToken(NewToken()), Approver: "ann@example.com"}}},
			"a token that is no hash":    {Ask: []identity.Eligible{person("ann")}, Tokens: []runs.TokenGrant{{Hash: "x", Approver: "ann@example.com"}}},
			"more than MaxApprovers":     {Ask: many},
			"an inbox key that is empty": {Ask: []identity.Eligible{{}}},
		} {
			_, err := e.Store.ReviseDeciders(ctx, r, at, nothingLost, rev)
			require.Error(t, err, name)
			assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "%s: %v", name, err)
		}
		e.Unchanged(t, r)

		voting := e.waitingPerCall(t)
		_, err := e.Store.ReviseDeciders(ctx, voting, at, nothingLost, runs.DeciderRevision{PerCallVotes: true})
		AssertCode(t, runs.EInvalid, err) // decided by votes already
		e.Unchanged(t, voting)
		one, _ := e.Waiting(t)
		_, err = e.Store.ReviseDeciders(ctx, one, at, nothingLost, runs.DeciderRevision{PerCallVotes: true})
		AssertCode(t, runs.EInvalid, err) // one held call
		e.Unchanged(t, one)
		_, err = e.Store.ReviseDeciders(ctx, e.Running(t), at, nothingLost, runs.DeciderRevision{Drop: []string{"bob"}})
		AssertCode(t, runs.EConflict, err)
	})
}

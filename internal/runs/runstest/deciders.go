package runstest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// testQuorumDeciders: once a quorum's votes decide the turn, the decision
// event names who decided each held call (the voters whose approvals
// approved it, or the one who denied it) and every voter who decided
// one, in the order they voted, and the stored row's votes come to the
// same; DecidedBy stays the voter whose vote completed the turn. A vote
// that decided nothing (an approval of a call another then denied) makes
// no decider.
func testQuorumDeciders(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.waitingTwoCalls(t, 2, 2)
	for _, d := range []runs.NewDecision{
		perCall("dave", "call-3", loop.ActionApprove),
		perCall("ann", "call-1", loop.ActionApprove),
		perCall("bob", "call-3", loop.ActionDeny),
	} {
		var err error
		r, err = e.Store.Decide(ctx, r, d)
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, r.Status)
	}
	r, err := e.Store.Decide(ctx, r, perCall("carol", "call-1", loop.ActionApprove))
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r.Status)
	assert.Equal(t, "carol@example.com", r.DecidedBy, "decided_by keeps its meaning: the vote that completed the turn")

	wantCalls := []runs.DecidedCall{
		{CallID: "call-1", Tool: "send_email", Action: loop.ActionApprove, By: []string{"ann@example.com", "carol@example.com"}},
		{CallID: "call-3", Tool: "send_email", Action: loop.ActionDeny, By: []string{"bob@example.com"}},
	}
	wantDeciders := []string{"ann@example.com", "bob@example.com", "carol@example.com"}
	stored := e.stored(t, r.ID)
	assert.Equal(t, wantCalls, stored.DecidedCalls(), "the stored votes")
	assert.Equal(t, wantDeciders, stored.DecidingVoters(), "the stored votes")

	evs, err := e.Store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	found := 0
	for _, ev := range evs {
		if ev.Type != runs.EventDecision {
			continue
		}
		found++
		assert.Equal(t, "carol@example.com", ev.Actor)
		var data runs.DecisionEventData
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		assert.Equal(t, wantDeciders, data.Deciders)
		assert.Equal(t, wantCalls, data.DecidedCalls)
		assert.False(t, data.DecidersCut)
	}
	assert.Equal(t, 1, found, "one decision event")
}

// testInboxCountsPersons: an inbox entry's ApprovingPersons is the number
// of distinct persons who approved a held call, while Counted (stored as
// "approvals", which the release before reads) stays VotesNeeded less
// VotesMissing; an entry written without the count, as the release before
// writes it, reads without it and says what is missing as before.
func testInboxCountsPersons(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls[0].Approval = &loop.ApprovalRule{RequiredApprovals: 2}
	st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: "call-3", Name: "send_email", Input: json.RawMessage(`{}`),
		NeedsApproval: true, Effect: loop.EffectWrite, Approval: &loop.ApprovalRule{RequiredApprovals: 2}})
	sp.VotesNeeded = 2
	sp.InboxKeys = []string{"person:ann", "person:bob", "person:carol"}
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, perCall("bob", "call-3", loop.ActionApprove))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)

	page, _, err := e.Store.Inbox(ctx, "person:carol", 10, "")
	require.NoError(t, err)
	require.Len(t, page, 1)
	entry := page[0]
	require.NotNil(t, entry.ApprovingPersons)
	assert.Equal(t, 2, *entry.ApprovingPersons, "ann and bob approved a call each")
	assert.Equal(t, 1, entry.Counted, "each call has 1 of its 2 approvals: 1 missing of 2")
	assert.Equal(t, 1, entry.VotesMissing())

	// The release before rewrites the entry without the count.
	old := entry
	old.ApprovingPersons = nil
	next := r.Clone()
	next.Version++
	runs.SealWriteID(next)
	require.NoError(t, e.writeRow(t, runs.Write{Run: next, ExpectStatus: r.Status, ExpectVersion: r.Version, NewInbox: []runs.InboxEntry{old}}))
	page, _, err = e.Store.Inbox(ctx, "person:carol", 10, "")
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Nil(t, page[0].ApprovingPersons, "an entry without the count")
	assert.Equal(t, 1, page[0].VotesMissing())
}

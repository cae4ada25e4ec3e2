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
// one, in the order they voted, each by person (the directory person the
// vote counted for, whichever alias they voted with), and the stored
// row's votes come to the same; DecidedBy and the event's actor stay the
// voter whose vote completed the turn, as authenticated. A vote
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
	// carol votes with another of her aliases: she is named as the
	// person, the alias stays the actor.
	carol := perCall("carol", "call-1", loop.ActionApprove)
	carol.Decider = "carol-ci"
	r, err := e.Store.Decide(ctx, r, carol)
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r.Status)
	assert.Equal(t, "carol-ci", r.DecidedBy, "decided_by keeps its meaning: the vote that completed the turn, as authenticated")

	wantCalls := []runs.DecidedCall{
		{CallID: "call-1", Tool: "send_email", Action: loop.ActionApprove, By: []string{"ann", "carol"}},
		{CallID: "call-3", Tool: "send_email", Action: loop.ActionDeny, By: []string{"bob"}},
	}
	wantDeciders := []string{"ann", "bob", "carol"}
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
		assert.Equal(t, "carol-ci", ev.Actor, "the event's actor is the alias carol authenticated with")
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

// testStaleChoicesLeftOut: a vote's choices are built on the voter's copy
// of the run; a choice on a call another vote decided since is left out of
// the stored vote (it would count for nothing), so the voter is not counted
// among those who approved (Run.Approvals, the inbox's ApprovingPersons)
// for an approval that counted for nothing (reviewer helper-80).
func testStaleChoicesLeftOut(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls[0].Approval = &loop.ApprovalRule{RequiredApprovals: 2}
	for _, id := range []string{"call-3", "call-4"} {
		st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: id, Name: "send_email", Input: json.RawMessage(`{}`),
			NeedsApproval: true, Effect: loop.EffectWrite, Approval: &loop.ApprovalRule{RequiredApprovals: 2}})
	}
	sp.VotesNeeded = 2
	sp.InboxKeys = []string{"person:ann", "person:bob", "person:dave", "person:erin"}
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)

	stale := r // dave's copy: call-1 open
	for _, who := range []string{"ann", "bob"} {
		r, err = e.Store.Decide(ctx, r, perCall(who, "call-1", loop.ActionApprove))
		require.NoError(t, err)
	}
	tally, ok := r.CallTally("call-1")
	require.True(t, ok)
	require.True(t, tally.Approved(), "call-1 approved by ann and bob")

	// dave's vote, built on the stale copy: approve call-1, deny call-3.
	r, err = e.Store.Decide(ctx, stale, perCall("dave", "call-1", loop.ActionApprove, "call-3", loop.ActionDeny))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status, "call-4 is still open")
	stored := e.stored(t, r.ID)
	require.Len(t, stored.Votes, 3)
	dave := stored.Votes[2]
	assert.Equal(t, "person:dave", dave.Person)
	for i, c := range stored.PendingCalls {
		if c.ID == "call-1" {
			assert.Equal(t, byte('-'), dave.Choices[i], "the choice on call-1, decided since dave read the run, is left out")
		}
	}
	assert.Equal(t, 2, stored.Approvals(), "only ann and bob approved a call their approval counted for")
	page, _, err := e.Store.Inbox(ctx, "person:erin", 10, "")
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.NotNil(t, page[0].ApprovingPersons)
	assert.Equal(t, 2, *page[0].ApprovingPersons)
}

package runstest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// waitingPerCall creates a run suspended on "s1" whose turn holds two
// calls that need one approval each, call-1 and call-3 (and a read,
// call-2), with per-call votes: no one person may decide both (the
// caller's check, runs.HoldsVotes).
func (e *Env) waitingPerCall(t *testing.T) *runs.Run {
	t.Helper()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls[0].Rule, st.PendingCalls[0].Approval = "writers", &loop.ApprovalRule{Approvers: []string{"group:writers"}}
	st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: "call-3", Name: "send_email", Input: json.RawMessage(`{"to":"y@example.com"}`),
		NeedsApproval: true, Effect: loop.EffectWrite, Rule: "mailers", Approval: &loop.ApprovalRule{Approvers: []string{"group:mailers"}}})
	sp.VotesNeeded = runs.VotesNeeded(runs.SummarizeCalls(st))
	sp.PerCallVotes = true
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	require.Equal(t, 1, r.VotesNeeded)
	require.True(t, r.PerCallVotes)
	require.True(t, r.Voting())
	return r
}

// wholeVote is who's whole-turn vote of action on suspension "s1", on the
// calls of ids (those they may decide).
func wholeVote(who string, action loop.Action, ids ...string) runs.NewDecision {
	d := runs.NewDecision{SuspensionID: "s1", Decider: who + "@example.com", Voter: "person:" + who, Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: "digest-s1", Action: action}}
	for _, id := range ids {
		d.Choices = append(d.Choices, runs.VoteChoice{CallID: id, Action: action})
	}
	return d
}

// testPerCallVotesOfOneApproval: a turn held with per-call votes although
// each call needs one approval (no one person may decide both) keeps the
// flag on the stored row and takes votes: the first vote, on one call,
// leaves the run waiting; the vote on the other call resumes it once,
// with each call's decision and who made it; one decision (no voter, no
// choices) is refused as built on another row (EConflict). The next
// suspension, held for one decision, clears it.
func testPerCallVotesOfOneApproval(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.waitingPerCall(t)
	stored := e.stored(t, r.ID)
	assert.True(t, stored.PerCallVotes, "the stored row keeps the flag")
	assert.Equal(t, 1, stored.VotesMissing())

	one := runs.NewDecision{SuspensionID: "s1", Decider: "ann@example.com", Via: runs.ViaAPI, Decision: Approve}
	_, err := e.Store.Decide(ctx, r, one)
	AssertCode(t, runs.EConflict, err) // built on a row that took one decision: read it again
	e.Unchanged(t, r)

	r1, err := e.Store.Decide(ctx, r, wholeVote("ann", loop.ActionApprove, "call-1"))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, r1.Status, "call-3 waits for its own approvers")
	assert.Equal(t, 1, r1.VotesMissing())
	assert.Empty(t, r1.Votes[0].Action, "approving one call of two is no approval of the turn to the release before")
	_, err = e.Store.Decide(ctx, r1, wholeVote("ann", loop.ActionApprove, "call-3"))
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.Decide(ctx, r1, wholeVote("bob", loop.ActionApprove, "call-1"))
	AssertCode(t, runs.EConflict, err) // nothing left for bob: call-1 is approved
	e.Unchanged(t, r1)

	r2, err := e.Store.Decide(ctx, r1, wholeVote("carol", loop.ActionApprove, "call-3"))
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r2.Status)
	assert.Equal(t, "carol@example.com", r2.DecidedBy)
	require.NotNil(t, r2.Decision)
	assert.Equal(t, loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{
		{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionApprove}}}, *r2.Decision,
		"each call approved by its own approvers: a per-call decision (no vote covered both)")
	wantCalls := []runs.DecidedCall{
		{CallID: "call-1", Tool: "send_email", Action: loop.ActionApprove, By: []string{"ann"}},
		{CallID: "call-3", Tool: "send_email", Action: loop.ActionApprove, By: []string{"carol"}},
	}
	assert.Equal(t, wantCalls, e.stored(t, r.ID).DecidedCalls())
	evs, err := e.Store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	decisions := 0
	for _, ev := range evs {
		if ev.Type == runs.EventDecision {
			decisions++
			var data runs.DecisionEventData
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			assert.Equal(t, []string{"ann", "carol"}, data.Deciders)
			assert.Equal(t, wantCalls, data.DecidedCalls)
		}
	}
	assert.Equal(t, 1, decisions, "exactly one transition")

	// The next suspension, for one decision, clears the flag.
	c, err := e.Store.Claim(ctx, r2.ID, "w2")
	require.NoError(t, err)
	sp, _ := e.Suspension(c, "s2")
	c, err = e.Store.Suspend(ctx, c, "w2", sp)
	require.NoError(t, err)
	assert.False(t, c.PerCallVotes)
	assert.False(t, c.Voting())
	assert.False(t, e.stored(t, c.ID).Voting())
}

// rowOfTheReleaseBefore rewrites r as a release before PerCallVotes does
// when it writes the row (a reminder by its sweep during a deploy, say):
// its Run has no per_call_votes, so the flag is lost; the votes it keeps.
func (e *Env) rowOfTheReleaseBefore(t *testing.T, r *runs.Run) *runs.Run {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &fields))
	delete(fields, "per_call_votes")
	b, err = json.Marshal(fields)
	require.NoError(t, err)
	var next runs.Run
	require.NoError(t, json.Unmarshal(b, &next))
	next.Version++
	runs.SealWriteID(&next)
	require.NoError(t, e.writeRow(t, runs.Write{Run: &next, ExpectStatus: r.Status, ExpectVersion: r.Version}))
	return e.stored(t, r.ID)
}

// testPerCallVotesReadByTheReleaseBefore: the release before PerCallVotes
// never lets a call run without its approvals on a row this release held
// with per-call votes. It reads votes_needed 1 and takes one decision of
// the whole turn, which it lets only a person who may decide every held
// call make (runs.MayDecide without votes), and reads a vote on one call
// of two as no approval (Vote.Action). When it rewrote the row before any
// vote, dropping the flag, the row takes one decision here too: a vote
// built on the row as it was is refused (EConflict), never taken as a
// decision of the whole turn (a whole-turn approval of the voter's call
// would approve the others'). When it rewrote it after a vote, the votes
// keep the row voting, and each call is still decided by its own voters.
func testPerCallVotesReadByTheReleaseBefore(t *testing.T, e *Env) {
	ctx := t.Context()

	t.Run("rewritten before any vote", func(t *testing.T) {
		held := e.waitingPerCall(t)
		b, err := json.Marshal(held)
		require.NoError(t, err)
		var before struct {
			VotesNeeded int `json:"votes_needed"`
		}
		require.NoError(t, json.Unmarshal(b, &before))
		assert.Equal(t, 1, before.VotesNeeded, "the release before asks for one decision of every held call")

		r := e.rowOfTheReleaseBefore(t, held)
		require.False(t, r.Voting(), "without the flag and without votes, one decision decides")
		for _, d := range []runs.NewDecision{
			wholeVote("ann", loop.ActionApprove, "call-1"),
			perCall("ann", "call-1", loop.ActionApprove),
		} {
			_, err = e.Store.Decide(ctx, held, d) // built on the row as held
			AssertCode(t, runs.EConflict, err)
			e.Unchanged(t, r)
		}
	})

	t.Run("rewritten after a vote", func(t *testing.T) {
		r := e.waitingPerCall(t)
		r, err := e.Store.Decide(ctx, r, wholeVote("ann", loop.ActionApprove, "call-1"))
		require.NoError(t, err)
		r = e.rowOfTheReleaseBefore(t, r)
		require.False(t, r.PerCallVotes)
		require.True(t, r.Voting(), "the votes keep the row voting")
		_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "erin@example.com", Via: runs.ViaAPI, Decision: Approve})
		AssertCode(t, runs.EConflict, err) // one decision, not a vote
		r, err = e.Store.Decide(ctx, r, wholeVote("carol", loop.ActionDeny, "call-3"))
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, r.Status)
		assert.Equal(t, loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{
			{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionDeny}}}, *r.Decision,
			"each call as its own approvers decided it")
	})
}

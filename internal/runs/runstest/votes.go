package runstest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// waitingQuorum creates a run suspended on "s1" that needs n approvals.
func (e *Env) waitingQuorum(t *testing.T, n int) (*runs.Run, []string) {
	t.Helper()
	r := e.Running(t)
	sp, raws := e.Suspension(r, "s1")
	sp.VotesNeeded = n
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	require.Equal(t, n, r.VotesNeeded)
	require.Empty(t, r.Votes)
	return r, raws
}

// vote is who's whole-turn vote on suspension "s1" (its one held call
// that needs approval, call-1).
func vote(who string, action loop.Action) runs.NewDecision {
	return runs.NewDecision{SuspensionID: "s1", Decider: who + "@example.com", Voter: "person:" + who, Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: "digest-s1", Action: action},
		Choices:  []runs.VoteChoice{{CallID: "call-1", Action: action}}}
}

// testVotes: N of M. Each vote is one write that keeps the run waiting
// until the N-th approval moves it to RESUMING; a person votes once.
func testVotes(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.waitingQuorum(t, 2)
	r1, err := e.Store.Decide(ctx, r, vote("bob", loop.ActionApprove))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, r1.Status, "one approval of two keeps the run waiting")
	assert.Equal(t, r.Version+1, r1.Version)
	assert.Nil(t, r1.Decision)
	require.Len(t, r1.Votes, 1)
	assert.Equal(t, runs.Vote{By: "bob@example.com", Person: "person:bob", Action: loop.ActionApprove, Choices: "a-", Via: runs.ViaAPI, At: e.Clock.Now()}, r1.Votes[0])
	assert.Equal(t, 1, r1.VotesMissing())

	// The same person again, by another alias: 409, nothing changes.
	again := vote("bob", loop.ActionApprove)
	again.Decider = "Bob@Example.com"
	_, err = e.Store.Decide(ctx, r1, again)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r1)

	// A vote needs its choices, each on a held call that needs approval,
	// approve or deny (never an edit), the whole-turn action's when given.
	for name, chs := range map[string][]runs.VoteChoice{
		"none":                 nil,
		"a read sibling":       {{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-2", Action: loop.ActionApprove}},
		"an unknown call":      {{CallID: "call-9", Action: loop.ActionApprove}},
		"twice":                {{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-1", Action: loop.ActionApprove}},
		"an edit":              {{CallID: "call-1", Action: loop.ActionEdit}},
		"not the turn action":  {{CallID: "call-1", Action: loop.ActionDeny}},
		"a message on approve": {{CallID: "call-1", Action: loop.ActionApprove, Message: "ok"}},
	} {
		bad := vote("carol", loop.ActionApprove)
		bad.Choices = chs
		_, err = e.Store.Decide(ctx, r1, bad)
		require.Error(t, err, "choices: %s", name)
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "choices: %s: %v", name, err)
	}
	long := vote("carol", "")
	long.Decision = loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{{CallID: "call-1", Action: loop.ActionDeny}}}
	long.Choices = []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionDeny, Message: string(make([]byte, runs.MaxVoteMessagesSize+1))}}
	_, err = e.Store.Decide(ctx, r1, long)
	AssertCode(t, runs.ETooLarge, err)
	e.Unchanged(t, r1)
	noVoter := vote("carol", loop.ActionApprove)
	noVoter.Voter = ""
	_, err = e.Store.Decide(ctx, r1, noVoter)
	AssertCode(t, runs.EInvalid, err)

	// The second person's approval decides; decided on a stale copy (r, not r1), it still counts both.
	r2, err := e.Store.Decide(ctx, r, vote("carol", loop.ActionApprove))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, r2.Status)
	assert.Equal(t, "carol@example.com", r2.DecidedBy)
	require.NotNil(t, r2.Decision)
	assert.Equal(t, loop.ActionApprove, r2.Decision.Action)
	assert.Equal(t, 2, r2.Approvals())
	assert.Equal(t, 0, r2.VotesMissing())
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r2.Votes, got.Votes, "the votes are stored")
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, 2, count(types, runs.EventVote))
	assert.Equal(t, 1, count(types, runs.EventDecision))
	_, err = e.Store.Decide(ctx, r2, vote("dave", loop.ActionApprove))
	AssertCode(t, runs.EConflict, err)

	// One denial ends the vote.
	d, _ := e.waitingQuorum(t, 3)
	d1, err := e.Store.Decide(ctx, d, vote("bob", loop.ActionApprove))
	require.NoError(t, err)
	d2, err := e.Store.Decide(ctx, d1, vote("carol", loop.ActionDeny))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, d2.Status)
	assert.Equal(t, loop.ActionDeny, d2.Decision.Action)
	assert.Equal(t, 1, d2.Approvals())

	// A new suspension starts a new vote.
	c, err := e.Store.Claim(ctx, d2.ID, "w2")
	require.NoError(t, err)
	sp, _ := e.Suspension(c, "s2")
	sp.VotesNeeded = 2
	c, err = e.Store.Suspend(ctx, c, "w2", sp)
	require.NoError(t, err)
	assert.Empty(t, c.Votes)
	assert.Equal(t, 2, c.VotesMissing())
}

// testVoteThroughLinks: each approver's link is their vote; a used link
// cannot vote again.
func testVoteThroughLinks(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.waitingQuorum(t, 2)
	bob, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	carol, err := e.Store.LookupToken(ctx, HashToken(raws[1]))
	require.NoError(t, err)
	link := func(tok *runs.ApprovalToken) runs.NewDecision {
		return runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Voter: "person:" + tok.Approver, Decision: Approve, Choices: approveCall1}
	}
	r1, err := e.Store.Decide(ctx, r, link(bob))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, r1.Status)
	used, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	assert.False(t, used.UsedAt.IsZero(), "the vote used bob's link")
	_, err = e.Store.Decide(ctx, r1, link(used))
	AssertCode(t, runs.EConflict, err)
	r2, err := e.Store.Decide(ctx, r1, link(carol))
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, r2.Status)
	assert.Equal(t, runs.ViaLink, r2.DecidedVia)
}

// testConcurrentVotes: 5 approvers, N = 2, 50 concurrent votes (each
// approver ten times): exactly one transition to RESUMING, exactly two
// counted approvals by two distinct persons, everyone else 409.
func testConcurrentVotes(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.waitingQuorum(t, 2)
	const n = 50
	voters := []string{"ann", "bob", "carol", "dave", "erin"}
	var wins, transitions atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got, err := e.Store.Decide(ctx, r, vote(voters[i%len(voters)], loop.ActionApprove))
			switch {
			case err == nil:
				wins.Add(1)
				if got.Status == runs.StatusResuming {
					transitions.Add(1)
				}
			case runs.ErrorCode(err) != runs.EConflict:
				t.Errorf("vote %d: want conflict, got %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), transitions.Load(), "exactly one vote moved the run on")
	assert.Equal(t, int64(2), wins.Load(), "exactly two votes were counted")
	assert.Equal(t, runs.StatusResuming, got.Status)
	require.Len(t, got.Votes, 2)
	assert.NotEqual(t, got.Votes[0].Person, got.Votes[1].Person, "two distinct persons")
	assert.Equal(t, r.Version+2, got.Version, "one write per counted vote")
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, 2, count(types, runs.EventVote))
	assert.Equal(t, 1, count(types, runs.EventDecision))
	t.Logf("quorum race: %d votes by %d approvers, N=2: %d counted, %d transition, version %d -> %d",
		n, len(voters), wins.Load(), transitions.Load(), r.Version, got.Version)
}

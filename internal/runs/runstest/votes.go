package runstest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
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
	assert.Equal(t, runs.Vote{By: "bob@example.com", Person: "person:bob", Action: loop.ActionApprove, Whole: true, Choices: "a-", Via: runs.ViaAPI, At: e.Clock.Now()}, r1.Votes[0])
	assert.Equal(t, 1, r1.VotesMissing())

	// The same person again, by another alias: 409, nothing changes.
	again := vote("bob", loop.ActionApprove)
	again.Decider = "Bob@Example.com"
	_, err = e.Store.Decide(ctx, r1, again)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r1)

	// The same person under another key, after a directory change: bob
	// voted as person:bob; the directory in force has no entry for him, so
	// his key is now his bare principal's. He voted: 409 (Run.VoteOf).
	bare := vote("bob", loop.ActionApprove)
	bare.Voter = runs.SubjectKey(nil, "bob@example.com")
	require.NotEqual(t, "person:bob", bare.Voter)
	noBob, err := identity.DecodeDirectory([]byte(`{"version": 1, "persons": [{"id": "carol", "aliases": ["carol@example.com"]}]}`))
	require.NoError(t, err)
	bare.Directory = noBob
	_, err = e.Store.Decide(ctx, r1, bare)
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
	r := e.waitingTwoCalls(t, 2, 2)
	n := e.racers()
	voters := []string{"ann", "bob", "carol", "dave", "erin"}
	var wins, transitions atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Whole-turn and per-call votes alike, on both held calls.
			v := perCall(voters[i%len(voters)], "call-1", loop.ActionApprove, "call-3", loop.ActionApprove)
			if i%2 == 0 {
				v = vote(voters[i%len(voters)], loop.ActionApprove)
				v.Choices = append(v.Choices, runs.VoteChoice{CallID: "call-3", Action: loop.ActionApprove})
			}
			got, err := e.Store.Decide(ctx, r, v)
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

// waitingTwoCalls creates a run suspended on "s1" whose turn holds two
// calls that need approval, call-1 (n1 approvals) and call-3 (n3), and a
// read, call-2.
func (e *Env) waitingTwoCalls(t *testing.T, n1, n3 int) *runs.Run {
	t.Helper()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls[0].Rule, st.PendingCalls[0].Approval = "one", &loop.ApprovalRule{RequiredApprovals: n1}
	st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: "call-3", Name: "send_email", Input: json.RawMessage(`{"to":"y@example.com"}`),
		NeedsApproval: true, Effect: loop.EffectWrite, Rule: "three", Approval: &loop.ApprovalRule{RequiredApprovals: n3}})
	sp.VotesNeeded = runs.VotesNeeded(runs.SummarizeCalls(st))
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	require.Equal(t, max(n1, n3), r.VotesNeeded)
	return r
}

// perCall is who's per-call vote on suspension "s1": pairs of call id and
// action (a denial's message is "no <call id>").
func perCall(who string, pairs ...any) runs.NewDecision {
	d := runs.NewDecision{SuspensionID: "s1", Decider: who + "@example.com", Voter: "person:" + who, Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: "digest-s1"}}
	for i := 0; i+1 < len(pairs); i += 2 {
		id, action := pairs[i].(string), pairs[i+1].(loop.Action)
		cd := loop.CallDecision{CallID: id, Action: action}
		ch := runs.VoteChoice{CallID: id, Action: action}
		if action == loop.ActionDeny {
			cd.Message, ch.Message = "no "+id, "no "+id
		}
		d.Decision.Calls = append(d.Decision.Calls, cd)
		d.Choices = append(d.Choices, ch)
	}
	return d
}

// testPerCallVotes: under a quorum each held call counts its own votes,
// to its own quorum; one denial denies it; the run resumes exactly once,
// when every held call is approved or denied, with the decision the votes
// come to, and each vote's event carries its choices.
func testPerCallVotes(t *testing.T, e *Env) {
	ctx := t.Context()
	calls := func(d *loop.Decision) map[string]string {
		out := map[string]string{}
		for _, cd := range d.Calls {
			out[cd.CallID] = string(cd.Action) + ":" + cd.Message
		}
		return out
	}

	t.Run("approve one, deny the other: the turn waits for the approval's quorum", func(t *testing.T) {
		r := e.waitingTwoCalls(t, 2, 2)
		r1, err := e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove, "call-3", loop.ActionDeny))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusWaiting, r1.Status, "call-1 has 1 approval of 2")
		assert.Equal(t, 1, r1.VotesMissing())
		require.Len(t, r1.Votes, 1)
		assert.Equal(t, "a-d", r1.Votes[0].Choices)
		_, err = e.Store.Decide(ctx, r1, perCall("ann", "call-1", loop.ActionApprove))
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, r1)
		// Bob approves the whole turn: call-1 is approved; call-3 stays
		// denied (one denial is a veto).
		bob := vote("bob", loop.ActionApprove)
		bob.Choices = append(bob.Choices, runs.VoteChoice{CallID: "call-3", Action: loop.ActionApprove})
		r2, err := e.Store.Decide(ctx, r1, bob)
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r2.Status)
		assert.Equal(t, "bob@example.com", r2.DecidedBy)
		require.NotNil(t, r2.Decision)
		assert.Empty(t, r2.Decision.Action, "a per-call decision: not every vote was on the whole turn")
		assert.Equal(t, map[string]string{"call-1": "approve:", "call-3": "deny:no call-3"}, calls(r2.Decision))
		assert.Equal(t, "digest-s1", r2.Decision.TurnDigest)
		_, err = e.Store.Decide(ctx, r2, perCall("carol", "call-1", loop.ActionDeny))
		AssertCode(t, runs.EConflict, err)
		evs, err := e.Store.Events(ctx, r.ID, 0, 100)
		require.NoError(t, err)
		var votes []runs.VoteEventData
		decisions := 0
		for _, ev := range evs {
			switch ev.Type {
			case runs.EventVote:
				var v runs.VoteEventData
				require.NoError(t, json.Unmarshal(ev.Data, &v))
				votes = append(votes, v)
			case runs.EventDecision:
				decisions++
				var d runs.DecisionEventData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				assert.Equal(t, *r2.Decision, d.Decision, "the decision event is the stored decision")
			}
		}
		assert.Equal(t, 1, decisions, "exactly one transition")
		require.Len(t, votes, 2)
		assert.Equal(t, []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionDeny, Message: "no call-3"}}, votes[0].Calls)
		assert.Equal(t, 1, votes[0].VotesMissing)
		assert.Equal(t, loop.ActionApprove, votes[1].Action)
		assert.Equal(t, 0, votes[1].VotesMissing)
	})

	t.Run("different quorums per call", func(t *testing.T) {
		r := e.waitingTwoCalls(t, 3, 1)
		r1, err := e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove, "call-3", loop.ActionApprove))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusWaiting, r1.Status)
		assert.Equal(t, 2, r1.VotesMissing(), "call-3 is approved by one; call-1 needs two more")
		r2, err := e.Store.Decide(ctx, r1, perCall("bob", "call-1", loop.ActionApprove))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusWaiting, r2.Status)
		assert.Equal(t, 1, r2.VotesMissing())
		r3, err := e.Store.Decide(ctx, r2, perCall("carol", "call-1", loop.ActionApprove))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r3.Status)
		assert.Equal(t, map[string]string{"call-1": "approve:", "call-3": "approve:"}, calls(r3.Decision))
	})

	t.Run("a denial of every call decides the turn at once", func(t *testing.T) {
		r := e.waitingTwoCalls(t, 2, 2)
		r1, err := e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionDeny, "call-3", loop.ActionDeny))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r1.Status)
		assert.Equal(t, map[string]string{"call-1": "deny:no call-1", "call-3": "deny:no call-3"}, calls(r1.Decision))
	})

	t.Run("whole-turn votes that cover every call decide as before", func(t *testing.T) {
		r := e.waitingTwoCalls(t, 2, 2)
		d := vote("ann", loop.ActionDeny)
		d.Decision.Message = "freeze"
		d.Choices = []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionDeny, Message: "freeze"}, {CallID: "call-3", Action: loop.ActionDeny, Message: "freeze"}}
		r1, err := e.Store.Decide(ctx, r, d)
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r1.Status)
		assert.Equal(t, loop.Decision{TurnDigest: "digest-s1", Action: loop.ActionDeny, Message: "freeze"}, *r1.Decision)
		assert.Equal(t, "freeze", r1.Votes[0].Message)
		assert.Nil(t, r1.Votes[0].Reasons, "a whole-turn vote keeps its message once")
	})

	t.Run("a whole-turn vote on part of the turn is that choice on those calls only", func(t *testing.T) {
		r := e.waitingTwoCalls(t, 2, 2)
		d := vote("ann", loop.ActionDeny) // ann may decide call-1 only
		r1, err := e.Store.Decide(ctx, r, d)
		require.NoError(t, err)
		assert.Equal(t, runs.StatusWaiting, r1.Status, "call-3 is undecided")
		r2, err := e.Store.Decide(ctx, r1, perCall("bob", "call-3", loop.ActionApprove))
		require.NoError(t, err)
		r3, err := e.Store.Decide(ctx, r2, perCall("carol", "call-3", loop.ActionApprove))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r3.Status)
		assert.Equal(t, map[string]string{"call-1": "deny:", "call-3": "approve:"}, calls(r3.Decision))
	})
}

// votesOfTheReleaseBefore rewrites r's votes as a release that knew only
// whole-turn votes does when it writes the row (a reminder by its sweep
// during a deploy, say): its Vote has no Whole, Message, Choices or
// Reasons, so they are lost.
func (e *Env) votesOfTheReleaseBefore(t *testing.T, r *runs.Run) *runs.Run {
	t.Helper()
	type oldVote struct {
		By     string      `json:"by"`
		Person string      `json:"person"`
		Action loop.Action `json:"action"`
		Via    string      `json:"via"`
		At     time.Time   `json:"at"`
	}
	b, err := json.Marshal(r.Votes)
	require.NoError(t, err)
	var old []oldVote
	require.NoError(t, json.Unmarshal(b, &old))
	b, err = json.Marshal(old)
	require.NoError(t, err)
	next := r.Clone()
	next.Votes = nil
	require.NoError(t, json.Unmarshal(b, &next.Votes))
	next.Version++
	runs.SealWriteID(next)
	require.NoError(t, e.writeRow(t, runs.Write{Run: next, ExpectStatus: r.Status, ExpectVersion: r.Version}))
	return e.stored(t, r.ID)
}

// testVotesReadByTheReleaseBefore: a vote's stored action is what a
// release that knew only whole-turn votes may take from it without
// approving more than the voter did: approve only when it approves every
// held call, deny when it denies any, none otherwise. Such a release
// rewriting the row drops the per-call choices, and the votes then count
// that way here too: a call is never approved by votes that did not
// approve it, and a denial is never lost.
func testVotesReadByTheReleaseBefore(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.waitingTwoCalls(t, 3, 2)
	r, err := e.Store.Decide(ctx, r, vote("ann", loop.ActionApprove)) // call-1 only: her whole-turn vote
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, vote("bob", loop.ActionApprove))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, perCall("carol", "call-3", loop.ActionDeny))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	var stored []loop.Action
	for _, v := range r.Votes {
		stored = append(stored, v.Action)
	}
	assert.Equal(t, []loop.Action{"", "", loop.ActionDeny}, stored, "approving one call of two is no approval of the turn; a denial is one")
	assert.Equal(t, []loop.Action{loop.ActionApprove, loop.ActionApprove, ""}, []loop.Action{r.Votes[0].TurnAction(), r.Votes[1].TurnAction(), r.Votes[2].TurnAction()},
		"the voters' own choices")

	r = e.votesOfTheReleaseBefore(t, r)
	r, err = e.Store.Decide(ctx, r, vote("erin", loop.ActionApprove))
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r.Status, "carol's denial, read as a denial of the turn, decides it; erin's vote resumes it")
	require.NotNil(t, r.Decision)
	assert.NotEqual(t, loop.ActionApprove, r.Decision.Action)
	for _, cd := range r.Decision.Calls {
		assert.Equal(t, loop.ActionDeny, cd.Action, "nothing runs that its approvers did not approve: %+v", r.Decision)
	}

	// A vote that approves every held call is an approval of the turn,
	// which a release before reads the same way.
	r = e.waitingTwoCalls(t, 2, 2)
	r, err = e.Store.Decide(ctx, r, perCall("dave", "call-1", loop.ActionApprove, "call-3", loop.ActionApprove))
	require.NoError(t, err)
	assert.Equal(t, loop.ActionApprove, r.Votes[0].Action)
}

// testResolvedDecisionFits: the decision a quorum's votes come to fits
// the decision limit, although a whole-turn denial's one message is
// repeated on every call it denies.
func testResolvedDecisionFits(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	st := sp.State
	st.PendingCalls = st.PendingCalls[:1]
	st.PendingCalls[0].Approval = &loop.ApprovalRule{RequiredApprovals: 2}
	for i := range loop.MaxHeldCalls - 1 {
		st.PendingCalls = append(st.PendingCalls, loop.PendingCall{ID: fmt.Sprintf("c%02d", i), Name: "send_email",
			Input: json.RawMessage(`{}`), NeedsApproval: true, Effect: loop.EffectWrite, Approval: &loop.ApprovalRule{RequiredApprovals: 2}})
	}
	sp.VotesNeeded = runs.VotesNeeded(runs.SummarizeCalls(st))
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove))
	require.NoError(t, err)
	msg := strings.Repeat("x", runs.MaxVoteMessagesSize)
	d := vote("bob", loop.ActionDeny)
	d.Decision.Message = msg
	d.Choices = nil
	for _, c := range r.PendingCalls {
		d.Choices = append(d.Choices, runs.VoteChoice{CallID: c.ID, Action: loop.ActionDeny, Message: msg})
	}
	r, err = e.Store.Decide(ctx, r, d)
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r.Status)
	b, err := json.Marshal(r.Decision)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), runs.MaxDecisionSize)
	for _, cd := range r.Decision.Calls {
		require.Equal(t, loop.ActionDeny, cd.Action)
		assert.True(t, strings.HasPrefix(msg, strings.TrimSuffix(cd.Message, "…")) && cd.Message != "", "a cut of the message: %q", cd.Message)
	}
}

// testNoVoteOnDecidedCalls: a call is decided by the first votes that
// approve it as often as it needs, or the first denial; a later choice on
// it counts for nothing, and a vote that would choose only for decided
// calls is refused (EConflict), changing nothing.
func testNoVoteOnDecidedCalls(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.waitingTwoCalls(t, 1, 2)
	r, err := e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove))
	require.NoError(t, err)
	before := e.stored(t, r.ID)
	_, err = e.Store.Decide(ctx, r, perCall("bob", "call-1", loop.ActionDeny))
	AssertCode(t, runs.EConflict, err)
	assert.Equal(t, before, e.stored(t, r.ID))
	r, err = e.Store.Decide(ctx, r, perCall("carol", "call-1", loop.ActionDeny, "call-3", loop.ActionApprove))
	require.NoError(t, err, "a vote with an open call counts for it")
	t1, _ := r.CallTally("call-1")
	assert.True(t, t1.Approved(), "call-1 stays approved")
	assert.Equal(t, runs.StatusWaiting, r.Status)

	// Whole-turn votes alike: an approval of the turn that completes
	// call-1, then a denial of the turn, which can only deny call-3. The
	// decision is per call: call-1 runs.
	whole := func(who string, action loop.Action) runs.NewDecision {
		d := vote(who, action)
		d.Choices = []runs.VoteChoice{{CallID: "call-1", Action: action}, {CallID: "call-3", Action: action}}
		if action == loop.ActionDeny {
			d.Decision.Message = "no " + who
			for i := range d.Choices {
				d.Choices[i].Message = d.Decision.Message
			}
		}
		return d
	}
	r = e.waitingTwoCalls(t, 1, 2)
	r, err = e.Store.Decide(ctx, r, whole("erin", loop.ActionApprove))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, whole("carol", loop.ActionDeny))
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, r.Status)
	require.NotNil(t, r.Decision)
	assert.Empty(t, r.Decision.Action, "not a denial of the whole turn")
	assert.Equal(t, []loop.CallDecision{{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionDeny, Message: "no carol"}}, r.Decision.Calls)
}

// testVoteDropsTheDone: a vote that leaves the run waiting also takes it
// out of the inbox of those who have nothing left to vote on
// (NewDecision.StillAsked), in the same write; an empty answer removes
// nobody.
func testVoteDropsTheDone(t *testing.T, e *Env) {
	ctx := t.Context()
	waiting := func() *runs.Run {
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
		return r
	}
	r := waiting()
	d := perCall("ann", "call-1", loop.ActionApprove, "call-3", loop.ActionDeny)
	d.StillAsked = func(next *runs.Run) map[string]bool {
		assert.Equal(t, 1, next.VotesMissing(), "the row after the vote")
		return map[string]bool{"person:bob": true}
	}
	r, err := e.Store.Decide(ctx, r, d)
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	assert.Equal(t, []string{"person:bob"}, r.InboxKeys)
	assert.Equal(t, []string{r.ID}, e.inboxIDs(t, "person:bob", 10))
	assert.Empty(t, e.inboxIDs(t, "person:carol", 10), "carol has nothing left to vote on")
	assert.Empty(t, e.inboxIDs(t, "person:ann", 10), "ann voted")

	r = waiting()
	d = perCall("ann", "call-1", loop.ActionApprove)
	d.StillAsked = func(*runs.Run) map[string]bool { return nil }
	r, err = e.Store.Decide(ctx, r, d)
	require.NoError(t, err)
	assert.Equal(t, []string{"person:bob", "person:carol"}, r.InboxKeys, "an empty answer removes nobody")
}

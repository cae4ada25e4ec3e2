package runstest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// editVote is who's per-call vote on suspension "s1" that edits call id
// to input (and makes the other choices of pairs, as perCall).
func editVote(who, id, input string, pairs ...any) runs.NewDecision {
	d := perCall(who, pairs...)
	d.Decision.Calls = append(d.Decision.Calls, loop.CallDecision{CallID: id, Action: loop.ActionEdit, Input: json.RawMessage(input)})
	d.Choices = append(d.Choices, runs.VoteChoice{CallID: id, Action: loop.ActionEdit, Input: json.RawMessage(input)})
	return d
}

// testPerCallVoteEdits: where each held call needs one approval from its
// own approvers (per-call votes), the voter who decides a call may edit
// it. The edit approves the call with the edited input: the stored vote
// keeps it (and reads as no approval of the turn to the release before),
// the vote event names it, and the decision the votes come to, stored
// once, edits that call with exactly that input and approves the other;
// the decision event says who edited which call. An edit built on a copy
// of the run on which the call was still open, when another vote decided
// it since, is left out like any stale choice; edits whose decision would
// be over MaxDecisionSize are refused; under a quorum the store refuses
// an edit whatever its caller checked.
func testPerCallVoteEdits(t *testing.T, e *Env) {
	ctx := t.Context()
	const edited = `{"to":"z@example.com"}`

	t.Run("edit one call, approve the other", func(t *testing.T) {
		r := e.waitingPerCall(t)
		require.True(t, r.VotesTakeEdits())
		stale := r // bob's copy: call-1 open

		r1, err := e.Store.Decide(ctx, r, editVote("ann", "call-1", edited))
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, r1.Status, "call-3 waits for its own approvers")
		stored := e.stored(t, r.ID)
		require.Len(t, stored.Votes, 1)
		v := stored.Votes[0]
		assert.Equal(t, "e--", v.Choices, "call-1 edited; call-2 a read, call-3 not ann's")
		require.Len(t, v.Edits, 1)
		assert.JSONEq(t, edited, string(v.Edits[0]))
		assert.Empty(t, v.Action, "an edit is no approval of the call as it is to the release before")
		tally, ok := stored.CallTally("call-1")
		require.True(t, ok)
		assert.True(t, tally.Approved())
		assert.JSONEq(t, edited, string(tally.Edited))
		assert.Equal(t, 1, stored.VotesMissing())

		// bob's edit of call-1, built on his copy on which it was open:
		// left out, and with nothing else in his vote, refused.
		_, err = e.Store.Decide(ctx, stale, editVote("bob", "call-1", `{"to":"bob@example.com"}`))
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, stored)

		r2, err := e.Store.Decide(ctx, r1, perCall("carol", "call-3", loop.ActionApprove))
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, r2.Status)
		require.NotNil(t, r2.Decision)
		want := loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{
			{CallID: "call-1", Action: loop.ActionEdit, Input: json.RawMessage(edited)},
			{CallID: "call-3", Action: loop.ActionApprove}}}
		assert.Equal(t, want, *r2.Decision)
		final := e.stored(t, r.ID)
		assert.Equal(t, want, *final.Decision, "the stored decision runs call-1 with exactly the edit ann approved")
		wantCalls := []runs.DecidedCall{
			{CallID: "call-1", Tool: "send_email", Action: loop.ActionEdit, By: []string{"ann"}},
			{CallID: "call-3", Tool: "send_email", Action: loop.ActionApprove, By: []string{"carol"}},
		}
		assert.Equal(t, wantCalls, final.DecidedCalls())

		evs, err := e.Store.Events(ctx, r.ID, 0, 100)
		require.NoError(t, err)
		decisions := 0
		for _, ev := range evs {
			switch ev.Type {
			case runs.EventVote:
				var data runs.VoteEventData
				require.NoError(t, json.Unmarshal(ev.Data, &data))
				if ev.Actor == "ann@example.com" {
					require.Len(t, data.Calls, 1)
					assert.Equal(t, loop.ActionEdit, data.Calls[0].Action)
					assert.JSONEq(t, edited, string(data.Calls[0].Input))
				}
			case runs.EventDecision:
				decisions++
				var data runs.DecisionEventData
				require.NoError(t, json.Unmarshal(ev.Data, &data))
				assert.Equal(t, want, data.Decision)
				assert.Equal(t, wantCalls, data.DecidedCalls)
			}
		}
		assert.Equal(t, 1, decisions, "exactly one transition")

		_, err = e.Store.Decide(ctx, r2, editVote("dave", "call-3", edited))
		AssertCode(t, runs.EConflict, err)
	})

	t.Run("a stale edit beside an open choice", func(t *testing.T) {
		r := e.waitingPerCall(t)
		stale := r
		_, err := e.Store.Decide(ctx, r, perCall("ann", "call-1", loop.ActionApprove))
		require.NoError(t, err)
		// erin may decide both calls (say the directory changed): her edit
		// of call-1, decided since she read the run, is left out; her
		// approval of call-3 completes the turn.
		r, err = e.Store.Decide(ctx, stale, editVote("erin", "call-1", edited, "call-3", loop.ActionApprove))
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, r.Status)
		assert.Equal(t, loop.Decision{TurnDigest: "digest-s1", Calls: []loop.CallDecision{
			{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionApprove}}}, *r.Decision,
			"call-1 runs as ann approved it, not as erin's stale edit")
		erin := e.stored(t, r.ID).Votes[1]
		assert.Empty(t, erin.Edits)
		assert.NotContains(t, erin.Choices, "e")
	})

	t.Run("edits over the decision limit", func(t *testing.T) {
		r := e.waitingPerCall(t)
		big := `{"to":"` + strings.Repeat("x", runs.MaxDecisionSize*2/3) + `"}`
		r, err := e.Store.Decide(ctx, r, editVote("ann", "call-1", big))
		require.NoError(t, err)
		_, err = e.Store.Decide(ctx, r, editVote("carol", "call-3", big))
		AssertCode(t, runs.ETooLarge, err)
		e.Unchanged(t, r)
	})

	t.Run("no edit under a quorum", func(t *testing.T) {
		r, _ := e.waitingQuorum(t, 2)
		require.False(t, r.VotesTakeEdits())
		_, err := e.Store.Decide(ctx, r, editVote("ann", "call-1", edited))
		AssertCode(t, runs.EInvalid, err)
		e.Unchanged(t, r)
	})

	t.Run("read by the release before", func(t *testing.T) {
		r := e.waitingPerCall(t)
		r, err := e.Store.Decide(ctx, r, editVote("ann", "call-1", edited))
		require.NoError(t, err)
		// The release before edits in votes rewrites the row without the
		// votes' edits: ann's edit is then no choice, neither an approval
		// of call-1 as it is nor as edited, and call-1 is open again.
		r = e.rowWithoutEdits(t, r)
		tally, ok := r.CallTally("call-1")
		require.True(t, ok)
		assert.False(t, tally.Decided())
		assert.Equal(t, 0, r.Approvals())
		r, err = e.Store.Decide(ctx, r, perCall("carol", "call-3", loop.ActionApprove))
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, r.Status, "call-1 still needs its approval")
		r, err = e.Store.Decide(ctx, r, perCall("bob", "call-1", loop.ActionApprove))
		require.NoError(t, err)
		require.Equal(t, runs.StatusResuming, r.Status)
		assert.Equal(t, []loop.CallDecision{{CallID: "call-1", Action: loop.ActionApprove}, {CallID: "call-3", Action: loop.ActionApprove}}, r.Decision.Calls)
	})
}

// rowWithoutEdits rewrites r as a release before edits in votes does when
// it writes the row: its votes have no edits.
func (e *Env) rowWithoutEdits(t *testing.T, r *runs.Run) *runs.Run {
	t.Helper()
	next := r.Clone()
	for i := range next.Votes {
		next.Votes[i].Edits = nil
	}
	next.Version++
	runs.SealWriteID(next)
	require.NoError(t, e.writeRow(t, runs.Write{Run: next, ExpectStatus: r.Status, ExpectVersion: r.Version}))
	return e.stored(t, r.ID)
}

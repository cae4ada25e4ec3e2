package runstest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// lostCall1 is CheckOpenApprovals' finding on call-1 of the suite's held
// turn, as the sweep hands it to EndUnmeetable.
var lostCall1 = map[string]string{"call-1": `approval can no longer be given: the call needs 2 approvals from distinct persons and has 1, but nobody who has not voted may decide`}

// nothingLost is the finding of a quorum check that found every held call
// able to get its approvals; call1Lost(at) that of one at at that found
// call-1 unable to.
var nothingLost = runs.QuorumFinding{}

func call1Lost(at time.Time) runs.QuorumFinding {
	return runs.QuorumFinding{At: at, Lost: []string{"call-1"}}
}

// marks returns r's quorum marks as call id -> when first found lost.
func marks(r *runs.Run) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range r.QuorumLost {
		out[m.CallID] = m.At
	}
	return out
}

// testQuorumCheck: a suspension's quorum check time is on the row and is
// its due time while it is the earliest; ScheduleQuorumCheck moves it (and
// the due time) in one write conditional on the row the check read, and
// drops it at or past the deadline.
func testQuorumCheck(t *testing.T, e *Env) {
	ctx := t.Context()
	t0 := e.Clock.Now()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	sp.RemindAt = t0.Add(48 * time.Minute)
	sp.QuorumCheckAt = t0.Add(20 * time.Minute)
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	assert.Equal(t, t0.Add(20*time.Minute), r.QuorumCheckAt)
	assert.Equal(t, t0.Add(20*time.Minute), r.DueAt, "the check is due first")
	assert.Equal(t, r.QuorumCheckAt, e.stored(t, r.ID).QuorumCheckAt, "stored")
	due := func(at time.Time) bool {
		t.Helper()
		page, _, err := e.Store.Due(ctx, at, 100, "")
		require.NoError(t, err)
		for _, d := range page {
			if d.ID == r.ID {
				return true
			}
		}
		return false
	}
	assert.False(t, due(t0.Add(20*time.Minute-time.Millisecond)))
	assert.True(t, due(t0.Add(20*time.Minute)))

	e.Clock.Advance(20 * time.Minute)
	next, err := e.Store.ScheduleQuorumCheck(ctx, r, t0.Add(40*time.Minute), nothingLost)
	require.NoError(t, err)
	assert.Empty(t, next.QuorumLost, "nothing found lost")
	assert.Equal(t, r.Version+1, next.Version)
	assert.Equal(t, t0.Add(40*time.Minute), next.QuorumCheckAt)
	assert.Equal(t, t0.Add(40*time.Minute), next.DueAt)
	assert.Equal(t, r.LastSeq, next.LastSeq, "no event")
	assert.Equal(t, runs.StatusWaiting, next.Status)
	assert.False(t, due(t0.Add(39*time.Minute)), "not due again before the next check")

	// Conditional on the row the check read: a stale copy is refused.
	_, err = e.Store.ScheduleQuorumCheck(ctx, r, t0.Add(50*time.Minute), call1Lost(t0.Add(20*time.Minute)))
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, next)

	// A check that finds a held call lost marks it with the check's time
	// (not the store's), in the same write; the next one that finds it so
	// keeps the first time, as does one that cannot tell; one that finds
	// it able clears it.
	e.Clock.Advance(20 * time.Minute) // t0+40m
	checkedAt := t0.Add(40*time.Minute - time.Second)
	marked, err := e.Store.ScheduleQuorumCheck(ctx, next, t0.Add(45*time.Minute), call1Lost(checkedAt))
	require.NoError(t, err)
	assert.Equal(t, map[string]time.Time{"call-1": checkedAt}, marks(marked), "first found lost at the check's time")
	assert.Equal(t, t0.Add(45*time.Minute), marked.QuorumCheckAt)
	assert.Equal(t, t0.Add(45*time.Minute), marked.DueAt)
	assert.Equal(t, next.LastSeq, marked.LastSeq, "no event")
	e.Unchanged(t, marked)
	e.Clock.Advance(5 * time.Minute) // t0+45m
	still, err := e.Store.ScheduleQuorumCheck(ctx, marked, t0.Add(46*time.Minute), call1Lost(t0.Add(45*time.Minute)))
	require.NoError(t, err)
	assert.Equal(t, map[string]time.Time{"call-1": checkedAt}, marks(still), "the first finding's time is kept")
	_, err = e.Store.ScheduleQuorumCheck(ctx, marked, t0.Add(46*time.Minute), nothingLost)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, still)
	unsure, err := e.Store.ScheduleQuorumCheck(ctx, still, t0.Add(46*time.Minute), runs.QuorumFinding{At: t0.Add(45 * time.Minute), Unsure: []string{"call-1"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]time.Time{"call-1": checkedAt}, marks(unsure), "a check that cannot tell keeps the mark")
	next, err = e.Store.ScheduleQuorumCheck(ctx, unsure, t0.Add(47*time.Minute), nothingLost)
	require.NoError(t, err)
	assert.Empty(t, next.QuorumLost, "cleared: found able again")
	e.Unchanged(t, next)
	for name, f := range map[string]runs.QuorumFinding{
		"a call not held":            {At: t0, Lost: []string{"call-9"}},
		"a call needing no approval": {At: t0, Lost: []string{"call-2"}},
		"no time":                    {Lost: []string{"call-1"}},
	} {
		_, err := e.Store.ScheduleQuorumCheck(ctx, next, t0.Add(time.Hour), f)
		require.Error(t, err, name)
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "%s: %v", name, err)
	}
	e.Unchanged(t, next)

	// At the deadline or later: no more checks; the reminder is due next.
	last, err := e.Store.ScheduleQuorumCheck(ctx, next, t0.Add(time.Hour), call1Lost(t0.Add(45*time.Minute)))
	require.NoError(t, err)
	assert.True(t, last.QuorumCheckAt.IsZero())
	assert.Equal(t, map[string]time.Time{"call-1": t0.Add(45 * time.Minute)}, marks(last))
	assert.Equal(t, t0.Add(48*time.Minute), last.DueAt)

	// Leaving the suspension clears its check and marks (the next
	// suspension schedules its own; a row that does not wait has none).
	decided, err := e.Store.Decide(ctx, last, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	require.Equal(t, runs.StatusResuming, decided.Status)
	assert.Empty(t, decided.QuorumLost)
	assert.Empty(t, e.stored(t, decided.ID).QuorumLost, "stored")
	e.Unchanged(t, decided)

	// A check time not before the deadline is not kept by Suspend either.
	late := e.Running(t)
	sp, _ = e.Suspension(late, "s1")
	sp.QuorumCheckAt = sp.Deadline
	late, err = e.Store.Suspend(ctx, late, "w1", sp)
	require.NoError(t, err)
	assert.True(t, late.QuorumCheckAt.IsZero())
	assert.Equal(t, late.ApprovalDeadline, late.DueAt)

	_, err = e.Store.ScheduleQuorumCheck(ctx, e.Running(t), t0.Add(time.Hour), call1Lost(t0))
	AssertCode(t, runs.EConflict, err)
}

// markLost records, as a first quorum check that finds call-1 lost does,
// that waiting run r was found so (Run.QuorumLost).
func (e *Env) markLost(t *testing.T, r *runs.Run) *runs.Run {
	t.Helper()
	marked, err := e.Store.ScheduleQuorumCheck(e.ctx, r, e.Clock.Now().Add(time.Minute), call1Lost(e.Clock.Now()))
	require.NoError(t, err)
	require.Contains(t, marks(marked), "call-1")
	return marked
}

// testEndUnmeetable: a waiting run whose held call can no longer be
// approved, found so by two checks in a row (the first marked the row),
// ends EXPIRED/approval_unmeetable as expiry ends one (state blob
// deleted, inbox entries gone, an expired event), with the calls and why
// in the event and the output; the write is conditional on the row the
// check read, so a vote that lands first wins and a vote after it is
// refused. An unmarked run is refused. Refusals change nothing.
func testEndUnmeetable(t *testing.T, e *Env) {
	ctx := t.Context()

	t.Run("ends the run", func(t *testing.T) {
		r, _ := e.waitingQuorum(t, 2)
		_, err := e.Store.EndUnmeetable(ctx, r, lostCall1)
		AssertCode(t, runs.EInvalid, err) // no earlier check found it so
		e.Unchanged(t, r)
		r = e.markLost(t, r)
		r, err = e.Store.Decide(ctx, r, vote("bob", loop.ActionApprove))
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, r.Status)
		require.Contains(t, marks(r), "call-1", "a vote keeps the mark")
		require.NotEmpty(t, e.inboxIDs(t, "carol", 10), "carol's inbox lists the run")
		ended, err := e.Store.EndUnmeetable(ctx, r, lostCall1)
		require.NoError(t, err)
		assert.Equal(t, runs.StatusExpired, ended.Status)
		assert.Equal(t, loop.ReasonApprovalUnmeetable, ended.Reason)
		assert.True(t, ended.State.IsZero())
		assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "the state blob is deleted")
		assert.Nil(t, ended.Decision, "nobody decided")
		assert.Contains(t, string(ended.Output), `"reason":"approval_unmeetable"`)
		assert.Contains(t, string(ended.Output), "call call-1 (send_email): approval can no longer be given")
		e.Unchanged(t, ended)
		for _, k := range []string{"bob", "carol"} {
			assert.NotContains(t, e.inboxIDs(t, k, 10), r.ID, "%s's inbox no longer lists the run", k)
		}
		evs, err := e.Store.Events(ctx, r.ID, ended.LastSeq-1, 1)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, runs.EventExpired, evs[0].Type)
		assert.Equal(t, "purge", evs[0].Actor)
		var data struct {
			SuspensionID string                 `json:"suspension_id"`
			Reason       loop.TerminationReason `json:"reason"`
			Calls        []runs.UnmeetableCall  `json:"calls"`
		}
		require.NoError(t, json.Unmarshal(evs[0].Data, &data))
		assert.Equal(t, "s1", data.SuspensionID)
		assert.Equal(t, loop.ReasonApprovalUnmeetable, data.Reason)
		assert.Equal(t, []runs.UnmeetableCall{{CallID: "call-1", Tool: "send_email", Detail: lostCall1["call-1"]}}, data.Calls)

		// A vote after it is refused.
		_, err = e.Store.Decide(ctx, r, vote("carol", loop.ActionApprove))
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, ended)
	})

	t.Run("a vote that lands first wins", func(t *testing.T) {
		r, _ := e.waitingQuorum(t, 2)
		r = e.markLost(t, r)
		checked := r // the row the sweep's check read
		voted, err := e.Store.Decide(ctx, r, vote("bob", loop.ActionApprove))
		require.NoError(t, err)
		_, err = e.Store.EndUnmeetable(ctx, checked, lostCall1)
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, voted)
		assert.Len(t, voted.Votes, 1, "the vote is kept")

		// The vote that completes the quorum, landing before the end.
		done, err := e.Store.Decide(ctx, voted, vote("carol", loop.ActionApprove))
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, done.Status)
		_, err = e.Store.EndUnmeetable(ctx, voted, lostCall1)
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, done)
	})

	t.Run("refusals", func(t *testing.T) {
		r, _ := e.waitingQuorum(t, 2)
		r = e.markLost(t, r)
		for name, lost := range map[string]map[string]string{
			"none":                        nil,
			"a call not held":             {"call-9": "x"},
			"a call needing no approval":  {"call-2": "x"},
			"one held call and one other": {"call-1": "x", "call-9": "x"},
		} {
			_, err := e.Store.EndUnmeetable(ctx, r, lost)
			require.Error(t, err, name)
			assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "%s: %v", name, err)
		}
		e.Unchanged(t, r)
		_, err := e.Store.EndUnmeetable(ctx, e.Running(t), lostCall1)
		AssertCode(t, runs.EConflict, err)
	})
}

package runstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// testClaimOnWrite: ClaimOnWrite claims a QUEUED or RESUMING run without a
// write; the segment's first write records the claim, conditional on the
// status and version read, with the claim's event (first), its steps and
// its own change (a fence leaves the events to the next write), so
// of two workers that took the same run only the first to write keeps it
// and the other's write stores nothing. A RUNNING run whose worker vanished
// is taken over at once. Redispatch counts as a take-over: at
// runs.MaxReclaims it ends the run FAILED/worker_lost; a claim keeps the
// count, a suspension resets it.
func testClaimOnWrite(t *testing.T, e *Env) {
	ctx := t.Context()
	model := loop.Step{Kind: loop.StepModelTurn, ToolCalls: 1}

	q := e.Queued(t)
	r1, err := e.Store.ClaimOnWrite(ctx, q.ID, "w1")
	require.NoError(t, err)
	r2, err := e.Store.ClaimOnWrite(ctx, q.ID, "w2")
	require.NoError(t, err, "a claim not written yet does not keep another worker out")
	assert.True(t, r1.UnwrittenClaim())
	assert.Equal(t, runs.StatusRunning, r1.Status)
	assert.Equal(t, "w1", r1.LeaseOwner)
	assert.Equal(t, q, e.stored(t, q.ID), "nothing written")
	r1, err = e.Store.AddStep(ctx, r1, "w1", model)
	require.NoError(t, err)
	r2, err = e.Store.AddStep(ctx, r2, "w2", model)
	require.NoError(t, err)
	r1, err = e.Store.StampFence(ctx, r1, "w1", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	assert.False(t, r1.UnwrittenClaim())
	assert.Equal(t, r1.Clone(), e.stored(t, q.ID))
	assert.Equal(t, q.Version+1, r1.Version, "claim and fence in one write")
	assert.Equal(t, []string{runs.EventRunStarted}, e.eventTypes(t, q.ID), "the fence writes the row alone: the claim's event and the steps stay held")
	n, _ := r1.Unwritten()
	assert.Equal(t, 1, n, "the step (the claim's event is not counted)")
	_, err = e.Store.StampFence(ctx, r2, "w2", runs.Fence{CallID: "c1"})
	AssertCode(t, runs.EConflict, err)
	sp, _ := e.Suspension(r2, "s1")
	_, err = e.Store.Suspend(ctx, r2, "w2", sp)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r1)
	r1, err = e.Store.AddStep(ctx, r1, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Effect: loop.EffectWrite})
	require.NoError(t, err)
	r1, err = e.Store.Settle(ctx, r1, "w1", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	assert.Equal(t, r1, e.stored(t, q.ID))
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, string(loop.StepModelTurn), string(loop.StepToolExecuted), runs.EventSettled}, e.eventTypes(t, q.ID),
		"the next write records them first, in order")

	// The claim rides on a suspension too; the run resumes and continues
	// through claims written the same way.
	q = e.Queued(t)
	r, err := e.Store.ClaimOnWrite(ctx, q.ID, "w1")
	require.NoError(t, err)
	sp, _ = e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, runs.EventSuspended}, e.eventTypes(t, q.ID))
	r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	r, err = e.Store.ClaimOnWrite(ctx, r.ID, "w2")
	require.NoError(t, err)
	r, err = e.Store.Checkpoint(ctx, r, "w2", runs.SegmentEnd{State: []byte(`{"at":1}`)})
	require.NoError(t, err)
	r, err = e.Store.ClaimOnWrite(ctx, r.ID, "w3")
	require.NoError(t, err)
	r, err = e.Store.Settle(ctx, r, "w3", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	assert.Equal(t, r, e.stored(t, r.ID))
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, []string{runs.EventResumed, runs.EventCheckpointed, runs.EventContinued, runs.EventSettled}, types[len(types)-4:])

	// Not claimable: refused, nothing written.
	w, _ := e.Waiting(t)
	_, err = e.Store.ClaimOnWrite(ctx, w.ID, "w2")
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.ClaimOnWrite(ctx, "no-such-run", "w2")
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.ClaimOnWrite(ctx, w.ID, "")
	AssertCode(t, runs.EInvalid, err)

	// A vanished worker's run is taken over at once, and counted.
	r = e.Running(t)
	e.Clock.Advance(LeaseTTL)
	r, err = e.Store.ClaimOnWrite(ctx, r.ID, "w2")
	require.NoError(t, err)
	assert.False(t, r.UnwrittenClaim())
	assert.Equal(t, 1, r.Reclaims)
	assert.Equal(t, r, e.stored(t, r.ID))
	types = e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventReclaimed, types[len(types)-1])

	// Re-dispatches count; a claim keeps the count, a suspension resets it;
	// at MaxReclaims the run ends worker_lost.
	q = e.Queued(t)
	for i := 1; i < runs.MaxReclaims; i++ {
		q, err = e.Store.Redispatch(ctx, q, "purge")
		require.NoError(t, err)
		assert.Equal(t, i, q.Reclaims)
	}
	r, err = e.Store.ClaimOnWrite(ctx, q.ID, "w1")
	require.NoError(t, err)
	sp, _ = e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	assert.Zero(t, e.stored(t, r.ID).Reclaims, "the run got somewhere")
	q = e.Queued(t)
	for range runs.MaxReclaims {
		q, err = e.Store.Redispatch(ctx, q, "purge")
		require.NoError(t, err)
	}
	c, err := e.Store.ClaimOnWrite(ctx, q.ID, "w1")
	require.NoError(t, err)
	assert.Equal(t, runs.MaxReclaims, c.Reclaims, "a claim keeps the count")
	q, err = e.Store.Redispatch(ctx, q, "purge")
	require.NoError(t, err)
	assert.Equal(t, runs.StatusFailed, q.Status)
	assert.Equal(t, loop.ReasonWorkerLost, q.Reason)
	assert.Equal(t, q, e.stored(t, q.ID))
	types = e.eventTypes(t, q.ID)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventRedispatched, runs.EventRedispatched, runs.EventRedispatched, runs.EventSettled}, types)
	_, err = e.Store.Settle(ctx, c, "w1", runs.Settlement{Status: runs.StatusCompleted})
	AssertCode(t, runs.EConflict, err)
}

// testClaimKeepsDispatchDeadline: the write that claims a QUEUED or
// RESUMING run ends the lease at the run's dispatch deadline (its due
// time) when that leaves at least half a lease and no more than a lease,
// so the run's due time (the due index's key) does not move; otherwise the
// lease is the write's (LeaseTTL from now), never longer.
func testClaimKeepsDispatchDeadline(t *testing.T, e *Env) {
	ctx := t.Context()
	for _, tt := range []struct {
		name string
		// after is how long after the run became QUEUED it is claimed.
		after time.Duration
		// kept says the lease ends at the dispatch deadline.
		kept bool
	}{
		{"prompt: the deadline is more than a lease away", 0, false},
		{"exactly a lease left", DispatchGrace - LeaseTTL, true},
		{"between half a lease and a lease left", DispatchGrace - LeaseTTL*3/4, true},
		{"exactly half a lease left", DispatchGrace - LeaseTTL/2, true},
		{"late: less than half a lease left", DispatchGrace - LeaseTTL/2 + time.Millisecond, false},
	} {
		for _, lazy := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, lazy %t", tt.name, lazy), func(t *testing.T) {
				q := e.Queued(t)
				deadline := q.DueAt
				require.Equal(t, q.UpdatedAt.Add(DispatchGrace), deadline)
				e.Clock.Advance(tt.after)
				now := e.Clock.Now().UTC().Truncate(time.Millisecond)
				var r *runs.Run
				var err error
				if lazy {
					r, err = e.Store.ClaimOnWrite(ctx, q.ID, "w1")
					require.NoError(t, err)
					r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1"})
				} else {
					r, err = e.Store.Claim(ctx, q.ID, "w1")
				}
				require.NoError(t, err)
				want := now.Add(LeaseTTL)
				if tt.kept {
					want = deadline
				}
				assert.Equal(t, want, r.LeaseUntil)
				assert.Equal(t, r.LeaseUntil, r.DueAt)
				assert.Equal(t, r.Clone(), e.stored(t, q.ID))
				if tt.kept {
					assert.Equal(t, q.DueAt, r.DueAt, "the due time stays")
				}
				// A renewal with less than half left gives a whole lease.
				e.Clock.Advance(r.LeaseUntil.Sub(now) - LeaseTTL/4)
				r, err = e.Store.RenewLease(ctx, r, "w1")
				require.NoError(t, err)
				assert.Equal(t, e.Clock.Now().UTC().Truncate(time.Millisecond).Add(LeaseTTL), r.LeaseUntil)
			})
		}
	}
}

// testClaimSnapshot: ClaimSnapshot claims from the row a write returned,
// without reading, as ClaimOnWrite would from a read: the first write
// records the claim. A stale snapshot (the run was cancelled, or another
// worker wrote first) makes that write fail and store nothing. A snapshot
// that is not a stored row, or of a run not waiting for a worker, is
// refused.
func testClaimSnapshot(t *testing.T, e *Env) {
	ctx := t.Context()
	model := loop.Step{Kind: loop.StepModelTurn, ToolCalls: 1}

	q := e.Queued(t)
	r, err := e.Store.ClaimSnapshot(q, "w1")
	require.NoError(t, err)
	assert.True(t, r.UnwrittenClaim())
	assert.Equal(t, runs.StatusRunning, r.Status)
	assert.Equal(t, "w1", r.LeaseOwner)
	e.Unchanged(t, q)
	r, err = e.Store.AddStep(ctx, r, "w1", model)
	require.NoError(t, err)
	sp, _ := e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	assert.Equal(t, q.Version+1, r.Version, "claim, step and suspension in one write")
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, string(loop.StepModelTurn), runs.EventSuspended}, e.eventTypes(t, q.ID))
	decided, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	r, err = e.Store.ClaimSnapshot(decided, "w2")
	require.NoError(t, err)
	r, err = e.Store.StampFence(ctx, r, "w2", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	assert.Equal(t, decided.Version+1, r.Version, "the claim is written with the fence")
	types := e.eventTypes(t, q.ID)
	assert.Equal(t, runs.EventDecision, types[len(types)-1], "the fence writes the row alone; the claim's event is held")
	held, err := e.Store.Settle(ctx, r, "w2", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	types = e.eventTypes(t, q.ID)
	assert.Equal(t, runs.EventResumed, types[len(types)-2], "the claim's event goes with the next write")
	r = held

	// Stale: another worker wrote first from the same snapshot.
	late, err := e.Store.ClaimSnapshot(decided, "w3")
	require.NoError(t, err, "a snapshot is not checked against the store")
	_, err = e.Store.StampFence(ctx, late, "w3", runs.Fence{CallID: "c1"})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	// Stale: the run was cancelled after the snapshot.
	q = e.Queued(t)
	cancelled, err := e.Store.Cancel(ctx, q, "alice")
	require.NoError(t, err)
	late, err = e.Store.ClaimSnapshot(q, "w1")
	require.NoError(t, err)
	late, err = e.Store.AddStep(ctx, late, "w1", model)
	require.NoError(t, err)
	sp, _ = e.Suspension(late, "s1")
	_, err = e.Store.Suspend(ctx, late, "w1", sp)
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.Settle(ctx, late, "w1", runs.Settlement{Status: runs.StatusCompleted})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, cancelled)

	// Refused.
	_, err = e.Store.ClaimSnapshot(cancelled, "w1")
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.ClaimSnapshot(r, "w9")
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.ClaimSnapshot(nil, "w1")
	AssertCode(t, runs.EInvalid, err)
	unstored := q.Clone()
	unstored.Version = 0
	_, err = e.Store.ClaimSnapshot(unstored, "w1")
	AssertCode(t, runs.EInvalid, err)
	_, err = e.Store.ClaimSnapshot(q, "")
	AssertCode(t, runs.EInvalid, err)
}

// testClaimSnapshotNotStored: a snapshot of the stored status and version
// that is not the stored row is never written over the row. One whose
// content was changed under the stored write id (its approvers) is refused
// at once; one made up whole (its write id digests its content, but is not
// the stored row's) is claimed from, and the first write fails and stores
// nothing.
func testClaimSnapshotNotStored(t *testing.T, e *Env) {
	ctx := t.Context()
	q := e.Queued(t)
	forged := q.Clone()
	forged.Approvers = []string{"mallory"}
	_, err := e.Store.ClaimSnapshot(forged, "w1")
	AssertCode(t, runs.EInvalid, err)
	forged = q.Clone()
	forged.UpdatedAt = forged.UpdatedAt.Add(time.Second)
	_, err = e.Store.ClaimSnapshot(forged, "w1")
	AssertCode(t, runs.EInvalid, err)
	forged.WriteID = runs.NewRunID()
	_, err = e.Store.ClaimSnapshot(forged, "w1")
	AssertCode(t, runs.EInvalid, err)

	forged.Approvers = []string{"mallory"}
	runs.SealWriteID(forged)
	r, err := e.Store.ClaimSnapshot(forged, "w1")
	require.NoError(t, err, "a consistent snapshot is not checked against the store")
	sp, _ := e.Suspension(r, "s1")
	_, err = e.Store.Suspend(ctx, r, "w1", sp)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, q)
	noID := q.Clone()
	noID.WriteID = ""
	_, err = e.Store.ClaimSnapshot(noID, "w1")
	AssertCode(t, runs.EInvalid, err)
}

package runstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// testUnwrittenSteps: a segment's steps (AddStep) are not written on their
// own: the segment's next write records them first, in order, before its
// own event, in the same atomic write; their effect on the row (a fenced
// call's tool_executed step clears the fence and sets WroteSinceClaim)
// applies to the worker's row at once and to the stored row with that
// write. A fence writes the row alone and leaves them held, unless they
// record a write's result or the fence stores a checkpoint. Past MaxUnwrittenSteps they are written at once. A write that
// loses to another (a cancel) stores none of them. SaveProgress stores them
// with a checkpoint that holds a write's result.
func testUnwrittenSteps(t *testing.T, e *Env) {
	ctx := t.Context()
	model := loop.Step{Kind: loop.StepModelTurn, ToolCalls: 1}
	read := loop.Step{Kind: loop.StepToolExecuted, CallID: "r1", Tool: "read_doc", Effect: loop.EffectRead}

	r := e.Running(t)
	stored := e.stored(t, r.ID)
	before := e.eventTypes(t, r.ID)
	r, err := e.Store.AddStep(ctx, r, "w1", model)
	require.NoError(t, err)
	r, err = e.Store.AddStep(ctx, r, "w1", read)
	require.NoError(t, err)
	n, size := r.Unwritten()
	assert.Equal(t, 2, n)
	assert.Positive(t, size)
	assert.Equal(t, stored, e.stored(t, r.ID), "adding a step writes nothing")
	assert.Equal(t, before, e.eventTypes(t, r.ID))

	// Refusals change nothing and keep nothing.
	_, err = e.Store.AddStep(ctx, r, "w2", model)
	AssertCode(t, runs.EConflict, err)
	for _, k := range []loop.StepKind{"", loop.StepSuspended, loop.StepResumed, loop.StepFinished, loop.StepHandedOver} {
		_, err = e.Store.AddStep(ctx, r, "w1", loop.Step{Kind: k})
		AssertCode(t, runs.EInvalid, err)
	}

	// The fence writes the row alone: the steps stay held for the next
	// write. The fenced call's step clears the fence on the worker's row,
	// and on the stored row with the next write.
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	n, _ = r.Unwritten()
	assert.Equal(t, 2, n, "still held")
	assert.Equal(t, before, e.eventTypes(t, r.ID), "the fence wrote no event")
	assert.Equal(t, r.Clone(), e.stored(t, r.ID))
	assert.Equal(t, "c1", e.stored(t, r.ID).PendingEffect)
	r, err = e.Store.AddStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Tool: "send_email", Effect: loop.EffectWrite})
	require.NoError(t, err)
	assert.Empty(t, r.PendingEffect)
	assert.True(t, r.WroteSinceClaim)
	assert.Equal(t, "c1", e.stored(t, r.ID).PendingEffect, "the stored fence stays until the step is written")
	r, err = e.Store.AddStep(ctx, r, "w1", model)
	require.NoError(t, err)
	sp, _ := e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	w := e.stored(t, r.ID)
	assert.Equal(t, r, w)
	assert.Empty(t, w.PendingEffect, "cleared with the step")
	assert.Equal(t, append(before, string(loop.StepModelTurn), string(loop.StepToolExecuted), string(loop.StepToolExecuted), string(loop.StepModelTurn), runs.EventSuspended), e.eventTypes(t, r.ID),
		"the steps held across the fence first, in order, then the transition's event")

	// A fence after a held write result carries the steps: every write
	// that took effect is on record before the next one runs.
	r = e.Running(t)
	before = e.eventTypes(t, r.ID)
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	r, err = e.Store.AddStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Tool: "send_email", Effect: loop.EffectWrite})
	require.NoError(t, err)
	r, err = e.Store.AddStep(ctx, r, "w1", model)
	require.NoError(t, err)
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c2"})
	require.NoError(t, err)
	n, _ = r.Unwritten()
	assert.Zero(t, n, "written with the fence")
	assert.Equal(t, r, e.stored(t, r.ID))
	assert.Equal(t, append(before, string(loop.StepToolExecuted), string(loop.StepModelTurn)), e.eventTypes(t, r.ID))

	// So does a fence that stores a checkpoint: a new worker goes on from
	// there and does not make the steps before it again.
	r = e.Running(t)
	before = e.eventTypes(t, r.ID)
	r, err = e.Store.AddStep(ctx, r, "w1", read)
	require.NoError(t, err)
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1", Idempotent: true, Checkpoint: []byte(`{"at":1}`)})
	require.NoError(t, err)
	n, _ = r.Unwritten()
	assert.Zero(t, n, "written with the fence")
	assert.Equal(t, r, e.stored(t, r.ID))
	assert.Equal(t, append(before, string(loop.StepToolExecuted)), e.eventTypes(t, r.ID))

	// Past the bound, AddStep writes them itself, with the segment's
	// running totals the steps carry.
	r = e.Running(t)
	for i := range runs.MaxUnwrittenSteps + 1 {
		r, err = e.Store.AddStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "r", Effect: loop.EffectRead, Iteration: i,
			Counters: &loop.Counters{Iterations: 1, ModelCalls: 1, ToolCalls: i + 1}})
		require.NoError(t, err)
	}
	n, _ = r.Unwritten()
	assert.Zero(t, n)
	assert.Len(t, e.eventTypes(t, r.ID), 2+runs.MaxUnwrittenSteps+1, "created, claimed and the steps")
	assert.Equal(t, r, e.stored(t, r.ID))
	assert.Equal(t, runs.MaxUnwrittenSteps+1, e.stored(t, r.ID).Counters.ToolCalls, "the totals of the steps written")

	// A write that loses (the run was cancelled) stores none of them.
	r, err = e.Store.AddStep(ctx, r, "w1", model)
	require.NoError(t, err)
	_, err = e.Store.Cancel(ctx, e.stored(t, r.ID), "alice")
	require.NoError(t, err)
	_, err = e.Store.RenewLease(ctx, r, "w1")
	AssertCode(t, runs.EConflict, err)
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventCancelled, types[len(types)-1])
	assert.Len(t, types, 3+runs.MaxUnwrittenSteps+1, "nothing of the losing write")
	assert.Equal(t, runs.MaxUnwrittenSteps+1, e.stored(t, r.ID).Counters.ToolCalls, "the cancelled run counts the calls its events record")

	// SaveProgress: the steps with a checkpoint holding the write's result.
	r = e.Running(t)
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	_, err = e.Store.SaveProgress(ctx, r, "w1", []byte(`{"at":1}`))
	AssertCode(t, runs.EInvalid, err)
	r, err = e.Store.AddStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Effect: loop.EffectWrite})
	require.NoError(t, err)
	r, err = e.Store.SaveProgress(ctx, r, "w1", []byte(`{"at":1}`))
	require.NoError(t, err)
	w = e.stored(t, r.ID)
	assert.Equal(t, r, w)
	assert.Empty(t, w.PendingEffect)
	assert.False(t, w.WroteSinceClaim, "the checkpoint holds the write's result")
	require.False(t, w.Checkpoint.IsZero())
	b, err := e.Store.LoadCheckpoint(ctx, w)
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":1}`, string(b))
	types = e.eventTypes(t, r.ID)
	assert.Equal(t, string(loop.StepToolExecuted), types[len(types)-1])
}

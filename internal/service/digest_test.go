package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// TestDigestOfOneRunIsRefusedByAnother is issue #10 item 7: two runs held on
// identical turns (same call ids, tools and inputs) have different digests,
// and a decision carrying run A's digest does not resume run B.
func TestDigestOfOneRunIsRefusedByAnother(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.start(t), e.start(t)
	for _, r := range []*runs.Run{a, b} {
		require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	}
	a, b = e.get(t, a.ID), e.get(t, b.ID)
	require.Equal(t, runs.StatusWaiting, b.Status)
	require.Equal(t, a.PendingCalls[0].ID, b.PendingCalls[0].ID, "the two turns are identical")
	require.Equal(t, string(a.PendingCalls[0].Input), string(b.PendingCalls[0].Input))
	assert.NotEqual(t, a.TurnDigest, b.TurnDigest, "the digest binds the run")

	_, err := e.store.Decide(ctx, b, runs.NewDecision{SuspensionID: b.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: a.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: b.ID}))
	got := e.get(t, b.ID)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonStateUnreadable, got.Reason)
	assert.Equal(t, 0, e.writes, "nothing of run B's turn ran on run A's digest")
}

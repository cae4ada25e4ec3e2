package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

func opsDirectory(t *testing.T, groups string) *identity.Directory {
	t.Helper()
	d, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"alice","aliases":["alice"]},{"id":"bob","aliases":["bob","bob@example.com"]},{"id":"carol","aliases":["carol","carol@example.com"]}],
		"groups":[` + groups + `]}`))
	require.NoError(t, err)
	return d
}

// startWith creates a run of alice's with the given approvers and takes it
// to its approval (a write_note call under the default rule).
func (e *env) startWith(t *testing.T, approvers ...string) *runs.Run {
	t.Helper()
	req, _ := json.Marshal(service.StartRequest{Prompt: "note", Approvers: approvers})
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: approvers, Request: req})
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	r = e.get(t, r.ID)
	require.Equal(t, runs.StatusWaiting, r.Status)
	return r
}

// TestSweepChecksTheQuorumOfWaitingRuns: a worker with a directory has
// the sweep check a waiting run's quorum QuorumCheckEvery after it held
// the turn, and again after each check that finds it can be met; a run
// whose group of approvers is gone from the directory in force ends
// EXPIRED/approval_unmeetable at its check, long before its deadline, and
// is never reminded; a run its approvers can still decide keeps waiting
// and gets its reminder as before. A sweeper without a directory ends
// nothing, and a worker without one schedules no check.
func TestSweepChecksTheQuorumOfWaitingRuns(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 4 * time.Hour
	e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
	e.sweeper.Directory = e.worker.Directory
	e.sweeper.Remind = e.worker.Remind
	t0 := e.clock.Now()

	byGroup := e.startWith(t, "group:ops")
	byName := e.startWith(t, "bob")
	assert.Equal(t, t0.Add(service.QuorumCheckEvery), byGroup.QuorumCheckAt)
	assert.Equal(t, t0.Add(service.QuorumCheckEvery), byGroup.DueAt, "the check is the run's first due time")

	e.clock.Advance(service.QuorumCheckEvery - time.Millisecond)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.QuorumChecked+sum.Unmeetable, "not due yet: %+v", sum)

	e.clock.Advance(time.Millisecond)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, t0.Add(2*service.QuorumCheckEvery), e.get(t, byGroup.ID).QuorumCheckAt, "checked again an interval later")

	// ops is removed from the directory (a redeploy): the run that needs
	// it can no longer be decided by anyone; bob can still decide his.
	e.sweeper.Directory = opsDirectory(t, `{"name":"audit","members":["carol"]}`)
	e.clock.Advance(service.QuorumCheckEvery)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	got := e.get(t, byGroup.ID)
	assert.Equal(t, runs.StatusExpired, got.Status)
	assert.Equal(t, loop.ReasonApprovalUnmeetable, got.Reason)
	assert.True(t, got.ApprovalDeadline.After(e.clock.Now()), "ended before its deadline")
	assert.Contains(t, string(got.Output), "no such group in the directory")
	assert.Equal(t, runs.StatusWaiting, e.get(t, byName.ID).Status)
	assert.Equal(t, 0, e.writes, "nothing of the held turns ran")

	// At 80% of the window the remaining run is checked (its check came
	// due meanwhile) and reminded, as before, in one sweep.
	notes := len(e.notes)
	e.clock.Advance(t0.Add(4 * time.Hour * 8 / 10).Sub(e.clock.Now()))
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, 1, sum.Reminded, "%+v", sum)
	assert.Greater(t, len(e.notes), notes)
	assert.Equal(t, runs.StatusWaiting, e.get(t, byName.ID).Status)

	t.Run("a sweeper without a directory ends nothing", func(t *testing.T) {
		e := newEnv(t)
		e.worker.ApprovalTTL = 4 * time.Hour
		e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
		r := e.startWith(t, "group:ops")
		e.clock.Advance(service.QuorumCheckEvery)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.Unmeetable)
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusWaiting, got.Status)
		assert.Equal(t, e.clock.Now().Add(service.QuorumCheckEvery), got.QuorumCheckAt, "checked again later, when a directory may be there")
	})
	t.Run("a worker without a directory schedules no check", func(t *testing.T) {
		e := newEnv(t)
		e.worker.ApprovalTTL = 4 * time.Hour
		r := e.startWith(t, "bob")
		assert.True(t, r.QuorumCheckAt.IsZero())
	})
}

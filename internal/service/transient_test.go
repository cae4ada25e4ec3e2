package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// flakyRows is a row store whose next write that a predicate picks fails
// once with a passing (non-conflict) error, as a throttled or timed-out
// request would.
type flakyRows struct {
	runs.RowStore
	mu     sync.Mutex
	pick   func(runs.Write) bool
	failed int
}

func (f *flakyRows) failOnce(pick func(runs.Write) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pick = pick
}

func (f *flakyRows) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *flakyRows) Write(ctx context.Context, w runs.Write) error {
	f.mu.Lock()
	if f.pick != nil && f.pick(w) {
		f.pick = nil
		f.failed++
		f.mu.Unlock()
		return errors.New("throttled")
	}
	f.mu.Unlock()
	return f.RowStore.Write(ctx, w)
}

// A resume that refuses its lost state settles the run FAILED; when that
// settle itself fails, the job fails (before: the error was dropped, the
// job reported success and the run stayed RUNNING with nothing logged), and
// the run is not stuck: the sweep takes it over and it ends
// FAILED/state_unreadable, with nothing of the held turn run.
func TestResumeWhoseSettleFailsFailsTheJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rows := &flakyRows{RowStore: e.db}
	e.store = runs.NewStore(rows, e.db, runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour, Logger: quiet})
	e.worker.Store, e.sweeper.Store = e.store, e.store
	r := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	w := e.get(t, r.ID)
	_, err := e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	require.NoError(t, deleteStates(e, r.ID))

	rows.failOnce(func(w runs.Write) bool { return w.Run != nil && w.Run.Status == runs.StatusFailed })
	err = e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID})
	require.Error(t, err, "the failed settle fails the job")
	assert.Equal(t, 1, rows.failures())
	got := e.get(t, r.ID)
	assert.False(t, got.Status.Terminal(), "the settle did not happen: %s", got.Status)

	for range 5 {
		if e.get(t, r.ID).Status.Terminal() {
			break
		}
		e.clock.Advance(3 * time.Minute) // past the lease
		e.jobs = nil
		_, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		for _, j := range e.jobs {
			require.NoError(t, e.worker.Handle(ctx, j))
		}
	}
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonStateUnreadable, got.Reason)
	assert.Equal(t, 0, e.writes, "nothing of the held turn ran")
}

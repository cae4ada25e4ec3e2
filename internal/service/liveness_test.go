package service_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// pausingRows lets a test hold a worker right after it read the run row,
// so another write can land between the worker's read and its claim.
type pausingRows struct {
	runs.RowStore
	mu      sync.Mutex
	paused  chan struct{}
	release chan struct{}
}

// pauseNextGet makes the next GetRun close paused once it has read the row
// and wait for release before returning.
func (p *pausingRows) pauseNextGet() (paused, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused, p.release = make(chan struct{}), make(chan struct{})
	return p.paused, p.release
}

func (p *pausingRows) GetRun(ctx context.Context, id string) (*runs.Run, error) {
	r, err := p.RowStore.GetRun(ctx, id)
	p.mu.Lock()
	pa, re := p.paused, p.release
	p.paused, p.release = nil, nil
	p.mu.Unlock()
	if pa != nil {
		close(pa)
		<-re
	}
	return r, err
}

// TestLostJobIsClaimedWithinOneSweep is issue #10 item 1: the sweep
// re-dispatched a run whose job was lost and then bumped the run's version,
// so the worker, which had already read the row, lost its conditional claim
// every cycle and the run stayed QUEUED (or RESUMING) for ever.
func TestLostJobIsClaimedWithinOneSweep(t *testing.T) {
	for _, status := range []runs.Status{runs.StatusQueued, runs.StatusResuming} {
		t.Run(string(status), func(t *testing.T) {
			e := newEnv(t)
			db, err := embedded.Open(filepath.Join(t.TempDir(), "p.db"))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			rows := &pausingRows{RowStore: db}
			e.store = runs.NewStore(rows, db, runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour})
			e.worker.Store = e.store
			ctx := context.Background()
			r := e.start(t)
			want := runs.StatusWaiting
			if status == runs.StatusResuming {
				require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
				w := e.get(t, r.ID)
				_, err := e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
					Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
				require.NoError(t, err)
				want = runs.StatusCompleted
			}
			require.Equal(t, status, e.get(t, r.ID).Status) // and its job is lost

			// The in-process dispatcher runs the worker concurrently: by the
			// time Dispatch returns the worker has read the row; it goes on
			// after the sweep returns.
			var wg sync.WaitGroup
			var releases []chan struct{}
			e.sweeper = &service.Sweeper{Store: e.store, Now: e.clock.Now, Dispatch: service.DispatchFunc(func(ctx context.Context, j service.Job) error {
				paused, release := rows.pauseNextGet()
				releases = append(releases, release)
				wg.Add(1)
				go func() {
					defer wg.Done()
					assert.NoError(t, e.worker.Handle(context.WithoutCancel(ctx), j))
				}()
				<-paused
				return nil
			})}
			e.clock.Advance(runs.DefaultDispatchGrace)
			sum, err := e.sweeper.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, sum.Redispatched)
			for _, rel := range releases {
				close(rel)
			}
			wg.Wait()
			got := e.get(t, r.ID)
			assert.Equal(t, want, got.Status, "the re-dispatched worker claimed the run and went on")
			if status == runs.StatusResuming {
				assert.Equal(t, 1, e.writes, "the approved write ran once")
			}
		})
	}
}

// TestRecoverDispatchesWaitingWorkAtOnce: a process that starts on a store
// only it dispatches from hands QUEUED and RESUMING runs to workers at
// start-up, not after their dispatch grace.
func TestRecoverDispatchesWaitingWorkAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	queued := e.start(t)
	waiting := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: waiting.ID}))
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Redispatched, "an ordinary sweep waits out the grace")
	assert.Empty(t, e.jobs)

	sum, err = e.sweeper.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Redispatched)
	assert.Equal(t, []service.Job{{Kind: service.JobRun, RunID: queued.ID}}, e.jobs)
	assert.Equal(t, runs.StatusWaiting, e.get(t, waiting.ID).Status, "a waiting run is not touched before its deadline")
	require.NoError(t, e.worker.Handle(ctx, e.jobs[0]))
	assert.Equal(t, runs.StatusWaiting, e.get(t, queued.ID).Status)
}

// TestRecoverTakesOverAPreviousProcessesRuns: at start-up on a store only
// one process opens, a RUNNING run whose lease another process's worker
// holds is taken over at once (that worker died with its process), not
// after its lease; a run this process's own worker holds is left alone.
func TestRecoverTakesOverAPreviousProcessesRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	running := func(owner string) *runs.Run {
		r := e.start(t)
		cur, err := e.store.ClaimOnWrite(ctx, r.ID, owner)
		require.NoError(t, err)
		cur, err = e.store.RenewLease(ctx, cur, owner) // the claim, written
		require.NoError(t, err)
		require.Equal(t, runs.StatusRunning, cur.Status)
		return cur
	}
	dead := running("gone/w1")
	mine := running("this/w2")

	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Reaped, "an ordinary sweep waits out the lease")

	e.sweeper.Owner = ""
	sum, err = e.sweeper.Recover(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Reaped, "a sweeper that does not know its own workers ends no lease")
	assert.Equal(t, "gone/w1", e.get(t, dead.ID).LeaseOwner)

	e.sweeper.Owner = "this"
	sum, err = e.sweeper.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Reaped)
	assert.Equal(t, []service.Job{{Kind: service.JobRun, RunID: dead.ID}}, e.jobs)
	assert.Equal(t, "this/w2", e.get(t, mine.ID).LeaseOwner, "this process's own worker keeps its run")

	require.NoError(t, e.worker.Handle(ctx, e.jobs[0]))
	got := e.get(t, dead.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status, "taken over from its request (no write had happened)")
	evs, err := e.store.Events(ctx, dead.ID, 0, 100)
	require.NoError(t, err)
	assert.Contains(t, eventTypes(evs), runs.EventReclaimed)
}

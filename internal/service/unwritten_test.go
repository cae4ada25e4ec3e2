package service_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// TestLongCallAfterAWriteSavesItsResult: the worker records a write's
// tool_executed step with its next write, not at once; when its lease must
// be renewed first (a long model call after the write), the heartbeat
// stores the steps with the checkpoint that holds the write's result. A
// worker that dies during that call then leaves a run the sweep hands to a
// new worker, which goes on after the write (made once) and completes.
// Without the checkpoint the stored fence of the non-idempotent write would
// end the run interrupted_write.
func TestLongCallAfterAWriteSavesItsResult(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "u.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	store := runs.NewStore(db, db, runs.Options{Now: clock.Now, Logger: quiet})
	var jobs []service.Job
	queue := service.DispatchFunc(func(_ context.Context, j service.Job) error { jobs = append(jobs, j); return nil })
	sweeper := &service.Sweeper{Store: store, Dispatch: queue, Logger: quiet, Now: clock.Now}
	applied := 0
	note := &loop.FuncTool{
		Def: loop.Definition{Name: "note", Effect: loop.EffectWrite, NoApproval: true, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			applied++
			return loop.Result{Content: "noted"}, nil
		},
	}
	tools, err := loop.NewToolbox(note)
	require.NoError(t, err)
	var runID string
	die := true
	model := loop.ModelFunc(func(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		if len(req.Messages) == 1 {
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("n1", "note", json.RawMessage(`{}`))}}, StopReason: loop.StopToolUse}, nil
		}
		if die {
			die = false
			// A long call after the write: past half the lease, the
			// heartbeat stores the write's step and its checkpoint.
			clock.Advance(runs.DefaultLeaseTTL * 3 / 4)
			require.Eventually(t, func() bool {
				r, err := store.Get(ctx, runID)
				return err == nil && r.PendingEffect == "" && !r.Checkpoint.IsZero()
			}, 10*time.Second, time.Millisecond, "the heartbeat stores the write's result")
			panic(crashed{})
		}
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done")}}, StopReason: loop.StopEndTurn}, nil
	})
	w := &service.Worker{Store: store, Owner: "w", Logger: quiet, Now: clock.Now, Heartbeat: time.Millisecond, Dispatch: queue,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: clock.Now}
		}}
	req, _ := json.Marshal(service.StartRequest{Prompt: "note it", Approvers: []string{"bob"}})
	r, err := store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	runID = r.ID

	func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // the dead worker's heartbeat stops with it
		defer func() {
			_, ok := recover().(crashed)
			require.True(t, ok, "the worker died in the long call")
		}()
		_ = w.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID})
	}()
	r, err = store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	require.Equal(t, runs.StatusRunning, r.Status)
	assert.True(t, r.Reclaimable(), "no write's outcome is unknown")

	clock.Advance(runs.DefaultLeaseTTL + time.Second)
	sum, err := sweeper.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Reaped, "handed to a new worker")
	for len(jobs) > 0 {
		j := jobs[0]
		jobs = jobs[1:]
		require.NoError(t, w.Handle(context.Background(), j))
	}
	r, err = store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCompleted, r.Status, "%s", r.Reason)
	assert.Equal(t, 1, applied, "the write was made once")
}

// lazyEnv is a worker over an embedded store whose model is given per test.
type lazyEnv struct {
	store   *runs.Store
	worker  *service.Worker
	sweeper *service.Sweeper
	clock   *clocktest.Clock
	jobs    []service.Job
	runID   string
}

func newLazyEnv(t *testing.T, model loop.Model, tools ...loop.Tool) *lazyEnv {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "l.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	e := &lazyEnv{clock: clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))}
	e.store = runs.NewStore(db, db, runs.Options{Now: e.clock.Now, Logger: quiet})
	queue := service.DispatchFunc(func(_ context.Context, j service.Job) error { e.jobs = append(e.jobs, j); return nil })
	e.sweeper = &service.Sweeper{Store: e.store, Dispatch: queue, Logger: quiet, Now: e.clock.Now}
	box, err := loop.NewToolbox(tools...)
	require.NoError(t, err)
	e.worker = &service.Worker{Store: e.store, Owner: "w", Logger: quiet, Now: e.clock.Now, Dispatch: queue,
		NewToken: func() (string, string, error) { return "raw", "hash-" + runs.NewRunID(), nil },
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: box, Hooks: h, Now: e.clock.Now}
		}}
	req, _ := json.Marshal(service.StartRequest{Prompt: "go", Approvers: []string{"bob"}})
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	e.runID = r.ID
	return e
}

func (e *lazyEnv) events(t *testing.T) []string {
	t.Helper()
	evs, err := e.store.Events(context.Background(), e.runID, 0, 100)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	return types
}

// TestWorkersDyingBeforeTheirFirstWriteEndWorkerLost: a worker writes its
// claim with its first write, so one that dies before (here: in every
// model call) leaves the run QUEUED with no trace; the sweep dispatches it
// again after the dispatch grace, counting each re-dispatch, and after
// runs.MaxReclaims ends it FAILED/worker_lost instead of dispatching it for
// ever.
func TestWorkersDyingBeforeTheirFirstWriteEndWorkerLost(t *testing.T) {
	deaths := 0
	e := newLazyEnv(t, loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		deaths++
		panic(crashed{})
	}))
	work := func() {
		for len(e.jobs) > 0 {
			j := e.jobs[0]
			e.jobs = e.jobs[1:]
			func() {
				defer func() { _, _ = recover().(crashed) }()
				_ = e.worker.Handle(context.Background(), j)
			}()
		}
	}
	e.jobs = []service.Job{{Kind: service.JobRun, RunID: e.runID}}
	var r *runs.Run
	for sweeps := 0; ; sweeps++ {
		work()
		var err error
		r, err = e.store.Get(context.Background(), e.runID)
		require.NoError(t, err)
		if r.Status.Terminal() {
			break
		}
		require.Equal(t, runs.StatusQueued, r.Status, "a worker that never wrote leaves no trace")
		require.LessOrEqual(t, sweeps, runs.MaxReclaims, "the run is dispatched for ever")
		e.clock.Advance(runs.DefaultDispatchGrace)
		sum, err := e.sweeper.Sweep(context.Background())
		require.NoError(t, err)
		if sweeps == runs.MaxReclaims {
			assert.Equal(t, 1, sum.WorkersLost)
			assert.Empty(t, e.jobs, "an ended run is not dispatched")
		}
	}
	assert.Equal(t, runs.StatusFailed, r.Status)
	assert.Equal(t, loop.ReasonWorkerLost, r.Reason)
	assert.Equal(t, runs.MaxReclaims+1, deaths, "the first worker and %d re-dispatched ones", runs.MaxReclaims)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventRedispatched, runs.EventRedispatched, runs.EventRedispatched, runs.EventSettled}, e.events(t))
}

// TestDuplicatedDispatchCostsOnlyTheLosersCalls: Lambda async invokes are
// at-least-once, so two workers may get the same job. Neither writes its
// claim before its first write: the one that writes first keeps the run,
// and the other's first write fails, after which it stops having made only
// model calls and reads (the write call it reached never ran).
func TestDuplicatedDispatchCostsOnlyTheLosersCalls(t *testing.T) {
	var e *lazyEnv
	calls, writes := 0, 0
	note := &loop.FuncTool{
		Def: loop.Definition{Name: "note", Effect: loop.EffectWrite, NoApproval: true, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			writes++
			return loop.Result{Content: "noted"}, nil
		},
	}
	model := loop.ModelFunc(func(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		calls++
		if calls == 1 {
			// The duplicate runs the whole run while the first worker
			// waits for its model.
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: e.runID}))
		}
		if len(req.Messages) == 1 {
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("n1", "note", json.RawMessage(`{}`))}}, StopReason: loop.StopToolUse}, nil
		}
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done")}}, StopReason: loop.StopEndTurn}, nil
	})
	e = newLazyEnv(t, model, note)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: e.runID}))
	r, err := e.store.Get(context.Background(), e.runID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCompleted, r.Status)
	assert.Equal(t, 1, writes, "the write ran once, by the worker that kept the run")
	assert.Equal(t, 3, calls, "two model calls of the winner, one of the loser")
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, string(loop.StepModelTurn), string(loop.StepToolExecuted), string(loop.StepModelTurn), runs.EventSettled}, e.events(t))
}

// TestFenceWritesTheRowAlone: a resume worker's first write is the fence of
// the approved write: it writes the claim and the fence only, and leaves
// the claim's resumed event for the segment's next write. A worker that
// dies during the call leaves the fence stamped and no resumed event; the
// sweep ends the run interrupted_write, and its settled event names the
// worker that held the run beside the write whose outcome is unknown.
func TestFenceWritesTheRowAlone(t *testing.T) {
	applied := 0
	send := &loop.FuncTool{
		Def: loop.Definition{Name: "send", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			applied++
			panic(crashed{})
		},
	}
	model := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("s1", "send", json.RawMessage(`{}`))}}, StopReason: loop.StopToolUse}, nil
	})
	e := newLazyEnv(t, model, send)
	ctx := context.Background()
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: e.runID}))
	r, err := e.store.Get(ctx, e.runID)
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	_, err = e.store.Decide(ctx, r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	func() {
		defer func() {
			_, ok := recover().(crashed)
			require.True(t, ok, "the worker died in the call")
		}()
		_ = e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: e.runID})
	}()
	require.Equal(t, 1, applied)
	r, err = e.store.Get(ctx, e.runID)
	require.NoError(t, err)
	require.Equal(t, runs.StatusRunning, r.Status, "the fence wrote the claim")
	assert.Equal(t, "s1", r.PendingEffect)
	owner := r.LeaseOwner
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, string(loop.StepModelTurn), runs.EventSuspended, runs.EventDecision}, e.events(t),
		"the fence wrote no event")

	e.clock.Advance(runs.DefaultLeaseTTL + time.Second)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Interrupted)
	evs, err := e.store.Events(ctx, e.runID, 0, 100)
	require.NoError(t, err)
	last := evs[len(evs)-1]
	assert.Equal(t, runs.EventSettled, last.Type)
	assert.JSONEq(t, `{"status":"FAILED","reason":"interrupted_write","lease_owner":"`+owner+`","pending_effect":"s1"}`, string(last.Data),
		"the ending event names the worker whose claim event was lost, and its write in flight")
}

// TestSweepLeavesALiveWorkerWhoseClaimKeptTheDeadline: a resume job that
// comes 30 s after the decision is claimed by the worker's fence with the
// lease ending at the dispatch deadline (the run's due time stays; less
// than a lease, more than half of one, is left). During a write call that
// outlives several leases the heartbeat renews the lease whenever less
// than half is left, and the sweep, run every 20 s, never re-dispatches or
// takes over the run; the write runs once and the run completes.
func TestSweepLeavesALiveWorkerWhoseClaimKeptTheDeadline(t *testing.T) {
	var e *lazyEnv
	ctx := context.Background()
	applied, sweeps := 0, 0
	var decided time.Time
	send := &loop.FuncTool{
		Def: loop.Definition{Name: "send", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			applied++
			r, err := e.store.Get(ctx, e.runID)
			require.NoError(t, err)
			require.Equal(t, runs.StatusRunning, r.Status, "the fence wrote the claim")
			assert.Equal(t, decided.Add(runs.DefaultDispatchGrace), r.LeaseUntil, "the lease ends at the dispatch deadline")
			assert.Equal(t, r.LeaseUntil, r.DueAt, "the due time stayed")
			for range 3 * int(runs.DefaultLeaseTTL/(20*time.Second)) {
				e.clock.Advance(20 * time.Second)
				require.Eventually(t, func() bool {
					r, err := e.store.Get(ctx, e.runID)
					return err == nil && !r.LeaseUntil.Before(e.clock.Now().Add(runs.DefaultLeaseTTL/2))
				}, 10*time.Second, time.Millisecond, "the heartbeat renews the lease once less than half is left")
				sum, err := e.sweeper.Sweep(ctx)
				require.NoError(t, err)
				sweeps++
				assert.Zero(t, sum.Redispatched+sum.Reaped+sum.Interrupted+sum.WorkersLost, "the sweep leaves a live worker's run alone: %+v", sum)
				assert.Empty(t, e.jobs)
			}
			return loop.Result{Content: "sent"}, nil
		},
	}
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		if len(req.Messages) == 1 {
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("s1", "send", json.RawMessage(`{}`))}}, StopReason: loop.StopToolUse}, nil
		}
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done")}}, StopReason: loop.StopEndTurn}, nil
	})
	e = newLazyEnv(t, model, send)
	e.worker.Heartbeat = time.Millisecond
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: e.runID}))
	r, err := e.store.Get(ctx, e.runID)
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	r, err = e.store.Decide(ctx, r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	decided = r.UpdatedAt
	e.clock.Advance(30 * time.Second)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: e.runID}))
	r, err = e.store.Get(ctx, e.runID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCompleted, r.Status, "%s", r.Reason)
	assert.Equal(t, 1, applied)
	assert.Equal(t, 18, sweeps)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, string(loop.StepModelTurn), runs.EventSuspended, runs.EventDecision,
		runs.EventResumed, string(loop.StepToolExecuted), string(loop.StepModelTurn), runs.EventSettled}, e.events(t))
}

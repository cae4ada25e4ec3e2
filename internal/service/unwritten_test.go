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

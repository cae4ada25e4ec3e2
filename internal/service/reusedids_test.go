package service_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/service"
)

// TestAReusedCallIDGetsItsFenceCheckpoint: a model may reuse a call id in
// a later turn (the loop keys the call "#N"). After the approved turn's
// call c1 ran, a later turn's unattended idempotent write with the same id
// must still be fenced with the checkpoint that reaches it: the worker
// dies after that write took effect, the run is taken over, and the new
// worker must make the call again under its key (recorded once, effect
// once) rather than go on from the suspended state and ask the model
// again, which would leave the write that took effect unrecorded (the
// worker's set of calls its stored position reaches was keyed by call id:
// reviewer helper-114's F1). With a fresh id (c2) both were right.
func TestAReusedCallIDGetsItsFenceCheckpoint(t *testing.T) {
	for _, second := range []string{"c2", "c1"} {
		t.Run("second turn's id "+second, func(t *testing.T) {
			db, err := embedded.Open(filepath.Join(t.TempDir(), "reused.db"))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			runReusedID(t, db, db, second)
		})
	}
}

func runReusedID(t *testing.T, rows runs.RowStore, states runs.StateStore, secondID string) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	store := runs.NewStore(rows, states, runs.Options{Now: clock.Now, Logger: quiet})
	var err error

	var mu sync.Mutex
	applied := map[string]int{}   // idempotency key -> effects
	recorded := map[string]bool{} // idempotency key -> marker
	crash := true
	modelCalls := 0
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		modelCalls++
		clock.Advance(time.Second)
		n := 0
		for _, m := range req.Messages {
			if m.Role == loop.RoleAssistant {
				n++
			}
		}
		switch {
		case n == 0:
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{
				loop.ToolUseBlock("c1", "write_idem", json.RawMessage(`{"p":"a"}`))}}, StopReason: loop.StopToolUse}, nil
		case n == 1 && modelCalls == 2:
			// First time after the approved turn: an unattended
			// idempotent write.
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{
				loop.ToolUseBlock(secondID, "note_idem", json.RawMessage(`{"p":"b"}`))}}, StopReason: loop.StopToolUse}, nil
		}
		// A model is not deterministic: asked again, it answers.
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done")}}, StopReason: loop.StopEndTurn}, nil
	})
	schema := json.RawMessage(`{"type":"object","properties":{"p":{"type":"string"}},"required":["p"]}`)
	apply := func(ctx context.Context) string {
		mu.Lock()
		defer mu.Unlock()
		key := loop.IdempotencyKey(ctx)
		if recorded[key] {
			return "replayed " + key
		}
		applied[key]++
		recorded[key] = true
		return "written " + key
	}
	tools, err := loop.NewToolbox(
		&loop.FuncTool{Def: loop.Definition{Name: "write_idem", InputSchema: schema, Effect: loop.EffectWrite, Idempotent: true},
			CallFunc: func(ctx context.Context, _ json.RawMessage) (loop.Result, error) {
				return loop.Result{Content: apply(ctx)}, nil
			}},
		&loop.FuncTool{Def: loop.Definition{Name: "note_idem", InputSchema: schema, Effect: loop.EffectWrite, Idempotent: true, NoApproval: true},
			CallFunc: func(ctx context.Context, _ json.RawMessage) (loop.Result, error) {
				res := apply(ctx)
				mu.Lock()
				c := crash
				crash = false
				mu.Unlock()
				if c {
					panic(crashed{}) // the worker dies right after the effect
				}
				return loop.Result{Content: res}, nil
			}},
	)
	require.NoError(t, err)
	var jobs []service.Job
	queue := service.DispatchFunc(func(_ context.Context, j service.Job) error { jobs = append(jobs, j); return nil })
	worker := &service.Worker{
		Store: store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: clock.Now}
		},
		NewToken: func() (string, string, error) {
			raw := runstest.NewToken()
			return raw, runstest.HashToken(raw), nil
		},
		ApprovalTTL: time.Hour, Owner: "w", Dispatch: queue, Logger: quiet, Now: clock.Now,
	}
	sweeper := &service.Sweeper{Store: store, Dispatch: queue, Logger: quiet, Now: clock.Now}
	req, _ := json.Marshal(service.StartRequest{Prompt: "go", Approvers: []string{"bob"}})
	r, err := store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	jobs = append(jobs, service.NewJob(service.JobRun, r))
	handle := func(j service.Job) {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(crashed); !ok {
					panic(v)
				}
			}
		}()
		require.NoError(t, worker.Handle(ctx, j))
	}
	var final *runs.Run
	for i := 0; i < 10 && final == nil; i++ {
		for len(jobs) > 0 {
			j := jobs[0]
			jobs = jobs[1:]
			handle(j)
		}
		cur, err := store.Get(ctx, r.ID)
		require.NoError(t, err)
		switch {
		case cur.Status.Terminal():
			final = cur
		case cur.Status == runs.StatusWaiting:
			next, err := store.Decide(ctx, cur, runs.NewDecision{SuspensionID: cur.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
				Decision: loop.Decision{TurnDigest: cur.TurnDigest, Action: loop.ActionApprove}})
			require.NoError(t, err)
			jobs = append(jobs, service.NewJob(service.JobResume, next))
		default:
			if cur.Status == runs.StatusRunning {
				t.Logf("after the crash: fence %q idempotent=%v checkpoint=%v", cur.PendingEffect, cur.PendingIdempotent, !cur.Checkpoint.IsZero())
			}
			clock.Advance(runs.DefaultLeaseTTL + runs.DefaultDispatchGrace)
			_, err := sweeper.Sweep(ctx)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, final, "the run ends")
	evs, err := store.Events(ctx, r.ID, 0, 1000)
	require.NoError(t, err)
	noteRecorded := false
	for _, ev := range evs {
		if ev.Type == "tool_executed" && strings.Contains(string(ev.Data), `"note_idem"`) {
			noteRecorded = true
		}
	}
	noteApplied := 0
	for k, n := range applied {
		if strings.HasSuffix(k, "/"+secondID) || strings.HasSuffix(k, "/"+secondID+"#1") {
			if !strings.HasSuffix(k, "/c1") || secondID != "c1" {
				noteApplied += n
			}
		}
	}
	t.Logf("status %s/%s, model calls %d, effects %v, note_idem tool_executed recorded: %v", final.Status, final.Reason, modelCalls, applied, noteRecorded)
	require.Equal(t, 1, noteApplied, "the unattended write took effect once")
	assert.True(t, noteRecorded, "a write that took effect is recorded by a tool_executed event (and its result reaches the model)")
}

package service_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
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

// longRun is a 50-iteration run (49 turns with a read each, then the
// answer) on one store, with a worker whose segments last budget by a fake
// clock on which each model call takes a second (0: no budget).
type longRun struct {
	t       *testing.T
	clock   *clocktest.Clock
	store   *runs.Store
	worker  *service.Worker
	sweeper *service.Sweeper
	jobs    []service.Job
	// lose, when set, drops the dispatch with that number (1: the first).
	lose       int
	dispatches int
	final      []loop.Message
	reads      int
	// bigRead, when positive, is how many random bytes (base64) each read
	// returns.
	bigRead int
	// hang, when set, may hold a read until its context ends (it returns
	// true when it did).
	hang func(ctx context.Context, id string) bool
	// handleCtx, when set, gives each job's context (a Lambda's deadline).
	handleCtx func() (context.Context, context.CancelFunc)
}

const longIterations = 50

func newLongRun(t *testing.T, rows runs.RowStore, states runs.StateStore, budget time.Duration) *longRun {
	t.Helper()
	l := &longRun{t: t, clock: clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))}
	l.store = runs.NewStore(rows, states, runs.Options{Now: l.clock.Now, Retention: 48 * time.Hour, Logger: quiet})
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == loop.RoleAssistant {
				n++
			}
		}
		l.clock.Advance(time.Second)
		l.final = req.Messages
		usage := loop.Usage{InputTokens: int64(100 + n), OutputTokens: 10}
		if n == longIterations-1 {
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done after 50")}}, StopReason: loop.StopEndTurn, Usage: usage}, nil
		}
		id := fmt.Sprintf("r%d", n)
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{
			loop.TextBlock(fmt.Sprintf("reading %d", n)),
			loop.ToolUseBlock(id, "read", json.RawMessage(`{"p":"`+id+`"}`)),
		}}, StopReason: loop.StopToolUse, Usage: usage}, nil
	})
	read := &loop.FuncTool{
		Def: loop.Definition{Name: "read", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(ctx context.Context, in json.RawMessage) (loop.Result, error) {
			var p struct{ P string }
			_ = json.Unmarshal(in, &p)
			if l.hang != nil && l.hang(ctx, p.P) {
				return loop.Result{}, ctx.Err()
			}
			l.reads++
			if l.bigRead > 0 {
				raw := make([]byte, l.bigRead)
				_, _ = rand.Read(raw)
				return loop.Result{Content: base64.StdEncoding.EncodeToString(raw)}, nil
			}
			return loop.Result{Content: "content of " + string(in)}, nil
		},
	}
	tools, err := loop.NewToolbox(read)
	require.NoError(t, err)
	dispatch := service.DispatchFunc(func(_ context.Context, j service.Job) error {
		l.dispatches++
		if l.dispatches == l.lose {
			return nil // the job is lost (its worker died before it started)
		}
		l.jobs = append(l.jobs, j)
		return nil
	})
	l.worker = &service.Worker{
		Store: l.store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: l.clock.Now}
		},
		ApprovalTTL: time.Hour, Owner: "w", Dispatch: dispatch, SegmentBudget: budget, Logger: quiet, Now: l.clock.Now,
	}
	l.sweeper = &service.Sweeper{Store: l.store, Dispatch: dispatch, Logger: quiet, Now: l.clock.Now}
	return l
}

// run starts the run and works its jobs, sweeping when none is left, until
// it ends; it returns the run and the number of sweeps it needed.
func (l *longRun) run() (*runs.Run, int) {
	l.t.Helper()
	ctx := context.Background()
	req, _ := json.Marshal(service.StartRequest{Prompt: "read everything", Approvers: []string{"bob"}, MaxIterations: 60})
	r, err := l.store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(l.t, err)
	l.jobs = append(l.jobs, service.Job{Kind: service.JobRun, RunID: r.ID})
	sweeps := 0
	for {
		for len(l.jobs) > 0 {
			j := l.jobs[0]
			l.jobs = l.jobs[1:]
			jctx, cancel := ctx, context.CancelFunc(func() {})
			if l.handleCtx != nil {
				jctx, cancel = l.handleCtx()
			}
			require.NoError(l.t, l.worker.Handle(jctx, j))
			cancel()
		}
		r, err = l.store.Get(ctx, r.ID)
		require.NoError(l.t, err)
		if r.Status.Terminal() {
			return r, sweeps
		}
		sweeps++
		require.LessOrEqual(l.t, sweeps, 2, "the run is stuck %s", r.Status)
		l.clock.Advance(runs.DefaultDispatchGrace)
		_, err = l.sweeper.Sweep(ctx)
		require.NoError(l.t, err)
	}
}

// events counts the run's events by type.
func (l *longRun) events(id string) map[string]int {
	l.t.Helper()
	evs, err := l.store.Events(context.Background(), id, 0, 1000)
	require.NoError(l.t, err)
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Type]++
	}
	return n
}

// testLongRunCrossesSegments is issue #10 item 9: a run that works longer
// than its worker may (a Lambda's timeout) checkpoints and goes on in the
// next segment, as many times as it needs, and ends with the transcript
// and counters of one uninterrupted segment; a next segment whose job was
// lost is dispatched again by the sweep.
func testLongRunCrossesSegments(t *testing.T, newStore crashPointStore) {
	rows, states := newStore(t)
	whole := newLongRun(t, rows, states, 0)
	want, sweeps := whole.run()
	require.Equal(t, runs.StatusCompleted, want.Status)
	require.Zero(t, sweeps)
	require.Equal(t, longIterations, want.Counters.Iterations)
	require.Zero(t, whole.events(want.ID)[runs.EventCheckpointed], "one segment")

	for _, tt := range []struct {
		name   string
		lose   int
		sweeps int
	}{
		{"every next segment dispatched", 0, 0},
		{"the third next segment's job lost", 3, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows, states := newStore(t)
			l := newLongRun(t, rows, states, 7*time.Second)
			l.lose = tt.lose
			got, sweeps := l.run()
			assert.Equal(t, runs.StatusCompleted, got.Status)
			assert.Equal(t, tt.sweeps, sweeps, "sweeps")
			assert.Equal(t, want.Counters, got.Counters, "the same counters")
			assert.Equal(t, want.Output, got.Output)
			assert.Equal(t, whole.final, l.final, "the same transcript")
			assert.Equal(t, longIterations-1, l.reads, "every read ran once")
			ev := l.events(got.ID)
			segments := ev[runs.EventCheckpointed] + 1
			assert.GreaterOrEqual(t, segments, 5, "segments")
			assert.Equal(t, ev[runs.EventCheckpointed], ev[runs.EventContinued], "every checkpoint was continued")
			assert.Equal(t, tt.sweeps, ev[runs.EventRedispatched])
			t.Logf("a %d-iteration run crossed %d segments (%d checkpoints), %d sweep(s)", longIterations, segments, ev[runs.EventCheckpointed], sweeps)
		})
	}
}

func TestLongRunCrossesSegmentsEmbedded(t *testing.T) {
	testLongRunCrossesSegments(t, func(t *testing.T) (runs.RowStore, runs.StateStore) {
		db, err := embedded.Open(filepath.Join(t.TempDir(), "long.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db, db
	})
}

// The run's own budgets still end it: a deadline or an iteration cap is
// budget_exhausted or max_iterations, never a checkpoint.
func TestOwnBudgetsStillEndALongRun(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "b.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	l := newLongRun(t, db, db, 10*time.Second)
	ctx := context.Background()
	req, _ := json.Marshal(service.StartRequest{Prompt: "read everything", Approvers: []string{"bob"}, MaxIterations: 30})
	r, err := l.store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	l.jobs = []service.Job{{Kind: service.JobRun, RunID: r.ID}}
	for len(l.jobs) > 0 {
		j := l.jobs[0]
		l.jobs = l.jobs[1:]
		require.NoError(t, l.worker.Handle(ctx, j))
	}
	r, err = l.store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusFailed, r.Status)
	assert.Equal(t, loop.ReasonMaxIterations, r.Reason)
	assert.Equal(t, 30, r.Counters.Iterations, "the cap counts over every segment")
	assert.Positive(t, l.events(r.ID)[runs.EventCheckpointed])
}

// A model or tool call longer than the lease records no step that would
// renew it: the worker's heartbeat renews it (RenewLease), so the sweep
// does not hand a run that is still being worked on to a second worker.
func TestHeartbeatRenewsTheLeaseDuringALongCall(t *testing.T) {
	testHeartbeat(t, false)
}

// A renewal that fails for a passing reason (a throttle) is tried again at
// the next tick; before, the heartbeat stopped for the rest of the segment
// and the lease lapsed during the call.
func TestHeartbeatOutlivesAFailedRenewal(t *testing.T) {
	testHeartbeat(t, true)
}

func testHeartbeat(t *testing.T, failFirstRenewal bool) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "h.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	rows := &flakyRows{RowStore: db}
	store := runs.NewStore(rows, db, runs.Options{Now: clock.Now, Logger: quiet})
	var swept []service.Job
	sweeper := &service.Sweeper{Store: store, Logger: quiet, Now: clock.Now,
		Dispatch: service.DispatchFunc(func(_ context.Context, j service.Job) error { swept = append(swept, j); return nil })}
	var runID string
	slow := &loop.FuncTool{
		Def: loop.Definition{Name: "slow", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(ctx context.Context, _ json.RawMessage) (loop.Result, error) {
			r, err := store.Get(ctx, runID)
			require.NoError(t, err)
			claimed := r.LeaseUntil
			if failFirstRenewal {
				// A renewal writes the row alone (no events).
				rows.failOnce(func(w runs.Write) bool { return len(w.Events) == 0 })
			}
			// The call takes 3 minutes, longer than the 2-minute lease.
			for range 3 {
				clock.Advance(time.Minute)
				require.Eventually(t, func() bool {
					r, err := store.Get(ctx, runID)
					return err == nil && r.LeaseUntil.After(clock.Now().Add(runs.DefaultLeaseTTL/2))
				}, 10*time.Second, time.Millisecond, "the heartbeat renews the lease")
				sum, err := sweeper.Sweep(ctx)
				require.NoError(t, err)
				assert.Zero(t, sum.Reaped+sum.Interrupted+sum.Redispatched, "the run is not taken from its worker (the heartbeat wrote the claim)")
			}
			r, err = store.Get(ctx, runID)
			require.NoError(t, err)
			assert.True(t, r.LeaseUntil.After(claimed.Add(time.Minute)))
			return loop.Result{Content: "slow ok"}, nil
		},
	}
	tools, err := loop.NewToolbox(slow)
	require.NoError(t, err)
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		if len(req.Messages) == 1 {
			return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("s1", "slow", json.RawMessage(`{}`))}}, StopReason: loop.StopToolUse}, nil
		}
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("done")}}, StopReason: loop.StopEndTurn}, nil
	})
	w := &service.Worker{Store: store, Owner: "w", Logger: quiet, Now: clock.Now, Heartbeat: time.Millisecond,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: clock.Now}
		}}
	req, _ := json.Marshal(service.StartRequest{Prompt: "slowly", Approvers: []string{"bob"}})
	r, err := store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	runID = r.ID
	require.NoError(t, w.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	r, err = store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCompleted, r.Status, "the worker kept the run")
	assert.Empty(t, swept)
	assert.Equal(t, failFirstRenewal, rows.failures() == 1, "the injected failure happened")
}

// testOversizedCheckpoint: a run whose transcript outgrows the blob limit
// (runs.MaxStateSize, compressed) cannot go on in another segment; its
// segment-end checkpoint ends it FAILED/state_too_large, with a detail that
// says what was too big, at once (before: the worker returned an error and
// the run was left RUNNING for the sweep to hand to new workers).
func testOversizedCheckpoint(t *testing.T, newStore crashPointStore) {
	rows, states := newStore(t)
	l := newLongRun(t, rows, states, time.Second)
	l.bigRead = 1 << 20 // 1.33 MiB of base64 a read, hardly compressible
	got, sweeps := l.run()
	assert.Zero(t, sweeps)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonStateTooLarge, got.Reason)
	var out struct{ Reason, Detail string }
	require.NoError(t, json.Unmarshal(got.Output, &out))
	assert.Contains(t, out.Detail, fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	assert.Contains(t, out.Detail, "checkpoint of run "+got.ID)
	assert.Contains(t, out.Detail, "the largest tool result is 1398104 bytes")
	assert.Positive(t, l.events(got.ID)[runs.EventCheckpointed], "earlier segments were checkpointed")
	assert.Less(t, l.reads, longIterations-1, "the run ended early")
	assert.Equal(t, l.reads, got.Counters.ToolCalls, "the counters of the last segment are kept")
}

//agentgate:megabytes
func TestOversizedCheckpointEndsStateTooLargeEmbedded(t *testing.T) {
	testOversizedCheckpoint(t, func(t *testing.T) (runs.RowStore, runs.StateStore) {
		db, err := embedded.Open(filepath.Join(t.TempDir(), "big.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db, db
	})
}

// testReadOutlivingSegments: a read that never finishes in a worker's time
// (the Lambda's deadline) is interrupted at the end of its segment and made
// again as the next segment's first call; when it outlives that whole
// segment too, it ends as an error result the model reads (recorded in the
// reserve before the deadline) and the run completes, instead of going
// from segment to segment for ever or ending internal_error.
func testReadOutlivingSegments(t *testing.T, newStore crashPointStore) {
	rows, states := newStore(t)
	l := newLongRun(t, rows, states, 0)
	l.worker.DeadlineMargin = time.Millisecond
	l.worker.DeadlineReserve = 2 * time.Second
	var hung int
	l.hang = func(ctx context.Context, id string) bool {
		if id != "r3" {
			return false
		}
		hung++
		<-ctx.Done()
		return true
	}
	l.handleCtx = func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 3*time.Second)
	}
	got, sweeps := l.run()
	assert.Zero(t, sweeps)
	assert.Equal(t, runs.StatusCompleted, got.Status)
	// r3 is interrupted in the segment that reaches it, then made again as
	// the next one's first call (once only when a segment happened to end
	// right before it): never a third time. How many segments the run
	// takes depends on how fast the store is (the deadline is real time).
	assert.GreaterOrEqual(t, hung, 1)
	assert.LessOrEqual(t, hung, 2, "r3 is not made again after it had a whole segment")
	var r3 *loop.Block
	for _, m := range l.final {
		for i, b := range m.Content {
			if b.Type == loop.BlockToolResult && b.ToolUseID == "r3" {
				r3 = &m.Content[i]
			}
		}
	}
	require.NotNil(t, r3, "the model got r3's result")
	assert.True(t, r3.IsError)
	assert.Contains(t, r3.Content, "did not finish within the time one worker has")
	assert.Positive(t, l.events(got.ID)[runs.EventCheckpointed])
	assert.Equal(t, longIterations-2, l.reads, "every other read ran once")
}

func TestReadOutlivingSegmentsEmbedded(t *testing.T) {
	testReadOutlivingSegments(t, func(t *testing.T) (runs.RowStore, runs.StateStore) {
		db, err := embedded.Open(filepath.Join(t.TempDir(), "hang.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db, db
	})
}

package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
)

// longScript is n model turns of two reads each, then a final answer.
func longScript(n int) []loop.Message {
	var turns []loop.Message
	for i := range n {
		turns = append(turns, asst(say(fmt.Sprintf("step %d", i)),
			use(fmt.Sprintf("a%d", i), "read_doc", fmt.Sprintf(`{"path":"p%d"}`, i)),
			use(fmt.Sprintf("b%d", i), "read_doc", fmt.Sprintf(`{"path":"q%d"}`, i))))
	}
	return append(turns, asst(say("all done")))
}

// yieldEvery yields once every n questions (each model call and each tool
// call asks).
func yieldEvery(n int) func(context.Context) bool {
	asked := 0
	return func(context.Context) bool {
		asked++
		return asked%n == 0
	}
}

// continueUntilDone runs Continue on each checkpoint, through an encoding
// round trip, until the run ends; it returns the last outcome and how many
// segments it took.
func continueUntilDone(t *testing.T, r *loop.Runner, out loop.Outcome, err error) (loop.Outcome, int) {
	t.Helper()
	segments := 1
	for ; err == nil && out.Kind == loop.OutcomeCheckpoint; segments++ {
		require.Less(t, segments, 1000, "the run never ends")
		b, encErr := out.Checkpoint.Encode()
		require.NoError(t, encErr)
		cp, decErr := loop.DecodeCheckpoint(b)
		require.NoError(t, decErr)
		again, encErr := cp.Encode()
		require.NoError(t, encErr)
		require.Equal(t, string(b), string(again), "a checkpoint encodes stably")
		out, err = r.Continue(context.Background(), cp)
	}
	require.NoError(t, err)
	return out, segments
}

func TestYieldedSegmentsEndLikeOneSegment(t *testing.T) {
	script := longScript(12)
	whole := newRunner(t, scriptModel(script...), &execLog{})
	want, err := whole.Run(context.Background(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.ReasonCompleted, want.Reason)

	for _, every := range []int{1, 2, 3, 7} {
		t.Run(fmt.Sprintf("yield every %d", every), func(t *testing.T) {
			log := &execLog{}
			r := newRunner(t, scriptModel(script...), log)
			r.Hooks.Yield = yieldEvery(every)
			out, err := r.Run(context.Background(), request("go"))
			got, segments := continueUntilDone(t, r, out, err)
			assert.Equal(t, loop.OutcomeFinished, got.Kind)
			assert.Equal(t, loop.ReasonCompleted, got.Reason)
			assert.Equal(t, "all done", got.FinalText)
			assert.Equal(t, want.Transcript, got.Transcript, "the same transcript")
			assert.Equal(t, want.Counters, got.Counters, "the same counters")
			assert.Len(t, log.list(), 24, "every read ran once")
			assert.Greater(t, segments, 5)
			checkTranscript(t, got.Transcript)
		})
	}
}

// A segment that has done nothing never yields, so every segment moves
// the run on.
func TestYieldNeedsProgress(t *testing.T) {
	r := newRunner(t, scriptModel(longScript(3)...), &execLog{})
	r.Hooks.Yield = func(context.Context) bool { return true }
	out, err := r.Run(context.Background(), request("go"))
	got, segments := continueUntilDone(t, r, out, err)
	assert.Equal(t, loop.ReasonCompleted, got.Reason)
	assert.Equal(t, 10, segments, "one model call or one tool call per segment")
}

// A resumed turn yields between its calls; the approved writes run once,
// under the keys they had, and the run ends as an uninterrupted resume.
func TestResumedTurnYieldsBetweenCalls(t *testing.T) {
	wantLog := &execLog{}
	r, st := heldTurn(t, wantLog)
	decision := loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"a","text":"edited"}`)},
		{CallID: "w2", Action: loop.ActionApprove},
	}}
	want, err := r.Resume(context.Background(), st, decision)
	require.NoError(t, err)

	log := &execLog{}
	r, st = heldTurn(t, log)
	r.Hooks.Yield = func(context.Context) bool { return true }
	out, err := r.Resume(context.Background(), st, decision)
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	require.NotNil(t, out.Checkpoint.Turn, "it yielded in the middle of the held turn")
	assert.Len(t, out.Checkpoint.Turn.Results, 1)
	got, _ := continueUntilDone(t, r, out, err)
	assert.Equal(t, want.Transcript, got.Transcript)
	assert.Equal(t, want.Counters, got.Counters)
	assert.Equal(t, wantLog.list(), log.list(), "each call ran once, the edit applied")
	assert.Equal(t, []string{"run-1/susp-1/r1", "run-1/susp-1/w1", "run-1/susp-1/w2"}, log.keys, "the keys of the held turn's suspension")
}

// The fence hooks are given checkpoints: the one before a write continues
// by running that write (same key), the one after it by what follows it
// (the write never runs again).
func TestFenceCheckpoints(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	var before, after = map[string][]byte{}, map[string][]byte{}
	idempotent := map[string]bool{}
	r.Hooks.BeforeEffect = func(_ context.Context, c loop.FencedCall) error {
		b, err := c.Checkpoint.Encode()
		before[c.ID] = b
		idempotent[c.ID] = c.Idempotent
		assert.Equal(t, "run-1/susp-1/"+c.ID, c.Key)
		return err
	}
	r.Hooks.AfterEffect = func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
		b, err := c.Checkpoint.Encode()
		after[c.ID] = b
		return err
	}
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"w1": false, "w2": true}, idempotent, "delete_doc declares itself idempotent")
	r.Hooks = loop.Hooks{}

	cont := func(raw []byte) []string {
		t.Helper()
		cp, err := loop.DecodeCheckpoint(raw)
		require.NoError(t, err)
		log.calls, log.keys = nil, nil
		out, err := r.Continue(context.Background(), cp)
		require.NoError(t, err)
		assert.Equal(t, loop.ReasonCompleted, out.Reason)
		checkTranscript(t, out.Transcript)
		return log.keys
	}
	assert.Equal(t, []string{"run-1/susp-1/w2"}, cont(before["w2"]), "before w2: w2 runs again under its key")
	assert.Equal(t, []string{"run-1/susp-1/w2"}, cont(after["w1"]), "after w1: only w2 runs")
	assert.Empty(t, cont(after["w2"]), "after w2: nothing of the turn runs again")
}

func TestContinueRefusals(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	var cp *loop.Checkpoint
	r.Hooks.AfterEffect = func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
		if cp == nil {
			b, _ := c.Checkpoint.Encode()
			cp, _ = loop.DecodeCheckpoint(b)
		}
		return nil
	}
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.NotNil(t, cp)
	fresh := func() *loop.Checkpoint {
		b, _ := cp.Encode()
		c, err := loop.DecodeCheckpoint(b)
		require.NoError(t, err)
		return c
	}
	log.calls = nil
	tests := []struct {
		name string
		edit func(c *loop.Checkpoint)
		want error
	}{
		{"another version", func(c *loop.Checkpoint) { c.SchemaVersion = 99 }, loop.ErrInvalidCheckpoint},
		{"a turn that is not the transcript's", func(c *loop.Checkpoint) { c.Turn.Calls[2].ID = "w9" }, loop.ErrInvalidCheckpoint},
		{"results of other calls", func(c *loop.Checkpoint) { c.Turn.Results[0].ToolUseID = "w2" }, loop.ErrInvalidCheckpoint},
		{"a call without a decision", func(c *loop.Checkpoint) { c.Turn.Decisions = c.Turn.Decisions[:1] }, loop.ErrInvalidCheckpoint},
		{"a changed tool", func(c *loop.Checkpoint) { c.ToolHashes["delete_doc"] = "0000" }, loop.ErrToolChanged},
		{"no transcript", func(c *loop.Checkpoint) { c.Transcript.Messages = nil }, loop.ErrInvalidCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fresh()
			tt.edit(c)
			_, err := r.Continue(context.Background(), c)
			assert.ErrorIs(t, err, tt.want)
			assert.Empty(t, log.list(), "nothing ran")
		})
	}
	_, err = loop.DecodeCheckpoint([]byte(`{"schema_version":2,"run_id":"run-1"}`))
	assert.ErrorIs(t, err, loop.ErrInvalidCheckpoint, "a suspended state is not a checkpoint")
}

// When the context's deadline (the process's, say a Lambda's timeout)
// passes during a model call, a segment with Yield set checkpoints before
// that call instead of ending the run; the run's own deadline still ends it
// budget_exhausted.
func TestProcessDeadlineYields(t *testing.T) {
	script := longScript(2)
	calls := 0
	base := scriptModel(script...)
	model := loop.ModelFunc(func(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		calls++
		if calls == 2 {
			lapse(ctx) // the process's time runs out during this call
			return loop.ModelResponse{}, ctx.Err()
		}
		return base.Generate(ctx, req)
	})
	r := newRunner(t, model, &execLog{})
	r.Hooks.Yield = func(context.Context) bool { return false }
	out, err := r.Run(lapsingContext(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	assert.Equal(t, 1, out.Checkpoint.Counters.ModelCalls, "the interrupted call is not counted")
	got, _ := continueUntilDone(t, r, out, err)
	assert.Equal(t, loop.ReasonCompleted, got.Reason)
	assert.Equal(t, 3, got.Counters.ModelCalls)

	// The run's own deadline is a budget.
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	r = newRunner(t, scriptModel(script...), &execLog{})
	r.Now = func() time.Time { now = now.Add(time.Minute); return now }
	r.Hooks.Yield = func(context.Context) bool { return false }
	req := request("go")
	req.Options.Deadline = now.Add(2 * time.Minute)
	out, err = r.Run(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeFinished, out.Kind)
	assert.Equal(t, loop.ReasonBudgetExhausted, out.Reason)
}

// A read interrupted by the process deadline runs again in the next segment.
func TestProcessDeadlineDuringAReadYields(t *testing.T) {
	log := &execLog{}
	tools := testTools(t, log, nil)
	slow := &loop.FuncTool{
		Def: loop.Definition{Name: "slow_read", Effect: loop.EffectRead, InputSchema: json.RawMessage(pathSchema)},
		CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
			log.add("slow_read", input, loop.IdempotencyKey(ctx))
			if len(log.list()) == 2 { // s2, the first time
				lapse(ctx)
				return loop.Result{}, ctx.Err()
			}
			return loop.Result{Content: "slow ok"}, nil
		},
	}
	var all []loop.Tool
	for _, n := range tools.Names() {
		tl, _ := tools.Lookup(n)
		all = append(all, tl)
	}
	tb, err := loop.NewToolbox(append(all, slow)...)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(asst(use("s1", "slow_read", `{"path":"a"}`), use("s2", "slow_read", `{"path":"b"}`)), asst(say("ok"))),
		Tools: tb, Now: fixedClock(time.Millisecond), Hooks: loop.Hooks{Yield: func(context.Context) bool { return false }}}
	out, err := r.Run(lapsingContext(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	require.NotNil(t, out.Checkpoint.Turn)
	assert.Len(t, out.Checkpoint.Turn.Results, 1, "s1 is done, s2 is not")
	got, _ := continueUntilDone(t, r, out, err)
	assert.Equal(t, loop.ReasonCompleted, got.Reason)
	b, ok := resultFor(got.Transcript, "s2")
	require.True(t, ok)
	assert.Equal(t, "slow ok", b.Content)
	assert.Equal(t, []string{"run-1/-/s1", "run-1/-/s2", "run-1/-/s2"}, log.keys, "s2 was made again under its key")
}

// A turn with a client call yields between its server calls; the client
// call handled before the yield is still handed over when the turn ends.
func TestYieldInATurnWithAClientCall(t *testing.T) {
	log := &execLog{}
	turn := asst(use("s1", "read_doc", `{"path":"a"}`), use("c1", "lookup_stock", `{"sku":"X-1"}`), use("s2", "read_doc", `{"path":"b"}`))
	r, _ := clientRunner(t, log, turn, asst(say("done")))
	r.Hooks.Yield = func(context.Context) bool { return true }
	out, err := r.Run(context.Background(), request("stock?"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind, "it yields after s1")
	for out.Kind == loop.OutcomeCheckpoint {
		b, err := out.Checkpoint.Encode()
		require.NoError(t, err)
		cp, err := loop.DecodeCheckpoint(b)
		require.NoError(t, err)
		out, err = r.Continue(context.Background(), cp)
		require.NoError(t, err)
	}
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind)
	require.NotNil(t, out.Suspended.HandOver)
	require.Len(t, out.Suspended.HandOver.Calls, 1)
	assert.Equal(t, "c1", out.Suspended.HandOver.Calls[0].ID)
	assert.Len(t, out.Suspended.HandOver.Results, 2, "both server reads have their results")
	assert.Equal(t, []string{`read_doc({"path":"a"})`, `read_doc({"path":"b"})`}, log.list(), "each read ran once")
}

// A read that outlives a whole segment (the first call of the segment that
// continues after the read was interrupted) is not made a third time: it
// ends as an error result the model reads, and the run goes on.
func TestReadOutlivingASegmentIsAnErrorResult(t *testing.T) {
	log := &execLog{}
	slow := &loop.FuncTool{
		Def: loop.Definition{Name: "slow_read", Effect: loop.EffectRead, InputSchema: json.RawMessage(pathSchema)},
		CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
			log.add("slow_read", input, loop.IdempotencyKey(ctx))
			if string(input) == `{"path":"b"}` {
				lapse(ctx) // never finishes in a segment's time
				return loop.Result{}, ctx.Err()
			}
			return loop.Result{Content: "slow ok"}, nil
		},
	}
	tb, err := loop.NewToolbox(slow)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(asst(use("s1", "slow_read", `{"path":"a"}`), use("s2", "slow_read", `{"path":"b"}`)), asst(say("ok"))),
		Tools: tb, Now: fixedClock(time.Millisecond), Hooks: loop.Hooks{Yield: func(context.Context) bool { return false }}}
	out, err := r.Run(lapsingContext(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind, "s2 is interrupted in the first segment")
	out, err = r.Continue(lapsingContext(), out.Checkpoint)
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind, "s2 outlived the second segment too: its result is in, the segment yields")
	assert.Nil(t, out.Checkpoint.Turn, "the turn is done")
	got, _ := continueUntilDone(t, r, out, err)
	assert.Equal(t, loop.ReasonCompleted, got.Reason)
	b, ok := resultFor(got.Transcript, "s2")
	require.True(t, ok)
	assert.True(t, b.IsError)
	assert.Contains(t, b.Content, "did not finish within the time one worker has")
	assert.Equal(t, []string{"run-1/-/s1", "run-1/-/s2", "run-1/-/s2"}, log.keys, "s2 was made twice, not a third time")
	assert.Equal(t, 2, got.Counters.ToolCalls, "the interrupted attempt is not counted; the stopped one is")
}

// A model call that outlives a whole segment (made again as the first call
// of the segment after the one it was interrupted in) ends the run
// provider_failed, not budget_exhausted: the run's own budget is not spent.
func TestModelCallOutlivingASegmentIsProviderFailed(t *testing.T) {
	script := longScript(2)
	calls := 0
	base := scriptModel(script...)
	model := loop.ModelFunc(func(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		calls++
		if calls >= 2 {
			lapse(ctx) // the provider never answers in time
			return loop.ModelResponse{}, ctx.Err()
		}
		return base.Generate(ctx, req)
	})
	r := newRunner(t, model, &execLog{})
	r.Hooks.Yield = func(context.Context) bool { return false }
	out, err := r.Run(lapsingContext(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	out, err = r.Continue(lapsingContext(), out.Checkpoint)
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeFinished, out.Kind)
	assert.Equal(t, loop.ReasonProviderFailed, out.Reason)
	assert.Contains(t, out.Detail, "did not finish within the time one worker has")
}

// lapsingContext returns a new segment context whose deadline passes only
// when the call that outlives it says so (lapse), not after some
// milliseconds: what runs before that call takes as long as it takes on a
// loaded machine, and the loop sees context.DeadlineExceeded exactly during
// the blocked call.
func lapsingContext() context.Context { return clocktest.NewDeadline() }

// lapse makes the deadline of ctx's segment pass (ctx is, or is derived
// from, a lapsingContext) and returns once ctx is done.
func lapse(ctx context.Context) {
	clocktest.PassDeadline(ctx)
	<-ctx.Done()
}

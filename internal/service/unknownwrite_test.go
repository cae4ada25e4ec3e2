package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// appendScript makes an approved write that succeeds (w1), then an approved
// write whose outcome is unknown (a1).
const appendScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"w1","name":"write_note","input":{"text":"hi"}}]},
 {"content":[{"type":"tool_use","id":"a1","name":"t__append","input":{"line":"x"}}]},
 {"content":[{"type":"text","text":"done"}]}]}`

// secretAddress stands for what a transport error may hold and a run's
// readers must never see.
const secretAddress = "https://user:hunter2@mcp.internal.example/mcp"

// TestAWriteWhoseOutcomeIsUnknownIsNamedByTheSettle: a write tool whose
// call fails in a live worker with an outcome it reports unknown (an MCP
// write that timed out) ends the run FAILED/interrupted_write, and the
// settled event names the call (pending_effect) as the sweep's does when a
// worker dies during the same write; output.detail names the call and the
// tool and says why, never the raw error. The worker used to settle with
// "internal error" and no event named the call (found by an outside
// tester).
func TestAWriteWhoseOutcomeIsUnknownIsNamedByTheSettle(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantDetail string
	}{
		{
			name: "the tool reports the outcome unknown",
			err: fmt.Errorf("MCP server t, tool append: %w", &loop.OutcomeUnknownError{
				Cause: "no answer within the call's timeout of 30s: context deadline exceeded",
				Err:   fmt.Errorf("Post %q: %w", secretAddress, context.DeadlineExceeded),
			}),
			wantDetail: "write t__append (call a1) may or may not have taken effect: the tool reported its outcome unknown (no answer within the call's timeout of 30s: context deadline exceeded)",
		},
		{
			name:       "the tool fails without saying whether it wrote",
			err:        fmt.Errorf("put %s: %w", secretAddress, errors.New("connection reset")),
			wantDetail: "write t__append (call a1) may or may not have taken effect: the call failed with an error that does not say whether it took effect (internal error)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			executed := map[string]int{}
			note := &loop.FuncTool{
				Def: loop.Definition{Name: "write_note", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
				CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
					executed["w1"]++
					return loop.Result{Content: "ok"}, nil
				},
			}
			appendTool := &loop.FuncTool{
				Def: loop.Definition{Name: "t__append", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
				CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
					executed["a1"]++ // the server ran the write; its answer never came
					return loop.Result{}, tt.err
				},
			}
			tools, err := loop.NewToolbox(note, appendTool)
			require.NoError(t, err)
			model, err := scripted.Parse([]byte(appendScript))
			require.NoError(t, err)
			e.worker.Runner = func(h loop.Hooks) *loop.Runner {
				return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
			}

			r := e.start(t)
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
			for range 2 { // approve w1, then a1
				w := e.get(t, r.ID)
				require.Equal(t, runs.StatusWaiting, w.Status)
				_, err = e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
					Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
				require.NoError(t, err)
				require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
			}

			got := e.get(t, r.ID)
			require.Equal(t, runs.StatusFailed, got.Status)
			assert.Equal(t, loop.ReasonInterruptedWrite, got.Reason)
			assert.Equal(t, map[string]int{"w1": 1, "a1": 1}, executed, "each write ran once")
			var out struct {
				Reason loop.TerminationReason `json:"reason"`
				Detail string                 `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(got.Output, &out))
			assert.Equal(t, loop.ReasonInterruptedWrite, out.Reason)
			assert.Equal(t, tt.wantDetail, out.Detail)
			assert.NotContains(t, out.Detail, "hunter2", "the raw error stays in the log")
			assert.LessOrEqual(t, len(out.Detail), 503, "the detail is bounded")

			evs, err := e.store.Events(ctx, r.ID, 0, 100)
			require.NoError(t, err)
			require.NotEmpty(t, evs)
			last := evs[len(evs)-1]
			require.Equal(t, runs.EventSettled, last.Type)
			assert.True(t, strings.HasPrefix(last.Actor, "w/"), "the worker settles, not the sweep: %s", last.Actor)
			assert.JSONEq(t, `{"status":"FAILED","reason":"interrupted_write","pending_effect":"a1"}`, string(last.Data),
				"the settle names the write whose outcome is unknown")

			// Every write that ran is named by an event: its tool_executed
			// step, or the event that ended the run naming it in flight.
			named := map[string]bool{}
			var trail []string
			for _, ev := range evs {
				trail = append(trail, ev.Type+" "+string(ev.Data))
				var d struct {
					CallID        string `json:"call_id"`
					PendingEffect string `json:"pending_effect"`
				}
				require.NoError(t, json.Unmarshal(orEmpty(ev.Data), &d))
				if ev.Type == string(loop.StepToolExecuted) && d.CallID != "" {
					named[d.CallID] = true
				}
				if d.PendingEffect != "" {
					named[d.PendingEffect] = true
				}
			}
			for id := range executed {
				assert.True(t, named[id], "no event names the executed write %s: %v", id, trail)
			}
		})
	}
}

// TestAWriteThatOutlivesTheWorkersTimeSaysSo (outside tester helper-113
// P3): an approved write, the first call of its resume segment, that does
// not return before the worker's time runs out (the Lambda's deadline,
// less the reserve) ends the run interrupted_write, as before (a write is
// never made twice by a segment that cannot tell whether it took effect,
// and a call that had a whole segment's time is not handed to the next);
// the detail said "(internal error)" though the cause was the worker's
// deadline. Now it says so, for an idempotent write and a plain one.
func TestAWriteThatOutlivesTheWorkersTimeSaysSo(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			calls := 0
			appendTool := &loop.FuncTool{
				Def: loop.Definition{Name: "t__append", Effect: loop.EffectWrite, Idempotent: idempotent, InputSchema: json.RawMessage(`{"type":"object"}`)},
				CallFunc: func(ctx context.Context, _ json.RawMessage) (loop.Result, error) {
					calls++
					<-ctx.Done() // the server never answers in time
					return loop.Result{}, fmt.Errorf("post: %w", ctx.Err())
				},
			}
			tools, err := loop.NewToolbox(appendTool)
			require.NoError(t, err)
			model, err := scripted.Parse([]byte(`{"turns":[
 {"content":[{"type":"tool_use","id":"a1","name":"t__append","input":{"line":"x"}}]},
 {"content":[{"type":"text","text":"done"}]}]}`))
			require.NoError(t, err)
			e.worker.Runner = func(h loop.Hooks) *loop.Runner {
				return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
			}
			e.worker.DeadlineReserve = 2 * time.Second

			r := e.start(t)
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
			w := e.get(t, r.ID)
			require.Equal(t, runs.StatusWaiting, w.Status)
			_, err = e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
				Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
			require.NoError(t, err)
			// The resume worker's time: its loop's calls end a second in.
			jobCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			require.NoError(t, e.worker.Handle(jobCtx, service.Job{Kind: service.JobResume, RunID: r.ID}))

			got := e.get(t, r.ID)
			require.Equal(t, runs.StatusFailed, got.Status)
			assert.Equal(t, loop.ReasonInterruptedWrite, got.Reason, "the at-most-once rule is as it was")
			assert.Equal(t, 1, calls)
			var out struct {
				Detail string `json:"detail"`
			}
			require.NoError(t, json.Unmarshal(got.Output, &out))
			assert.Equal(t, "write t__append (call a1) may or may not have taken effect: the call did not return before the worker's time ran out (the function's deadline, less the reserve kept to record the run)", out.Detail)
			assert.NotContains(t, out.Detail, "internal error")
		})
	}
}

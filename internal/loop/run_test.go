package loop_test

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
)

func TestRunCompletesWithoutTools(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(say("hello"))), log)
	out, err := r.Run(context.Background(), request("hi"))
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeFinished, out.Kind)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, "hello", out.FinalText)
	assert.Equal(t, loop.Counters{Iterations: 1, ModelCalls: 1, InputTokens: 100, OutputTokens: 10}, out.Counters)
	assert.Empty(t, log.list())
}

func TestRunTurnCheck(t *testing.T) {
	tests := []struct {
		name        string
		turn        loop.Message
		wantSuspend bool
		// wantApproval lists the call ids marked as needing approval.
		wantApproval []string
		// wantRejected lists the call ids rejected before running.
		wantRejected []string
		wantExec     []string
	}{
		{name: "read only runs", turn: asst(use("r1", "read_doc", `{"path":"a"}`), use("r2", "read_doc", `{"path":"b"}`)),
			wantExec: []string{`read_doc({"path":"a"})`, `read_doc({"path":"b"})`}},
		{name: "write holds the whole turn", turn: asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)),
			wantSuspend: true, wantApproval: []string{"w1"}},
		{name: "write first, read after, still nothing runs", turn: asst(use("w1", "write_doc", `{"path":"a","text":"x"}`), use("r1", "read_doc", `{"path":"a"}`)),
			wantSuspend: true, wantApproval: []string{"w1"}},
		{name: "approval marker on a read tool", turn: asst(use("f1", "flagged_read", `{"path":"a"}`)),
			wantSuspend: true, wantApproval: []string{"f1"}},
		{name: "argument policy triggers", turn: asst(use("g1", "guarded_read", `{"path":"/secret/x"}`)),
			wantSuspend: true, wantApproval: []string{"g1"}},
		{name: "argument policy passes", turn: asst(use("g1", "guarded_read", `{"path":"/public/x"}`)),
			wantExec: []string{`guarded_read({"path":"/public/x"})`}},
		{name: "unknown tool never executes", turn: asst(use("u1", "rm_rf", `{}`), use("r1", "read_doc", `{"path":"a"}`)),
			wantExec: []string{`read_doc({"path":"a"})`}},
		{name: "invalid input is rejected, not executed", turn: asst(use("r1", "read_doc", `{"path":""}`)),
			wantExec: nil},
		{name: "unknown tool beside a write is held with the turn", turn: asst(use("u1", "rm_rf", `{}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)),
			wantSuspend: true, wantApproval: []string{"w1"}, wantRejected: []string{"u1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r := newRunner(t, scriptModel(tt.turn, asst(say("done"))), log)
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			assert.Equal(t, tt.wantExec, log.list(), "executed calls")
			if !tt.wantSuspend {
				assert.Equal(t, loop.ReasonCompleted, out.Reason)
				checkTranscript(t, out.Transcript)
				return
			}
			require.Equal(t, loop.OutcomeSuspended, out.Kind)
			st := out.Suspended
			require.NotNil(t, st)
			var approval, rejected []string
			for _, c := range st.PendingCalls {
				if c.NeedsApproval {
					approval = append(approval, c.ID)
				}
				if c.Rejected != "" {
					rejected = append(rejected, c.ID)
				}
			}
			assert.Equal(t, tt.wantApproval, approval)
			assert.Equal(t, tt.wantRejected, rejected)
			assert.Len(t, st.PendingCalls, len(tt.turn.ToolUses()))
			last := st.Transcript.Messages[len(st.Transcript.Messages)-1]
			assert.Equal(t, loop.RoleAssistant, last.Role, "state transcript ends with the held turn")
			want, err := loop.TurnDigest(st.RunID, st.SuspensionID, st.PendingCalls)
			require.NoError(t, err)
			assert.Equal(t, want, st.TurnDigest)
			assert.Equal(t, loop.SchemaVersion, st.SchemaVersion)
			assert.Equal(t, "susp-1", st.SuspensionID)
		})
	}
}

func TestRunRejectsUnknownAndDisallowedTools(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("u1", "nope", `{}`), use("d1", "delete_doc", `{"path":"a"}`)), asst(say("ok"))), log)
	var steps []loop.Step
	r.Hooks.OnStep = func(_ context.Context, st loop.Step) error { steps = append(steps, st); return nil }
	req := request("go")
	req.Options.AllowedTools = []string{"read_doc"}
	out, err := r.Run(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason, "disallowed write is rejected like an unknown tool, not held")
	assert.Empty(t, log.list())
	for _, id := range []string{"u1", "d1"} {
		res, ok := resultFor(out.Transcript, id)
		require.True(t, ok)
		assert.True(t, res.IsError)
		assert.Contains(t, res.Content, "unknown tool")
	}
	// The trail: not run, why, and no decision that nobody made.
	var rejected []loop.Step
	for _, st := range steps {
		if st.Kind == loop.StepToolExecuted {
			rejected = append(rejected, st)
		}
	}
	require.Len(t, rejected, 2)
	for _, st := range rejected {
		assert.True(t, st.IsError, "%+v", st)
		assert.Empty(t, st.Action, "no decision was made on %s", st.CallID)
		assert.Contains(t, st.Detail, "not run: ")
		assert.Contains(t, st.Detail, "unknown tool")
	}
}

func TestRunRejectsBadRequests(t *testing.T) {
	r := newRunner(t, scriptModel(), &execLog{})
	tests := []struct {
		name string
		req  loop.Request
	}{
		{"no run id", loop.Request{Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText("x")}}}},
		{"empty transcript", loop.Request{RunID: "r"}},
		{"ends with assistant", loop.Request{RunID: "r", Transcript: loop.Transcript{Messages: []loop.Message{asst(say("x"))}}}},
		{"bad block", loop.Request{RunID: "r", Transcript: loop.Transcript{Messages: []loop.Message{{Role: loop.RoleUser, Content: []loop.Block{{Type: "image"}}}}}}},
		{"unknown allowed tool", loop.Request{RunID: "r", Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText("x")}}, Options: loop.Options{AllowedTools: []string{"ghost"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), tt.req)
			assert.ErrorIs(t, err, loop.ErrInvalidRequest)
		})
	}
}

// heldTurn suspends a run on [read r1, write w1, write w2] and returns the runner and state.
func heldTurn(t *testing.T, log *execLog, after ...loop.Message) (*loop.Runner, *loop.SuspendedState) {
	t.Helper()
	turns := append([]loop.Message{asst(say("let me"),
		use("r1", "read_doc", `{"path":"a"}`),
		use("w1", "write_doc", `{"path":"a","text":"one"}`),
		use("w2", "delete_doc", `{"path":"b"}`))}, after...)
	if len(after) == 0 {
		turns = append(turns, asst(say("finished")))
	}
	r := newRunner(t, scriptModel(turns...), log)
	out, err := r.Run(context.Background(), request("edit the docs"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	require.Empty(t, log.list(), "nothing runs before the decision")
	return r, out.Suspended
}

func TestResumeDecisions(t *testing.T) {
	tests := []struct {
		name     string
		decision func(digest string) loop.Decision
		wantExec []string
		// wantResult maps call ids to a substring of their result and whether it is an error.
		wantResult map[string]string
		wantError  map[string]bool
	}{
		{
			name:       "approve all",
			decision:   func(d string) loop.Decision { return loop.Decision{TurnDigest: d, Action: loop.ActionApprove} },
			wantExec:   []string{`read_doc({"path":"a"})`, `write_doc({"path":"a","text":"one"})`, `delete_doc({"path":"b"})`},
			wantResult: map[string]string{"r1": "read_doc ok", "w1": "write_doc ok", "w2": "delete_doc ok"},
		},
		{
			name: "deny all with message runs nothing of the turn",
			decision: func(d string) loop.Decision {
				return loop.Decision{TurnDigest: d, Action: loop.ActionDeny, Message: "not today"}
			},
			wantExec:   nil,
			wantResult: map[string]string{"r1": "not today", "w1": `tool "write_doc" was denied by the approver: not today`, "w2": "not today"},
			wantError:  map[string]bool{"r1": true, "w1": true, "w2": true},
		},
		{
			name: "per call approve and deny; read sibling runs",
			decision: func(d string) loop.Decision {
				return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{
					{CallID: "w1", Action: loop.ActionApprove},
					{CallID: "w2", Action: loop.ActionDeny, Message: "keep b"},
				}}
			},
			wantExec:   []string{`read_doc({"path":"a"})`, `write_doc({"path":"a","text":"one"})`},
			wantResult: map[string]string{"r1": "read_doc ok", "w1": "write_doc ok", "w2": "keep b"},
			wantError:  map[string]bool{"w2": true},
		},
		{
			name: "edit runs the edited input and tells the model",
			decision: func(d string) loop.Decision {
				return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{
					{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"text":"two", "path":"a"}`)},
					{CallID: "w2", Action: loop.ActionApprove},
				}}
			},
			wantExec:   []string{`read_doc({"path":"a"})`, `write_doc({"path":"a","text":"two"})`, `delete_doc({"path":"b"})`},
			wantResult: map[string]string{"w1": `edited the arguments of this call before it ran; it ran with {"path":"a","text":"two"}`},
		},
		{
			name: "read sibling may be denied too",
			decision: func(d string) loop.Decision {
				return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{
					{CallID: "r1", Action: loop.ActionDeny},
					{CallID: "w1", Action: loop.ActionApprove},
					{CallID: "w2", Action: loop.ActionApprove},
				}}
			},
			wantExec:   []string{`write_doc({"path":"a","text":"one"})`, `delete_doc({"path":"b"})`},
			wantResult: map[string]string{"r1": `tool "read_doc" was denied by the approver.`},
			wantError:  map[string]bool{"r1": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r, st := heldTurn(t, log)
			out, err := r.Resume(context.Background(), st, tt.decision(st.TurnDigest))
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonCompleted, out.Reason)
			assert.Equal(t, "finished", out.FinalText)
			assert.Equal(t, tt.wantExec, log.list())
			checkTranscript(t, out.Transcript)
			for id, want := range tt.wantResult {
				res, ok := resultFor(out.Transcript, id)
				require.True(t, ok, "result for %s", id)
				assert.Contains(t, res.Content, want, "result of %s", id)
				assert.Equal(t, tt.wantError[id], res.IsError, "is_error of %s", id)
			}
			assert.Equal(t, 2, out.Counters.Iterations, "pre-suspend counters are folded in")
			assert.Equal(t, int64(200), out.Counters.InputTokens)
			assert.Equal(t, len(tt.wantExec), out.Counters.ToolCalls)
			require.NotEmpty(t, out.Trace)
			assert.Equal(t, loop.StepResumed, out.Trace[0].Kind)
		})
	}
}

func TestResumeAuditsEdits(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"a","text":"two"}`)},
		{CallID: "w2", Action: loop.ActionDeny},
	}})
	require.NoError(t, err)
	var edited, denied bool
	for _, s := range out.Trace {
		if s.Kind == loop.StepToolExecuted && s.CallID == "w1" {
			edited = true
			assert.Equal(t, loop.ActionEdit, s.Action)
			assert.JSONEq(t, `{"path":"a","text":"one"}`, string(s.OriginalInput))
			assert.JSONEq(t, `{"path":"a","text":"two"}`, string(s.EditedInput))
		}
		if s.Kind == loop.StepToolDenied && s.CallID == "w2" {
			denied = true
		}
	}
	assert.True(t, edited, "edit step with both inputs")
	assert.True(t, denied, "denial step")
}

func TestResumeRefusals(t *testing.T) {
	editW1 := func(in string) loop.CallDecision {
		return loop.CallDecision{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(in)}
	}
	approveW2 := loop.CallDecision{CallID: "w2", Action: loop.ActionApprove}
	tests := []struct {
		name     string
		mutate   func(st *loop.SuspendedState)
		tools    map[string]string // schema overrides for the resuming toolbox
		decision func(digest string) loop.Decision
		want     error
	}{
		{name: "stale digest", decision: func(string) loop.Decision {
			return loop.Decision{TurnDigest: strings.Repeat("0", 64), Action: loop.ActionApprove}
		}, want: loop.ErrDigestMismatch},
		{name: "unknown schema version", mutate: func(st *loop.SuspendedState) { st.SchemaVersion = 99 }, want: loop.ErrSchemaVersion},
		{name: "tool schema changed", tools: map[string]string{"write_doc": `{"type":"object"}`}, want: loop.ErrToolChanged},
		{name: "tampered pending calls", mutate: func(st *loop.SuspendedState) {
			st.PendingCalls[1].Input = json.RawMessage(`{"path":"z","text":"evil"}`)
		}, want: loop.ErrInvalidDecision},
		{name: "invalid edit", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{editW1(`{"path":"a"}`), approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "edit with extra field", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{editW1(`{"path":"a","text":"x","mode":"force"}`), approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "edit that is not JSON", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{editW1(`{"path":`), approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "call not pending", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{{CallID: "zz", Action: loop.ActionApprove}, approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "approval call left undecided", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "decided twice", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{approveW2, approveW2, {CallID: "w1", Action: loop.ActionApprove}}}
		}, want: loop.ErrInvalidDecision},
		{name: "turn action and calls", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Action: loop.ActionApprove, Calls: []loop.CallDecision{approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "empty decision", decision: func(d string) loop.Decision { return loop.Decision{TurnDigest: d} }, want: loop.ErrInvalidDecision},
		{name: "edit as turn action", decision: func(d string) loop.Decision { return loop.Decision{TurnDigest: d, Action: loop.ActionEdit} }, want: loop.ErrInvalidDecision},
		{name: "unknown call action", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{{CallID: "w1", Action: "maybe"}, approveW2}}
		}, want: loop.ErrInvalidDecision},
		{name: "input with approve", decision: func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove, Input: json.RawMessage(`{}`)}, approveW2}}
		}, want: loop.ErrInvalidDecision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r, st := heldTurn(t, log)
			if tt.mutate != nil {
				tt.mutate(st)
			}
			if tt.tools != nil {
				r.Tools = testTools(t, log, tt.tools)
			}
			d := loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove}
			if tt.decision != nil {
				d = tt.decision(st.TurnDigest)
			}
			out, err := r.Resume(context.Background(), st, d)
			require.ErrorIs(t, err, tt.want)
			assert.Empty(t, log.list(), "nothing runs on a refused decision")
			assert.Empty(t, out.Trace)
		})
	}
}

func TestResumeToleratesRewordedDescription(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	// Same tools, new descriptions: the definition hash ignores descriptions.
	var tools []loop.Tool
	for _, name := range r.Tools.Names() {
		tl, _ := r.Tools.Lookup(name)
		ft := *tl.(*loop.FuncTool)
		ft.Def.Description = "reworded: " + ft.Def.Description
		tools = append(tools, &ft)
	}
	tb, err := loop.NewToolbox(tools...)
	require.NoError(t, err)
	r.Tools = tb
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
}

func TestResumeSuspendsAgain(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log,
		asst(use("w3", "write_doc", `{"path":"c","text":"three"}`)),
		asst(say("all done")))
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st2 := out.Suspended
	assert.NotEqual(t, st.SuspensionID, st2.SuspensionID)
	assert.NotEqual(t, st.TurnDigest, st2.TurnDigest)
	assert.Equal(t, 2, st2.Counters.Iterations)
	assert.Len(t, log.list(), 3)

	out, err = r.Resume(context.Background(), st2, loop.Decision{TurnDigest: st2.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, "all done", out.FinalText)
	assert.Equal(t, 3, out.Counters.Iterations)
	assert.Equal(t, 4, out.Counters.ToolCalls, "3 calls in the first segment's resume, 1 in the second")
	checkTranscript(t, out.Transcript)

	// The first state can never be resumed with the second digest.
	_, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st2.TurnDigest, Action: loop.ActionApprove})
	assert.ErrorIs(t, err, loop.ErrDigestMismatch)
}

func TestDenialEndsRunWhenPolicySaysSo(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"x"}`)), asst(say("never reached"))), log)
	req := request("go")
	req.Options.DenialEndsRun = true
	out, err := r.Run(context.Background(), req)
	require.NoError(t, err)
	out, err = r.Resume(context.Background(), out.Suspended, loop.Decision{TurnDigest: out.Suspended.TurnDigest, Action: loop.ActionDeny, Message: "no"})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonApprovalDenied, out.Reason)
	assert.Empty(t, log.list())
	assert.Equal(t, 1, out.Counters.ModelCalls, "the model is not called again")
	checkTranscript(t, out.Transcript)
}

func TestIdempotencyKeys(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, []string{"run-1/susp-1/r1", "run-1/susp-1/w1", "run-1/susp-1/w2"}, log.keys)

	log2 := &execLog{}
	r2 := newRunner(t, scriptModel(asst(use("r9", "read_doc", `{"path":"a"}`)), asst(say("ok"))), log2)
	_, err = r2.Run(context.Background(), request("go"))
	require.NoError(t, err)
	assert.Equal(t, []string{"run-1/-/r9"}, log2.keys, "before any suspension the segment is -")
}

func TestHooksFenceWrites(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	var events []string
	r.Hooks = loop.Hooks{
		BeforeEffect: func(_ context.Context, c loop.FencedCall) error {
			events = append(events, "stamp "+c.ID)
			return nil
		},
		AfterEffect: func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
			events = append(events, "clear "+c.ID)
			return nil
		},
		OnStep: func(_ context.Context, s loop.Step) error {
			events = append(events, string(s.Kind)+" "+s.CallID)
			return nil
		},
	}
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"resumed ",
		"tool_executed r1",
		"stamp w1", "clear w1", "tool_executed w1",
		"stamp w2", "clear w2", "tool_executed w2",
		"model_turn ", "finished ",
	}, events)
}

func TestFenceFailureStopsTheWrite(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	r.Hooks.BeforeEffect = func(context.Context, loop.FencedCall) error { return errors.New("lease lost") }
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lease lost")
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list(), "the write did not run")
}

func TestToolInfrastructureErrorStopsTheRun(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("b1", "broken", `{"path":"a"}`), use("r1", "read_doc", `{"path":"a"}`)), asst(say("x"))), log)
	out, err := r.Run(context.Background(), request("go"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "backend unreachable")
	assert.Empty(t, log.list(), "the sibling after the failure did not run")
	checkTranscript(t, out.Transcript)
}

func TestBudgets(t *testing.T) {
	readForever := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{
			Message: asst(use(fmt.Sprintf("r%d", len(req.Messages)), "read_doc", `{"path":"a"}`)),
			Usage:   loop.Usage{InputTokens: 40, OutputTokens: 10},
		}, nil
	})
	failing := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, errors.New("anthropic: 400 invalid_request_error: bad tools")
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		model      loop.Model
		ctx        context.Context
		opts       loop.Options
		clockStep  time.Duration
		want       loop.TerminationReason
		wantDetail string
		wantCalls  int
	}{
		{name: "max iterations", model: readForever, opts: loop.Options{MaxIterations: 3}, want: loop.ReasonMaxIterations, wantCalls: 3},
		{name: "default max iterations", model: readForever, want: loop.ReasonMaxIterations, wantCalls: loop.DefaultMaxIterations},
		{name: "token budget", model: readForever, opts: loop.Options{MaxTokens: 120}, want: loop.ReasonBudgetExhausted, wantCalls: 3},
		{name: "deadline", model: readForever, opts: loop.Options{Deadline: time.Date(2026, 12, 2, 12, 0, 1, 0, time.UTC)}, clockStep: 100 * time.Millisecond, want: loop.ReasonBudgetExhausted},
		{name: "provider failure", model: failing, want: loop.ReasonProviderFailed, wantDetail: "bad tools"},
		{name: "cancelled", model: readForever, ctx: cancelled, want: loop.ReasonCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			step := tt.clockStep
			if step == 0 {
				step = time.Millisecond
			}
			r := &loop.Runner{Model: tt.model, Tools: testTools(t, &execLog{}, nil), Now: fixedClock(step)}
			req := request("go")
			req.Options = tt.opts
			out, err := r.Run(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, out.Reason)
			assert.Contains(t, out.Detail, tt.wantDetail)
			if tt.wantCalls > 0 {
				assert.Equal(t, tt.wantCalls, out.Counters.ModelCalls)
			}
			checkTranscript(t, out.Transcript)
			last := out.Trace[len(out.Trace)-1]
			assert.Equal(t, loop.StepFinished, last.Kind)
			assert.Equal(t, tt.want, last.Reason)
		})
	}
}

func TestInvalidModelTurnsFailTheProvider(t *testing.T) {
	tests := []struct {
		name string
		turn loop.Message
	}{
		{"duplicate ids", asst(use("x", "read_doc", `{"path":"a"}`), use("x", "read_doc", `{"path":"b"}`))},
		{"tool result in assistant turn", asst(loop.ToolResultBlock("x", loop.Result{Content: "hi"}))},
		{"tool use without id", asst(loop.Block{Type: loop.BlockToolUse, Name: "read_doc"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r := newRunner(t, scriptModel(tt.turn), log)
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonProviderFailed, out.Reason)
			assert.Empty(t, log.list())
		})
	}
}

func TestPreviewsAreCapturedForApprovalCalls(t *testing.T) {
	_, st := heldTurn(t, &execLog{})
	assert.Equal(t, map[string]string{"w1": "--- a\n+++ a\n+one"}, st.Previews)
	assert.Len(t, st.ToolHashes, 3)
}

func TestValidateDecisionMatchesResume(t *testing.T) {
	_, st := heldTurn(t, &execLog{})
	tools := testTools(t, &execLog{}, nil)
	assert.NoError(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionDeny}))
	assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: "x", Action: loop.ActionDeny}), loop.ErrDigestMismatch)
	// A malformed decision is that, whatever turn it names.
	assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: "x", Action: "maybe"}), loop.ErrInvalidDecision)
	assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: "x", Action: loop.ActionDeny,
		Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionDeny}}}), loop.ErrInvalidDecision)
	for _, cd := range [][]loop.CallDecision{
		{{CallID: "w1", Action: "maybe"}},
		{{CallID: "w1", Action: loop.ActionApprove, Input: json.RawMessage(`{}`)}},
		{{CallID: "w1", Action: loop.ActionEdit}},
		{{CallID: "w1", Action: loop.ActionDeny, Remember: loop.RememberRun}},
		{{CallID: "w1", Action: loop.ActionApprove, Remember: "forever"}},
		{{CallID: "w1", Action: loop.ActionApprove}, {CallID: "w1", Action: loop.ActionDeny}},
	} {
		assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: "x", Calls: cd}), loop.ErrInvalidDecision, "%+v", cd)
	}
	assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: "x", Message: "m",
		Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionDeny}}}), loop.ErrInvalidDecision)
	assert.ErrorIs(t, loop.ValidateDecision(t.Context(), tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}}}), loop.ErrInvalidDecision)
}

func TestTruncatedOrRefusedTurnsRunNoCalls(t *testing.T) {
	for _, stop := range []loop.StopReason{loop.StopMaxTokens, loop.StopRefusal} {
		t.Run(string(stop), func(t *testing.T) {
			log := &execLog{}
			n := 0
			model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
				n++
				if n == 1 {
					return loop.ModelResponse{Message: asst(use("r1", "read_doc", `{"path":"a"}`), use("w1", "write_doc", `{"path":"a","text":"x"}`)), StopReason: stop}, nil
				}
				return loop.ModelResponse{Message: asst(say("ok")), StopReason: loop.StopEndTurn}, nil
			})
			r := newRunner(t, model, log)
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonCompleted, out.Reason)
			assert.Empty(t, log.list(), "no call of the cut-off turn ran, and nothing was held for approval")
			res, ok := resultFor(out.Transcript, "w1")
			require.True(t, ok)
			assert.True(t, res.IsError)
			assert.Contains(t, res.Content, string(stop))
			checkTranscript(t, out.Transcript)
		})
	}
}

// TestHeldCallWithInvalidInputSaysItWillFail: a write whose input its
// schema refuses is held with the turn (an approver may fix it by an edit),
// and its preview says it fails as it is and why, instead of being empty.
func TestHeldCallWithInvalidInputSaysItWillFail(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":5}`)), asst(say("done"))), log)
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	require.Len(t, st.PendingCalls, 1)
	require.NotEmpty(t, st.PendingCalls[0].Rejected)
	assert.True(t, st.PendingCalls[0].NeedsApproval)
	assert.True(t, strings.HasPrefix(st.Previews["w1"], "this call will fail as it is: "), "preview: %q", st.Previews["w1"])
	assert.Contains(t, st.Previews["w1"], st.PendingCalls[0].Rejected)
	assert.Empty(t, log.list())
}

// TestStepsCarryTheRunningTotals: each step gives the hook the segment's
// totals with the step itself counted, so a store that writes the steps
// before the segment ends (a cancel may end it) shows what they did.
func TestStepsCarryTheRunningTotals(t *testing.T) {
	log := &execLog{}
	r, st := heldTurn(t, log)
	var got []string
	r.Hooks = loop.Hooks{OnStep: func(_ context.Context, s loop.Step) error {
		require.NotNil(t, s.Counters, "%s step", s.Kind)
		got = append(got, fmt.Sprintf("%s %s tools=%d models=%d", s.Kind, s.CallID, s.Counters.ToolCalls, s.Counters.ModelCalls))
		return nil
	}}
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	models := st.Counters.ModelCalls
	assert.Equal(t, []string{
		fmt.Sprintf("resumed  tools=%d models=%d", 0, models),
		fmt.Sprintf("tool_executed r1 tools=%d models=%d", 1, models),
		fmt.Sprintf("tool_executed w1 tools=%d models=%d", 2, models),
		fmt.Sprintf("tool_executed w2 tools=%d models=%d", 3, models),
		fmt.Sprintf("model_turn  tools=%d models=%d", 3, models+1),
		fmt.Sprintf("finished  tools=%d models=%d", 3, models+1),
	}, got)
}

// TestACallThatCannotRunHasAnActionOnlyWhenDecided: on resume, the
// tool_executed step of a held turn's call that could not run names an
// action only when a decision was made on it: a held call whose input its
// schema refuses was approved, an unknown tool's call (which needs no
// approval) was not, whether the decision went call by call and left it
// out or decided the whole turn.
func TestACallThatCannotRunHasAnActionOnlyWhenDecided(t *testing.T) {
	turn := asst(use("w1", "write_doc", `{"path":"a","text":"x"}`), use("u1", "rm_rf", `{}`), use("w2", "write_doc", `{"path":"","text":"x"}`))
	for _, tt := range []struct {
		name     string
		decision func(digest string) loop.Decision
	}{
		{"per call, the unknown one left out", func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}, {CallID: "w2", Action: loop.ActionApprove}}}
		}},
		{"per call, the unknown one approved too", func(d string) loop.Decision {
			return loop.Decision{TurnDigest: d, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}, {CallID: "u1", Action: loop.ActionApprove}, {CallID: "w2", Action: loop.ActionApprove}}}
		}},
		{"the whole turn", func(d string) loop.Decision { return loop.Decision{TurnDigest: d, Action: loop.ActionApprove} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r := newRunner(t, scriptModel(turn, asst(say("done"))), log)
			out, err := r.Run(context.Background(), request("go"))
			require.NoError(t, err)
			require.NotNil(t, out.Suspended)
			var steps []loop.Step
			r.Hooks.OnStep = func(_ context.Context, st loop.Step) error { steps = append(steps, st); return nil }
			out, err = r.Resume(context.Background(), out.Suspended, tt.decision(out.Suspended.TurnDigest))
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonCompleted, out.Reason)
			executed := map[string]loop.Step{}
			for _, st := range steps {
				if st.Kind == loop.StepToolExecuted {
					executed[st.CallID] = st
				}
			}
			require.Len(t, executed, 3)
			assert.Equal(t, loop.ActionApprove, executed["w1"].Action, "w1 ran, approved")
			assert.Empty(t, executed["w1"].Detail)
			assert.Contains(t, executed["u1"].Detail, "not run: ")
			assert.Empty(t, executed["u1"].Action, "nobody decided on the unknown tool's call")
			assert.Contains(t, executed["w2"].Detail, "not run: ")
			assert.Equal(t, loop.ActionApprove, executed["w2"].Action, "w2 was held and approved; its input could not run")
		})
	}
}

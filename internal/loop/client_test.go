package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

const lookupSchema = `{"type":"object","properties":{"sku":{"type":"string","minLength":1}},"required":["sku"],"additionalProperties":false}`
const orderSchema = `{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"],"additionalProperties":false}`

// clientTools are a caller's two tools: a read and a write.
func clientTools() []loop.Tool {
	return []loop.Tool{
		loop.NewClientTool(loop.Definition{Name: "lookup_stock", Description: "the caller's stock", InputSchema: json.RawMessage(lookupSchema), Effect: loop.EffectRead}),
		loop.NewClientTool(loop.Definition{Name: "place_order", Description: "the caller's orders", InputSchema: json.RawMessage(orderSchema), Effect: loop.EffectWrite}),
	}
}

// recordingModel is scriptModel that also keeps every request's messages.
type recordingModel struct {
	mu    sync.Mutex
	inner loop.Model
	reqs  [][]loop.Message
}

func (m *recordingModel) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, append([]loop.Message(nil), req.Messages...))
	m.mu.Unlock()
	return m.inner.Generate(ctx, req)
}

func (m *recordingModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// resultsSeen counts, in the last request, the tool_results per call id.
func (m *recordingModel) resultsSeen() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	if len(m.reqs) == 0 {
		return out
	}
	for _, msg := range m.reqs[len(m.reqs)-1] {
		for _, b := range msg.Content {
			if b.Type == loop.BlockToolResult {
				out[b.ToolUseID]++
			}
		}
	}
	return out
}

func clientRunner(t *testing.T, log *execLog, turns ...loop.Message) (*loop.Runner, *recordingModel) {
	t.Helper()
	m := &recordingModel{inner: scriptModel(turns...)}
	r := newRunner(t, m, log)
	tb, err := r.Tools.With(clientTools()...)
	require.NoError(t, err)
	r.Tools = tb
	return r, m
}

// mixedTurn is the turn: a server read, a client read and a client
// write that needs approval.
func mixedTurn() loop.Message {
	return asst(say("checking"),
		use("s1", "read_doc", `{"path":"a"}`),
		use("c1", "lookup_stock", `{"sku":"X-1"}`),
		use("c2", "place_order", `{"sku":"X-1","qty":2}`))
}

func TestClientToolsWholeTurnThenHandOver(t *testing.T) {
	log := &execLog{}
	r, m := clientRunner(t, log, mixedTurn(), asst(say("ordered")))
	ctx := context.Background()
	out, err := r.Run(ctx, request("order two X-1 if in stock"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind, "the client write needs approval: the whole turn waits")
	assert.Empty(t, log.list(), "nothing of the turn ran before the decision")
	st := out.Suspended
	byID := map[string]loop.PendingCall{}
	for _, c := range st.PendingCalls {
		byID[c.ID] = c
	}
	assert.False(t, byID["s1"].NeedsApproval)
	assert.False(t, byID["c1"].NeedsApproval, "a client read needs no approval")
	assert.True(t, byID["c2"].NeedsApproval, "a client write needs approval")
	assert.Contains(t, st.Previews["c2"], "Executed by the caller")
	require.Contains(t, st.ToolHashes, "place_order")

	out, err = r.Resume(ctx, st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind)
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list(), "the server read ran once, after the approval")
	ho := out.Suspended
	require.NotNil(t, ho.HandOver)
	assert.Equal(t, loop.HandOverSchemaVersion, ho.SchemaVersion)
	assert.NotEqual(t, st.SuspensionID, ho.SuspensionID, "a hand-over has its own id")
	require.Len(t, ho.HandOver.Calls, 2)
	assert.Equal(t, "c1", ho.HandOver.Calls[0].ID)
	assert.Equal(t, "lookup_stock", ho.HandOver.Calls[0].Name)
	assert.JSONEq(t, `{"sku":"X-1","qty":2}`, string(ho.HandOver.Calls[1].Input))
	assert.Equal(t, map[string]loop.Result{"s1": {Content: "read_doc ok"}}, ho.HandOver.Results)
	last := ho.Transcript.Messages[len(ho.Transcript.Messages)-1]
	assert.Equal(t, loop.RoleAssistant, last.Role, "the turn's results message waits for the caller's results")
	modelCalls := m.calls()

	// The state survives encoding.
	b, err := ho.Encode()
	require.NoError(t, err)
	ho, err = loop.DecodeState(b)
	require.NoError(t, err)

	out, err = r.ResumeWithResults(ctx, ho, []loop.ClientResult{
		{CallID: "c2", Content: "order 77 placed"},
		{CallID: "c1", Content: "5 in stock"},
	})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, "ordered", out.FinalText)
	assert.Equal(t, modelCalls+1, m.calls())
	assert.Equal(t, map[string]int{"s1": 1, "c1": 1, "c2": 1}, m.resultsSeen(), "the model saw every result exactly once")
	checkTranscript(t, out.Transcript)
	res, _ := resultFor(out.Transcript, "c1")
	assert.Equal(t, "5 in stock", res.Content)
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list(), "nothing ran twice")
	assert.Equal(t, 3, out.Counters.ToolCalls)
}

func TestClientReadHandedOverWithoutApproval(t *testing.T) {
	log := &execLog{}
	r, _ := clientRunner(t, log, asst(use("c1", "lookup_stock", `{"sku":"A"}`), use("s1", "read_doc", `{"path":"a"}`)), asst(say("done")))
	req := request("look")
	req.Options.AllowedTools = []string{"read_doc"} // client tools are offered whatever allowed_tools says
	out, err := r.Run(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind)
	assert.Equal(t, []string{`read_doc({"path":"a"})`}, log.list())
	var kinds []loop.StepKind
	for _, s := range out.Trace {
		kinds = append(kinds, s.Kind)
	}
	assert.Equal(t, []loop.StepKind{loop.StepModelTurn, loop.StepToolExecuted, loop.StepHandedOver}, kinds)
	out, err = r.ResumeWithResults(context.Background(), out.Suspended, []loop.ClientResult{{CallID: "c1", Content: "db down", IsError: true}})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	res, _ := resultFor(out.Transcript, "c1")
	assert.True(t, res.IsError)
	checkTranscript(t, out.Transcript)
}

func TestClientCallsDeniedEditedRejected(t *testing.T) {
	turn := asst(
		use("c1", "place_order", `{"sku":"A","qty":1}`),
		use("c2", "place_order", `{"sku":"B","qty":1}`),
		use("c3", "lookup_stock", `{"sku":""}`), // invalid input: rejected, never handed over
	)
	log := &execLog{}
	r, _ := clientRunner(t, log, turn, asst(say("ok")))
	out, err := r.Run(context.Background(), request("order"))
	require.NoError(t, err)
	st := out.Suspended
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "c1", Action: loop.ActionDeny, Message: "not A"},
		{CallID: "c2", Action: loop.ActionEdit, Input: json.RawMessage(`{"sku":"B","qty":3}`)},
	}})
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind)
	ho := out.Suspended.HandOver
	require.Len(t, ho.Calls, 1, "the denied and the rejected calls are never handed over")
	assert.Equal(t, loop.ClientCall{ID: "c2", Name: "place_order", Input: json.RawMessage(`{"qty":3,"sku":"B"}`), Edited: true}, ho.Calls[0])
	assert.Contains(t, ho.Results["c1"].Content, "denied by the approver: not A")
	assert.True(t, ho.Results["c3"].IsError)
	out, err = r.ResumeWithResults(context.Background(), out.Suspended, []loop.ClientResult{{CallID: "c2", Content: "order 9"}})
	require.NoError(t, err)
	res, _ := resultFor(out.Transcript, "c2")
	assert.Contains(t, res.Content, `the approver edited the arguments of this call before it ran; it ran with {"qty":3,"sku":"B"}`)
	assert.Contains(t, res.Content, "order 9")
	checkTranscript(t, out.Transcript)
}

func TestClientCallsAllDeniedContinueWithoutHandOver(t *testing.T) {
	r, _ := clientRunner(t, &execLog{}, asst(use("c1", "place_order", `{"sku":"A","qty":1}`)), asst(say("fine")))
	out, err := r.Run(context.Background(), request("order"))
	require.NoError(t, err)
	st := out.Suspended
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionDeny})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	checkTranscript(t, out.Transcript)
}

func TestClientCallsNotHandedOverWhenDenialEndsRun(t *testing.T) {
	turn := asst(use("c1", "place_order", `{"sku":"A","qty":1}`), use("c2", "lookup_stock", `{"sku":"A"}`))
	r, _ := clientRunner(t, &execLog{}, turn, asst(say("never")))
	req := request("order")
	req.Options.DenialEndsRun = true
	out, err := r.Run(context.Background(), req)
	require.NoError(t, err)
	st := out.Suspended
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "c1", Action: loop.ActionDeny}}})
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeFinished, out.Kind)
	assert.Equal(t, loop.ReasonApprovalDenied, out.Reason)
	res, _ := resultFor(out.Transcript, "c2")
	assert.Contains(t, res.Content, "not executed: the run ended (approval_denied)")
	checkTranscript(t, out.Transcript)
}

func TestClientCallsNotHandedOverWhenCancelled(t *testing.T) {
	r, _ := clientRunner(t, &execLog{}, asst(use("c1", "lookup_stock", `{"sku":"A"}`)))
	ctx, cancel := context.WithCancel(context.Background())
	r.Hooks.OnStep = func(_ context.Context, st loop.Step) error {
		if st.Kind == loop.StepModelTurn {
			cancel()
		}
		return nil
	}
	out, err := r.Run(ctx, request("look"))
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeFinished, out.Kind)
	assert.Equal(t, loop.ReasonCancelled, out.Reason)
	checkTranscript(t, out.Transcript)
}

func TestResumeWithResultsRefusals(t *testing.T) {
	log := &execLog{}
	turns := []loop.Message{asst(use("c1", "lookup_stock", `{"sku":"A"}`), use("c2", "lookup_stock", `{"sku":"B"}`)), asst(say("ok"))}
	r, m := clientRunner(t, log, turns...)
	out, err := r.Run(context.Background(), request("look"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind)
	good := out.Suspended
	both := []loop.ClientResult{{CallID: "c1", Content: "1"}, {CallID: "c2", Content: "2"}}
	otherTools, err := testTools(t, log, nil).With(loop.NewClientTool(loop.Definition{Name: "lookup_stock", InputSchema: json.RawMessage(`{"type":"object"}`), Effect: loop.EffectRead}))
	require.NoError(t, err)

	tests := []struct {
		name    string
		runner  *loop.Runner
		state   func() *loop.SuspendedState
		results []loop.ClientResult
		want    error
	}{
		{"missing result", r, func() *loop.SuspendedState { return good }, both[:1], loop.ErrInvalidResults},
		{"extra result", r, func() *loop.SuspendedState { return good }, append(append([]loop.ClientResult(nil), both...), loop.ClientResult{CallID: "c9", Content: "x"}), loop.ErrInvalidResults},
		{"second result for a call", r, func() *loop.SuspendedState { return good }, append(append([]loop.ClientResult(nil), both...), both[0]), loop.ErrInvalidResults},
		{"empty call id", r, func() *loop.SuspendedState { return good }, []loop.ClientResult{{Content: "x"}, both[1]}, loop.ErrInvalidResults},
		{"not UTF-8", r, func() *loop.SuspendedState { return good }, []loop.ClientResult{{CallID: "c1", Content: "\xff"}, both[1]}, loop.ErrInvalidResults},
		{"no results", r, func() *loop.SuspendedState { return good }, nil, loop.ErrInvalidResults},
		{"state without hand-over", r, func() *loop.SuspendedState {
			s := *good
			s.HandOver = nil
			return &s
		}, both, loop.ErrInvalidResults},
		{"tampered calls", r, func() *loop.SuspendedState {
			s := *good
			s.PendingCalls = append([]loop.PendingCall(nil), good.PendingCalls...)
			s.PendingCalls[0].Input = json.RawMessage(`{"sku":"Z"}`)
			return &s
		}, both, loop.ErrInvalidResults},
		{"approval layout", r, func() *loop.SuspendedState {
			s := *good
			s.SchemaVersion = loop.SchemaVersion
			return &s
		}, both, loop.ErrSchemaVersion},
		{"client tool changed", &loop.Runner{Model: m, Tools: otherTools}, func() *loop.SuspendedState { return good }, both, loop.ErrToolChanged},
		{"client tool gone", &loop.Runner{Model: m, Tools: testTools(t, log, nil)}, func() *loop.SuspendedState { return good }, both, loop.ErrToolChanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := m.calls()
			_, err := tt.runner.ResumeWithResults(context.Background(), tt.state(), tt.results)
			assert.ErrorIs(t, err, tt.want)
			assert.Equal(t, before, m.calls(), "the model is not called")
		})
	}
	// A decision cannot resume a hand-over.
	_, err = r.Resume(context.Background(), good, loop.Decision{TurnDigest: good.TurnDigest, Action: loop.ActionApprove})
	assert.ErrorIs(t, err, loop.ErrInvalidDecision)
	// Results cannot resume an approval.
	r2, _ := clientRunner(t, log, asst(use("c1", "place_order", `{"sku":"A","qty":1}`)))
	out, err = r2.Run(context.Background(), request("order"))
	require.NoError(t, err)
	_, err = r2.ResumeWithResults(context.Background(), out.Suspended, []loop.ClientResult{{CallID: "c1"}})
	assert.ErrorIs(t, err, loop.ErrInvalidResults)
	assert.Empty(t, log.list())
}

func TestToolboxWithClientTools(t *testing.T) {
	base := testTools(t, &execLog{}, nil)
	base.NoteAbsent("crm__", "MCP server crm was unavailable when this process started")
	tb, err := base.With(clientTools()...)
	require.NoError(t, err)
	assert.Equal(t, []string{"lookup_stock", "place_order"}, tb.ClientNames())
	_, ok := base.Lookup("lookup_stock")
	assert.False(t, ok, "With leaves the base toolbox unchanged")
	assert.Empty(t, base.ClientNames())

	tests := []struct {
		name string
		tool loop.Tool
		want string
	}{
		{"server tool name", loop.NewClientTool(loop.Definition{Name: "read_doc", Effect: loop.EffectRead}), "defined twice"},
		{"absent MCP server's prefix", loop.NewClientTool(loop.Definition{Name: "crm__add", Effect: loop.EffectRead}), "tool source"},
		{"schema does not compile", loop.NewClientTool(loop.Definition{Name: "x", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`)}), "does not compile"},
		{"bad effect", loop.NewClientTool(loop.Definition{Name: "x", Effect: "delete"}), "effect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := base.With(tt.tool)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = base.With(clientTools()[0], clientTools()[0])
	assert.ErrorContains(t, err, "defined twice")
}

func TestClientToolDefinitionHashDiffersFromServerTool(t *testing.T) {
	def := loop.Definition{Name: "lookup_stock", InputSchema: json.RawMessage(lookupSchema), Effect: loop.EffectRead}
	server, err := loop.DefinitionHash(def)
	require.NoError(t, err)
	client, err := loop.DefinitionHash(loop.NewClientTool(def).Definition())
	require.NoError(t, err)
	assert.NotEqual(t, server, client)
	_, err = loop.NewClientTool(def).Call(context.Background(), nil)
	assert.Error(t, err, "a client tool is never executed by the loop")
}

func TestClientToolNoApprovalIsIgnored(t *testing.T) {
	tool := loop.NewClientTool(loop.Definition{Name: "w", Effect: loop.EffectWrite, NoApproval: true})
	assert.False(t, tool.Definition().NoApproval)
	r, _ := clientRunner(t, &execLog{}, asst(use("c1", "place_order", `{"sku":"A","qty":1}`)))
	out, err := r.Run(context.Background(), request("x"))
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.True(t, strings.HasPrefix(out.Suspended.SuspensionID, "susp-"))
}

// TestTooManyClientCallsAreNotHandedOver: a turn whose results would wait
// in the state is held like one that needs approval: at most
// loop.MaxHeldCalls calls, else none is handed over and the model is told.
func TestTooManyClientCallsAreNotHandedOver(t *testing.T) {
	var blocks []loop.Block
	for i := range loop.MaxHeldCalls + 1 {
		blocks = append(blocks, use(fmt.Sprintf("c%d", i), "lookup_stock", `{"sku":"A"}`))
	}
	r, _ := clientRunner(t, &execLog{}, asst(blocks...), asst(say("fewer then")))
	out, err := r.Run(context.Background(), request("look"))
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	res, ok := resultFor(out.Transcript, "c0")
	require.True(t, ok)
	assert.Contains(t, res.Content, "executed by the caller")
	checkTranscript(t, out.Transcript)
}

// TestPolicyAppliesToClientTools: the deployment's policy sees a client
// call like any call: a deny never hands it over (the model gets the
// denial), an allow hands a client write over without asking anyone.
func TestPolicyAppliesToClientTools(t *testing.T) {
	r, _ := clientRunner(t, &execLog{}, asst(use("c1", "place_order", `{"sku":"A","qty":1}`), use("c2", "lookup_stock", `{"sku":"A"}`)), asst(say("ok")))
	r.Policy = func(_ context.Context, q loop.PolicyQuery) loop.Verdict {
		if q.Call.Name == "lookup_stock" {
			return loop.Verdict{Action: loop.VerdictDeny, Rule: "no-stock", Message: "stock is private"}
		}
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "orders-ok"}
	}
	out, err := r.Run(context.Background(), request("order"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeAwaitingResults, out.Kind, "the allowed write is handed over at once")
	ho := out.Suspended.HandOver
	require.Len(t, ho.Calls, 1)
	assert.Equal(t, "c1", ho.Calls[0].ID)
	assert.Contains(t, ho.Results["c2"].Content, "stock is private")
}

package loop_test

// Tests of the security finding "a repeated member name": a model's tool
// input that is not I-JSON (a member name twice, invalid UTF-8, a lone
// surrogate escape) or not an object never runs, is never held for
// approval and never handed over, whatever the tool's kind; the model gets
// an error result saying why.

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// shopSchema takes an order, with an optional nested shipping object.
const shopSchema = `{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"ship":{"type":"object"}},"required":["sku","qty"]}`

// ambiguousInputs are inputs the loop must refuse as written, with the
// words of the error the model gets.
var ambiguousInputs = []struct{ name, input, want string }{
	{"a member twice", `{"sku":"X-1","qty":2000,"qty":2}`, `member "qty" appears twice in the same object`},
	{"a nested member twice", `{"sku":"X-1","qty":2,"ship":{"to":"Berlin","to":"Paris"}}`, `member "ship.to" appears twice in the same object`},
	{"invalid UTF-8", "{\"sku\":\"X-\xff\",\"qty\":2}", `invalid UTF-8 or a lone surrogate escape in a string at byte 10`},
	{"a lone surrogate escape", `{"sku":"X-\ud800","qty":2}`, `invalid UTF-8 or a lone surrogate escape in a string at byte 10`},
	{"not an object", `[{"sku":"X-1","qty":2}]`, `it must be a JSON object, not an array`},
}

// smallOrders is the tester's policy, "args.qty <= 2" allows, else an
// approval; it reads the arguments as encoding/json does (as CEL's
// activation did), and notes every call it is asked about.
type smallOrders struct {
	mu    sync.Mutex
	asked []string
}

func (p *smallOrders) policy(_ context.Context, q loop.PolicyQuery) loop.Verdict {
	p.mu.Lock()
	p.asked = append(p.asked, q.Call.ID)
	p.mu.Unlock()
	var args struct{ Qty int }
	if json.Unmarshal(q.Call.Input, &args) == nil && args.Qty <= 2 {
		return loop.Verdict{Action: loop.VerdictAllow, Rule: "small-orders"}
	}
	return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "default"}
}

func (p *smallOrders) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// TestAToolInputThatIsNotIJSONNeverRuns: for a builtin tool, a remote (MCP)
// tool and a client tool, each under a policy that allows the call by the
// last of its equal members, a call whose input is not I-JSON or not an
// object is not judged, not held, not run and not handed over; the model
// gets "Error: the input of tool ... is not valid: <why>" and goes on; the
// trail says the call did not run and why.
func TestAToolInputThatIsNotIJSONNeverRuns(t *testing.T) {
	def := loop.Definition{Name: "place_order", Description: "orders", InputSchema: json.RawMessage(shopSchema), Effect: loop.EffectWrite}
	kinds := []struct {
		name string
		tool func(log *execLog) loop.Tool
	}{
		{"builtin", func(log *execLog) loop.Tool {
			return &loop.FuncTool{Def: def, CallFunc: func(ctx context.Context, in json.RawMessage) (loop.Result, error) {
				log.add(def.Name, in, loop.IdempotencyKey(ctx))
				return loop.Result{Content: "ordered"}, nil
			}}
		}},
		{"remote", func(log *execLog) loop.Tool {
			d := def
			d.Annotations = json.RawMessage(`{"server":"shop"}`)
			return newRemoteTool(log, d)
		}},
		{"client", func(*execLog) loop.Tool { return loop.NewClientTool(def) }},
	}
	for _, kind := range kinds {
		for _, in := range ambiguousInputs {
			t.Run(kind.name+"/"+in.name, func(t *testing.T) {
				log := &execLog{}
				tb, err := loop.NewToolbox(kind.tool(log))
				require.NoError(t, err)
				pol := &smallOrders{}
				m := &recordingModel{inner: scriptModel(asst(use("o1", "place_order", in.input)), asst(say("done")))}
				r := &loop.Runner{Model: m, Tools: tb, Policy: pol.policy, NewID: seqIDs("susp-")}
				out, err := r.Run(context.Background(), request("order two X-1"))
				require.NoError(t, err)
				require.Equal(t, loop.OutcomeFinished, out.Kind, "neither held nor handed over")
				assert.Equal(t, loop.ReasonCompleted, out.Reason)
				assert.Nil(t, out.Suspended)
				assert.Empty(t, log.list(), "the call never ran")
				assert.Empty(t, pol.calls(), "no policy judged an input it would read one way of several")
				checkTranscript(t, out.Transcript)
				res, ok := resultFor(out.Transcript, "o1")
				require.True(t, ok)
				assert.True(t, res.IsError)
				assert.Equal(t, `Error: the input of tool "place_order" is not valid: `+in.want, res.Content)
				assert.Equal(t, map[string]int{"o1": 1}, m.resultsSeen(), "the model got the error")
				var step *loop.Step
				for i, st := range out.Trace {
					if st.Kind == loop.StepToolExecuted && st.CallID == "o1" {
						step = &out.Trace[i]
					}
				}
				require.NotNil(t, step, "the trail records the call")
				assert.True(t, step.IsError)
				assert.Equal(t, `not run: the input of tool "place_order" is not valid: `+in.want, step.Detail)
				assert.Empty(t, step.Effect, "nothing took effect")
				assert.Empty(t, step.Rule, "no rule judged it")
			})
		}
	}
}

// TestAnAmbiguousCallBesideAHeldOneIsNotHeld: in a turn that suspends for
// another call, a call whose input is not I-JSON is pending as one that
// cannot run: not held, no preview, no decision may approve it into
// running or edit it; the turn's digest is not that of the same turn with
// the input the policy would have read; approving the turn runs the held
// call and gives the ambiguous one its error.
func TestAnAmbiguousCallBesideAHeldOneIsNotHeld(t *testing.T) {
	log := &execLog{}
	turn := asst(use("w1", "write_doc", `{"path":"a","text":"x"}`), use("w2", "write_doc", `{"path":"a","text":"x","path":"b"}`))
	r := newRunner(t, scriptModel(turn, asst(say("done"))), log)
	ctx := context.Background()
	out, err := r.Run(ctx, request("write"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	require.Len(t, st.PendingCalls, 2)
	assert.True(t, st.PendingCalls[0].NeedsApproval)
	w2 := st.PendingCalls[1]
	assert.False(t, w2.NeedsApproval, "never held")
	assert.Equal(t, `the input of tool "write_doc" is not valid: member "path" appears twice in the same object`, w2.Rejected)
	assert.NotContains(t, st.Previews, "w2", "approvers are shown no preview of it")

	// The digest binds the input as written: the same turn with the input
	// the policy and the schema would have read has another.
	read := append([]loop.PendingCall(nil), st.PendingCalls...)
	read[1].Input = json.RawMessage(`{"path":"b","text":"x"}`)
	other, err := loop.TurnDigest(st.RunID, st.SuspensionID, read)
	require.NoError(t, err)
	assert.NotEqual(t, st.TurnDigest, other)

	err = loop.ValidateDecision(ctx, r.Tools, nil, st.PendingCalls, st.TurnDigest, loop.Decision{TurnDigest: st.TurnDigest,
		Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionApprove}, {CallID: "w2", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"b","text":"x"}`)}}})
	require.ErrorIs(t, err, loop.ErrInvalidDecision)
	assert.Contains(t, err.Error(), "cannot run")

	out, err = r.Resume(ctx, st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`write_doc({"path":"a","text":"x"})`}, log.list(), "only the held call ran")
	res, ok := resultFor(out.Transcript, "w2")
	require.True(t, ok)
	assert.Equal(t, `Error: the input of tool "write_doc" is not valid: member "path" appears twice in the same object`, res.Content)
}

// TestTwoInputsDifferingByADuplicateAreNotOne: the canonical form, which
// the turn digest is made of, refuses an input that is not I-JSON rather
// than make it the canonical form of another text; a digest over such an
// input (of a call refused for it) differs from the digest over each of
// its readings.
func TestTwoInputsDifferingByADuplicateAreNotOne(t *testing.T) {
	for _, in := range ambiguousInputs[:4] {
		t.Run(in.name, func(t *testing.T) {
			_, err := loop.CanonicalJSON(json.RawMessage(in.input))
			require.Error(t, err)
			assert.Contains(t, err.Error(), in.want)
		})
	}
	digest := func(input string) string {
		t.Helper()
		d, err := loop.TurnDigest("run-1", "susp-1", []loop.PendingCall{{ID: "o1", Name: "place_order", Input: json.RawMessage(input)}})
		require.NoError(t, err)
		return d
	}
	seen := map[string]string{}
	for _, in := range []string{
		`{"sku":"X-1","qty":2000,"qty":2}`, `{"sku":"X-1","qty":2}`, `{"sku":"X-1","qty":2000}`, `{"qty":2,"qty":2000,"sku":"X-1"}`,
		"{\"sku\":\"X-\xff\",\"qty\":2}", "{\"sku\":\"X-\xfe\",\"qty\":2}", "{\"sku\":\"X-\uFFFD\",\"qty\":2}", `{"sku":"X-\ud800","qty":2}`, `{"sku":"X-\udbff","qty":2}`,
	} {
		d := digest(in)
		if prev, ok := seen[d]; ok {
			t.Errorf("%q and %q have the same digest", prev, in)
		}
		seen[d] = in
	}
	assert.Equal(t, digest(`{"sku":"X-1","qty":2}`), digest(`{ "qty": 2, "sku": "X-1" }`), "I-JSON inputs still digest canonically")
}

// TestAnEditedInputMustBeIJSON: the loop itself refuses an edit whose
// input is not I-JSON (the API refuses such a body before; a library
// caller of ValidateDecision or Resume is held to it too).
func TestAnEditedInputMustBeIJSON(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"x"}`)), asst(say("done"))), log)
	ctx := context.Background()
	out, err := r.Run(ctx, request("write"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	for _, in := range []struct{ input, want string }{
		{`{"path":"a","text":"x","path":"secret/b"}`, `member "path" appears twice in the same object`},
		{"{\"path\":\"a\",\"text\":\"\xff\"}", "invalid UTF-8 or a lone surrogate escape"},
		{`{"path":"a","text":"\udc00"}`, "invalid UTF-8 or a lone surrogate escape"},
	} {
		d := loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(in.input)}}}
		err := loop.ValidateDecision(ctx, r.Tools, nil, st.PendingCalls, st.TurnDigest, d)
		require.ErrorIs(t, err, loop.ErrInvalidDecision, in.input)
		assert.Contains(t, err.Error(), in.want)
		_, err = r.Resume(ctx, st, d)
		require.ErrorIs(t, err, loop.ErrInvalidDecision, in.input)
	}
	assert.Empty(t, log.list())
}

// TestAnAmbiguousInputHeldByAnEarlierBuildNeverRuns: a state an earlier
// build wrote may hold a call whose input is not I-JSON as held and
// approvable. Its stored digest, made over the input as the last of its
// equal names reads, no longer matches, so a decision on it is refused; and
// should the digest match (a state made so), the approved call still does
// not run: the model gets the error.
func TestAnAmbiguousInputHeldByAnEarlierBuildNeverRuns(t *testing.T) {
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"x"}`)), asst(say("done"))), log)
	ctx := context.Background()
	out, err := r.Run(ctx, request("write"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	const ambiguous = `{"path":"secret/b","text":"x","path":"a"}`
	st.PendingCalls[0].Input = json.RawMessage(ambiguous)
	st.Transcript.Messages[len(st.Transcript.Messages)-1].Content[0].Input = json.RawMessage(ambiguous)

	// The digest the earlier build stored: over {"path":"a","text":"x"}.
	_, err = r.Resume(ctx, st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.ErrorIs(t, err, loop.ErrInvalidDecision)
	assert.Contains(t, err.Error(), "do not match its digest")

	st.TurnDigest, err = st.ExpectedDigest()
	require.NoError(t, err)
	out, err = r.Resume(ctx, st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Empty(t, log.list(), "the ambiguous call never ran")
	res, ok := resultFor(out.Transcript, "w1")
	require.True(t, ok)
	assert.Equal(t, `Error: the input of tool "write_doc" is not valid: member "path" appears twice in the same object`, res.Content)
}

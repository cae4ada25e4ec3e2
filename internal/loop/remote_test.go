package loop_test

// Tests of the hooks remote tools (MCP servers) need: NoApproval,
// Annotations in the definition hash, DefinitionChecker at resume, and the
// reasons of absent tools.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// remoteTool is a loop tool whose current definition can change under it,
// like a tool of an MCP server.
type remoteTool struct {
	loop.FuncTool
	mu       sync.Mutex
	current  loop.Definition
	checkErr error
	checked  int
}

func (t *remoteTool) CurrentDefinition(context.Context) (loop.Definition, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checked++
	return t.current, t.checkErr
}

func newRemoteTool(log *execLog, def loop.Definition) *remoteTool {
	rt := &remoteTool{current: def}
	rt.Def = def
	rt.CallFunc = func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
		log.add(def.Name, input, loop.IdempotencyKey(ctx))
		return loop.Result{Content: def.Name + " ok"}, nil
	}
	return rt
}

func TestDefinitionHashIsStableForDefinitionsWithoutTheNewFields(t *testing.T) {
	def := loop.Definition{Name: "write_doc", Description: "d", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite, Idempotent: true}
	// The hash as it was computed before NoApproval and Annotations existed:
	// states suspended by an older build must still resume.
	canon, err := loop.CanonicalJSON(def.InputSchema)
	require.NoError(t, err)
	old, err := json.Marshal(struct {
		Name             string          `json:"name"`
		InputSchema      json.RawMessage `json:"input_schema"`
		Effect           loop.Effect     `json:"effect"`
		Idempotent       bool            `json:"idempotent"`
		RequiresApproval bool            `json:"requires_approval"`
	}{def.Name, canon, def.Effect, def.Idempotent, def.RequiresApproval})
	require.NoError(t, err)
	sum := sha256.Sum256(old)
	got, err := loop.DefinitionHash(def)
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:]), got)
}

func TestDefinitionHashCoversAnnotationsAndNoApproval(t *testing.T) {
	base := loop.Definition{Name: "crm__create", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectWrite,
		Annotations: json.RawMessage(`{"server":"crm","destructiveHint":true}`)}
	h0, err := loop.DefinitionHash(base)
	require.NoError(t, err)

	reordered := base
	reordered.Annotations = json.RawMessage(`{ "destructiveHint": true, "server": "crm" }`)
	h1, err := loop.DefinitionHash(reordered)
	require.NoError(t, err)
	assert.Equal(t, h0, h1, "annotations are hashed canonically")

	changed := base
	changed.Annotations = json.RawMessage(`{"server":"crm","destructiveHint":false}`)
	h2, err := loop.DefinitionHash(changed)
	require.NoError(t, err)
	assert.NotEqual(t, h0, h2, "a changed annotation changes the hash")

	exempt := base
	exempt.NoApproval = true
	h3, err := loop.DefinitionHash(exempt)
	require.NoError(t, err)
	assert.NotEqual(t, h0, h3, "the approval rule is part of the hash")
}

func TestNoApprovalRunsAWriteAtOnceBehindTheFence(t *testing.T) {
	log := &execLog{}
	tool := newRemoteTool(log, loop.Definition{Name: "crm__note", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectWrite, NoApproval: true})
	tb, err := loop.NewToolbox(tool)
	require.NoError(t, err)
	var fenced []string
	r := &loop.Runner{
		Model: scriptModel(asst(use("n1", "crm__note", `{"path":"a"}`)), asst(say("noted"))),
		Tools: tb,
		Hooks: loop.Hooks{
			BeforeEffect: func(_ context.Context, c loop.FencedCall) error { fenced = append(fenced, "before "+c.ID); return nil },
			AfterEffect: func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
				fenced = append(fenced, "after "+c.ID)
				return nil
			},
		},
	}
	out, err := r.Run(context.Background(), request("note it"))
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`crm__note({"path":"a"})`}, log.list())
	assert.Equal(t, []string{"before n1", "after n1"}, fenced, "an exempted write is still fenced")

	// The runner's policy can still ask for approval.
	r.Policy = func(context.Context, loop.PolicyQuery) loop.Verdict {
		return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "ask"}
	}
	out, err = r.Run(context.Background(), request("note it"))
	require.NoError(t, err)
	assert.Equal(t, loop.OutcomeSuspended, out.Kind)
}

// remoteHeldTurn suspends a turn of one read and one write of a remote
// server and returns the runner, the tools and the state.
func remoteHeldTurn(t *testing.T, log *execLog) (*loop.Runner, *remoteTool, *remoteTool, *loop.SuspendedState) {
	t.Helper()
	read := newRemoteTool(log, loop.Definition{Name: "crm__find", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectRead,
		Annotations: json.RawMessage(`{"readOnlyHint":true}`)})
	write := newRemoteTool(log, loop.Definition{Name: "crm__update", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite})
	tb, err := loop.NewToolbox(read, write)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(
		asst(use("f1", "crm__find", `{"path":"a"}`), use("u1", "crm__update", `{"path":"a","text":"x"}`)),
		asst(say("done"))), Tools: tb, NewID: seqIDs("s-")}
	out, err := r.Run(context.Background(), request("update"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	require.Empty(t, log.list())
	assert.Equal(t, 1, read.checked, "every remote tool of a held turn is asked once when it is held")
	assert.Equal(t, 1, write.checked)
	read.checked, write.checked = 0, 0
	return r, read, write, out.Suspended
}

func TestResumeRefusesARemoteDefinitionThatChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *loop.Definition)
	}{
		{"input schema", func(d *loop.Definition) { d.InputSchema = json.RawMessage(`{"type":"object"}`) }},
		{"annotations", func(d *loop.Definition) { d.Annotations = json.RawMessage(`{"destructiveHint":false}`) }},
		{"approval rule", func(d *loop.Definition) { d.NoApproval = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			r, _, write, st := remoteHeldTurn(t, log)
			tt.change(&write.current)
			out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
			require.ErrorIs(t, err, loop.ErrToolChanged)
			assert.Contains(t, err.Error(), `"crm__update"`)
			assert.Contains(t, err.Error(), "is not what the approver reviewed: its server's definition of it now differs from the one the call was held with")
			assert.Empty(t, log.list(), "nothing of the turn runs, not even the read sibling")
			assert.Empty(t, out.Trace)
		})
	}
}

func TestResumeChecksOnlyCallsThatRun(t *testing.T) {
	log := &execLog{}
	r, read, write, st := remoteHeldTurn(t, log)
	write.current.InputSchema = json.RawMessage(`{"type":"object"}`) // changed, but denied: irrelevant
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "u1", Action: loop.ActionDeny, Message: "no"}}})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`crm__find({"path":"a"})`}, log.list())
	assert.Equal(t, 1, read.checked)
	assert.Equal(t, 0, write.checked, "a denied call's tool is not asked")
}

func TestResumeDoesNotRunACallWhoseDefinitionCannotBeConfirmed(t *testing.T) {
	log := &execLog{}
	r, _, write, st := remoteHeldTurn(t, log)
	write.checkErr = errors.New("server crm unreachable")
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`crm__find({"path":"a"})`}, log.list(), "the unconfirmed write never runs")
	res, ok := resultFor(out.Transcript, "u1")
	require.True(t, ok)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "server crm unreachable")
	checkTranscript(t, out.Transcript)
}

func TestMissingToolsSayWhy(t *testing.T) {
	tb, err := loop.NewToolbox()
	require.NoError(t, err)
	tb.NoteAbsent("crm__", "MCP server crm could not be reached at start-up")
	assert.Equal(t, `tool "crm__find" is unavailable: MCP server crm could not be reached at start-up`, tb.Missing("crm__find"))
	assert.Equal(t, `unknown tool "other"`, tb.Missing("other"))

	r := &loop.Runner{Model: scriptModel(asst(say("hi"))), Tools: tb}
	req := request("x")
	req.Options.AllowedTools = []string{"crm__find"}
	_, err = r.Run(context.Background(), req)
	require.ErrorIs(t, err, loop.ErrInvalidRequest)
	assert.Contains(t, err.Error(), "could not be reached at start-up")
}

func TestResumeInAProcessWhereTheToolsSourceIsAbsent(t *testing.T) {
	log := &execLog{}
	r, read, _, st := remoteHeldTurn(t, log)
	// The resuming process could not reach the server of crm__update at
	// start-up: the tool is absent, with a noted reason.
	tb, err := loop.NewToolbox(read)
	require.NoError(t, err)
	tb.NoteAbsent("crm__update", "MCP server crm was unavailable when this process started")
	r.Tools = tb
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Equal(t, []string{`crm__find({"path":"a"})`}, log.list(), "the absent tool's call does not run")
	res, ok := resultFor(out.Transcript, "u1")
	require.True(t, ok)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "unavailable when this process started")
	checkTranscript(t, out.Transcript)

	// Without a noted reason a vanished tool still refuses the resume.
	r2, _, _, st2 := remoteHeldTurn(t, &execLog{})
	tb2, err := loop.NewToolbox(read)
	require.NoError(t, err)
	r2.Tools = tb2
	_, err = r2.Resume(context.Background(), st2, loop.Decision{TurnDigest: st2.TurnDigest, Action: loop.ActionApprove})
	require.ErrorIs(t, err, loop.ErrToolChanged)
}

// liveTool is a remote tool that keeps a copy of its source's definition,
// refreshed whenever it is asked (the DefinitionChecker contract).
type liveTool struct {
	mu     sync.Mutex
	copy   loop.Definition
	source loop.Definition
	log    *execLog
}

func (t *liveTool) Definition() loop.Definition {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.copy
}

func (t *liveTool) CurrentDefinition(context.Context) (loop.Definition, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.copy = t.source
	return t.copy, nil
}

func (t *liveTool) Call(ctx context.Context, input json.RawMessage) (loop.Result, error) {
	t.log.add(t.Definition().Name, input, loop.IdempotencyKey(ctx))
	return loop.Result{Content: "ok"}, nil
}

func TestAHeldTurnIsHeldOnTheDefinitionItsSourceHasNow(t *testing.T) {
	log := &execLog{}
	v1 := loop.Definition{Name: "crm__update", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectWrite}
	v2 := v1
	v2.InputSchema = json.RawMessage(writeSchema)
	tool := &liveTool{copy: v1, source: v2, log: log}
	tb, err := loop.NewToolbox(tool)
	require.NoError(t, err)
	stale, _ := tb.Hash("crm__update")
	want, err := loop.DefinitionHash(v2)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(asst(use("u1", "crm__update", `{"path":"a","text":"x"}`)), asst(say("done"))), Tools: tb, NewID: seqIDs("s-")}

	out, err := r.Run(context.Background(), request("update"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.Equal(t, want, out.Suspended.ToolHashes["crm__update"], "hashed on the source's definition, not the stale copy (%s)", stale)
	got, _ := tb.Hash("crm__update")
	assert.Equal(t, want, got, "the toolbox follows the tool's refreshed definition")
	require.NoError(t, tb.ValidateInput("crm__update", json.RawMessage(`{"path":"a","text":"x"}`)), "and its schema")

	done, err := r.Resume(context.Background(), out.Suspended, loop.Decision{TurnDigest: out.Suspended.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	assert.Len(t, log.list(), 1)
}

// TestAHeldCallSaysWhenItsDefinitionCouldNotBeChecked: a source that
// cannot be asked as the turn is held leaves the definition the process
// has; each call of that tool carries why (the checker's Cause, never
// another error's message) and when that definition was read. Calls of a
// tool whose source answered carry nothing, and the turn digest does not
// cover the note.
func TestAHeldCallSaysWhenItsDefinitionCouldNotBeChecked(t *testing.T) {
	listed := time.Date(2026, 12, 4, 9, 30, 15, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		err  error
		want *loop.UnverifiedDefinition
	}{
		{"answered", nil, nil},
		{"cause and listing time", &loop.DefinitionUnavailableError{Cause: "the connection was refused", ListedAt: listed, Err: errors.New("dial tcp 10.0.0.7:443: connection refused")},
			&loop.UnverifiedDefinition{Reason: "the connection was refused", ListedAt: listed.UTC()}},
		{"wrapped, no listing time", fmt.Errorf("asking: %w", &loop.DefinitionUnavailableError{Cause: "no answer in time", Err: context.DeadlineExceeded}),
			&loop.UnverifiedDefinition{Reason: "no answer in time"}},
		{"another error", errors.New("Post https://user:secret@crm.internal/mcp: EOF"),
			&loop.UnverifiedDefinition{Reason: "its source could not be asked; the agentgate log has the error"}},
		{"a long cause is cut", &loop.DefinitionUnavailableError{Cause: strings.Repeat("é", 150), Err: errors.New("x")},
			&loop.UnverifiedDefinition{Reason: strings.Repeat("é", 98) + "…"}},
		{"a cause with what JSON escapes", &loop.DefinitionUnavailableError{Cause: "header <X-Key>\n\u202e\x01 & \"quoted\\\xff", Err: errors.New("x")},
			&loop.UnverifiedDefinition{Reason: "header X-Key quoted"}},
		{"an empty cause", &loop.DefinitionUnavailableError{Cause: " \n", Err: errors.New("x")},
			&loop.UnverifiedDefinition{Reason: "its source could not be asked; the agentgate log has the error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &execLog{}
			read := newRemoteTool(log, loop.Definition{Name: "crm__find", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectRead})
			write := newRemoteTool(log, loop.Definition{Name: "crm__update", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite})
			write.checkErr = tt.err
			tb, err := loop.NewToolbox(read, write)
			require.NoError(t, err)
			r := &loop.Runner{Model: scriptModel(
				asst(use("f1", "crm__find", `{"path":"a"}`), use("u1", "crm__update", `{"path":"a","text":"x"}`), use("u2", "crm__update", `{"path":"b","text":"y"}`)),
				asst(say("done"))), Tools: tb, NewID: seqIDs("s-")}
			out, err := r.Run(context.Background(), request("update"))
			require.NoError(t, err)
			require.Equal(t, loop.OutcomeSuspended, out.Kind, "held on the definition the process has")
			st := out.Suspended
			require.Len(t, st.PendingCalls, 3)
			assert.Nil(t, st.PendingCalls[0].DefinitionUnverified, "the read's source answered")
			for _, c := range st.PendingCalls[1:] {
				assert.Equal(t, tt.want, c.DefinitionUnverified, "call %s", c.ID)
				if c.DefinitionUnverified != nil {
					assert.LessOrEqual(t, len(c.DefinitionUnverified.Reason), loop.MaxUnverifiedReasonBytes)
				}
			}
			bare := slices.Clone(st.PendingCalls)
			for i := range bare {
				bare[i].DefinitionUnverified = nil
			}
			digest, err := loop.TurnDigest(st.RunID, st.SuspensionID, bare)
			require.NoError(t, err)
			assert.Equal(t, digest, st.TurnDigest, "the digest does not cover the note")

			raw, err := st.Encode()
			require.NoError(t, err)
			back, err := loop.DecodeState(raw)
			require.NoError(t, err)
			assert.Equal(t, st.PendingCalls, back.PendingCalls, "the note survives the state's encoding")
		})
	}
}

// TestCallsThatCouldNotRunAtResumeNameTheirRuleAndWhy holds a turn of two
// remote writes and a write whose input its schema refuses under a policy
// rule, and resumes it approved in a process where neither remote write
// can run: one's server cannot be reached, the other's was absent when the
// process started. Each call's tool_executed step names the rule that held
// it and says it was not run and why, in the words the model gets, and
// names no effect (nothing took effect).
func TestCallsThatCouldNotRunAtResumeNameTheirRuleAndWhy(t *testing.T) {
	log := &execLog{}
	a := newRemoteTool(log, loop.Definition{Name: "crm__update", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite})
	b := newRemoteTool(log, loop.Definition{Name: "erp__post", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite})
	c := newRemoteTool(log, loop.Definition{Name: "crm__note", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite})
	tb, err := loop.NewToolbox(a, b, c)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(
		asst(use("a1", "crm__update", `{"path":"a","text":"x"}`), use("b1", "erp__post", `{"path":"b","text":"y"}`), use("c1", "crm__note", `{"path":"c"}`)),
		asst(say("done"))), Tools: tb, NewID: seqIDs("s-"),
		Policy: func(context.Context, loop.PolicyQuery) loop.Verdict {
			return loop.Verdict{Action: loop.VerdictRequireApproval, Rule: "default"}
		}}
	out, err := r.Run(context.Background(), request("update"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended

	// The resuming process: crm's server does not answer, erp's was
	// down when the process started.
	a.checkErr = errors.New("MCP server crm could not be reached (the connection was refused)")
	tb2, err := loop.NewToolbox(a, c)
	require.NoError(t, err)
	tb2.NoteAbsent("erp__", "MCP server erp was unavailable when this process started (the connection was refused)")
	r.Tools = tb2
	var steps []loop.Step
	r.Hooks.OnStep = func(_ context.Context, s loop.Step) error { steps = append(steps, s); return nil }
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Empty(t, log.list(), "nothing ran")
	checkTranscript(t, out.Transcript)

	executed := map[string]loop.Step{}
	for _, s := range steps {
		if s.Kind == loop.StepToolExecuted {
			executed[s.CallID] = s
		}
	}
	require.Len(t, executed, 3)
	for id, why := range map[string]string{
		"a1": "crm__update could not be run or its current definition confirmed here (MCP server crm could not be reached (the connection was refused))",
		"b1": `erp__post could not be run or its current definition confirmed here (tool "erp__post" is unavailable: MCP server erp was unavailable when this process started (the connection was refused))`,
		"c1": "",
	} {
		s := executed[id]
		assert.True(t, s.IsError, "%s: %+v", id, s)
		assert.Equal(t, loop.ActionApprove, s.Action, "%s: the decision is on record", id)
		assert.Equal(t, "default", s.Rule, "%s: the rule that held the call is on record", id)
		assert.Empty(t, s.Effect, "%s: nothing took effect", id)
		assert.True(t, strings.HasPrefix(s.Detail, "not run: "), "%s: got detail %q", id, s.Detail)
		if why == "" {
			continue
		}
		assert.Equal(t, "not run: "+why, s.Detail, id)
		res, ok := resultFor(out.Transcript, id)
		require.True(t, ok)
		assert.Equal(t, "not executed: "+why, res.Content, "%s: the trail says what the model was told", id)
	}
	assert.Contains(t, executed["c1"].Detail, "not run: ")
}

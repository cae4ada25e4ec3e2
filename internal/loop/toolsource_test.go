package loop_test

// A toolbox that follows a ToolSource whose tools change while the process
// runs: runs take a fixed snapshot (Revive), ask the source for the tools
// they lack, and keep what they took.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// fakeSource is a ToolSource whose tools the test sets; Seek calls found
// when the test gave it one.
type fakeSource struct {
	mu     sync.Mutex
	tools  []loop.Tool
	absent map[string]string // prefix -> reason
	rev    uint64
	seeks  [][]string
	found  func()
}

func (f *fakeSource) Tools() []loop.Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tools)
}

func (f *fakeSource) NoteAbsent(tb *loop.Toolbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, why := range f.absent {
		tb.NoteAbsent(p, why)
	}
}

func (f *fakeSource) Revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func (f *fakeSource) Seek(_ context.Context, names []string, absent bool) {
	f.mu.Lock()
	call := slices.Clone(names)
	if absent {
		call = append(call, "<absent>")
	}
	f.seeks = append(f.seeks, call)
	found := f.found
	f.found = nil
	f.mu.Unlock()
	if found != nil {
		found()
	}
}

// set replaces the source's tools and absences (a new revision).
func (f *fakeSource) set(absent map[string]string, tools ...loop.Tool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools, f.absent = tools, absent
	f.rev++
}

func (f *fakeSource) sought() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seeks)
}

func remote(name string, effect loop.Effect) loop.Tool {
	return &loop.FuncTool{Def: loop.Definition{Name: name, Description: name, Effect: effect},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			return loop.Result{Content: name + " ran"}, nil
		}}
}

func TestAToolboxWithASourceFollowsIt(t *testing.T) {
	src := &fakeSource{absent: map[string]string{"crm__": "MCP server crm was unavailable when this process started"}}
	local := remote("local", loop.EffectRead)
	tb, err := loop.NewToolboxWithSource(src, local)
	require.NoError(t, err)
	assert.Equal(t, []string{"local"}, tb.Names())
	assert.Equal(t, `tool "crm__find" is unavailable: MCP server crm was unavailable when this process started`, tb.Missing("crm__find"))

	// A run that needs nothing missing asks nothing.
	before := tb.Revive(context.Background(), []string{"local"}, false)
	assert.Empty(t, src.sought())

	// A run that names a missing tool asks the source, and gets it.
	src.found = func() { src.set(nil, remote("crm__find", loop.EffectRead)) }
	after := tb.Revive(context.Background(), []string{"local", "crm__find"}, false)
	assert.Equal(t, [][]string{{"crm__find"}}, src.sought(), "only the missing name")
	_, ok := after.Lookup("crm__find")
	assert.True(t, ok)
	assert.Equal(t, `unknown tool "crm__gone"`, after.Missing("crm__gone"), "no absence noted any more")
	_, ok = before.Lookup("crm__find")
	assert.False(t, ok, "a snapshot taken before keeps its tools")
	assert.Equal(t, []string{"local", "crm__find"}, tb.Names(), "the toolbox follows")
	assert.Same(t, after, tb.Revive(context.Background(), []string{"crm__find"}, false), "nothing changed: the same snapshot")

	// A run that may call every tool asks for the absent ones, only when
	// some are absent.
	n := len(src.sought())
	tb.Revive(context.Background(), nil, true)
	assert.Len(t, src.sought(), n, "nothing absent: nothing asked")
	src.set(map[string]string{"erp__": "down"}, remote("crm__find", loop.EffectRead))
	tb.Revive(context.Background(), nil, true)
	assert.Equal(t, []string{"<absent>"}, src.sought()[n])
}

func TestAToolboxWithASourceKeepsARunsClientTools(t *testing.T) {
	src := &fakeSource{absent: map[string]string{"crm__": "down"}}
	tb, err := loop.NewToolboxWithSource(src)
	require.NoError(t, err)
	run, err := tb.With(loop.NewClientTool(loop.Definition{Name: "pick", Effect: loop.EffectRead}))
	require.NoError(t, err)
	_, err = tb.With(loop.NewClientTool(loop.Definition{Name: "crm__pick", Effect: loop.EffectRead}))
	require.ErrorContains(t, err, "belongs to a tool source")

	src.found = func() { src.set(nil, remote("crm__find", loop.EffectWrite)) }
	revived := run.Revive(context.Background(), []string{"crm__find"}, false)
	assert.Equal(t, []string{"crm__find", "pick"}, revived.Names())
	assert.Equal(t, []string{"pick"}, revived.ClientNames())
	assert.Equal(t, []string{"pick"}, run.Names(), "the run's toolbox is not changed")
	_, ok := tb.Lookup("pick")
	assert.False(t, ok, "nor the deployment's")
}

func TestAChangeThatDoesNotFitIsNotTaken(t *testing.T) {
	src := &fakeSource{}
	tb, err := loop.NewToolboxWithSource(src, remote("local", loop.EffectRead))
	require.NoError(t, err)
	src.set(nil, remote("local", loop.EffectWrite)) // a second "local"
	assert.Equal(t, []string{"local"}, tb.Names())
	tl, _ := tb.Lookup("local")
	assert.Equal(t, loop.EffectRead, tl.Definition().Effect, "the toolbox keeps the tools it had")
	src.set(nil, remote("crm__find", loop.EffectRead))
	assert.Equal(t, []string{"local", "crm__find"}, tb.Names(), "until the source changes again")
}

func TestARunnerWithASourceRunsOnOneSnapshot(t *testing.T) {
	src := &fakeSource{absent: map[string]string{"crm__": "MCP server crm was unavailable when this process started"}}
	tb, err := loop.NewToolboxWithSource(src)
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(asst(use("u1", "crm__find", `{}`)), asst(say("done"))), Tools: tb}
	req := request("find")
	req.Options.AllowedTools = []string{"crm__find"}
	_, err = r.Run(context.Background(), req)
	require.ErrorIs(t, err, loop.ErrInvalidRequest)
	assert.Contains(t, err.Error(), "unavailable when this process started")

	src.found = func() { src.set(nil, remote("crm__find", loop.EffectRead)) }
	out, err := r.Run(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Same(t, tb, r.Tools, "the runner is not changed: it may serve other runs")
	var ran bool
	for _, m := range out.Transcript.Messages {
		for _, b := range m.Content {
			ran = ran || (b.Type == loop.BlockToolResult && strings.Contains(b.Content, "crm__find ran"))
		}
	}
	assert.True(t, ran)
}

func TestAResumeLooksForTheToolsOfItsHeldCalls(t *testing.T) {
	update, turns, st := heldUpdate(t)

	// The resuming process could not list crm at start-up; it is up now.
	src := &fakeSource{absent: map[string]string{"crm__": "MCP server crm was unavailable when this process started"}}
	src.found = func() { src.set(nil, update) }
	tb, err := loop.NewToolboxWithSource(src)
	require.NoError(t, err)
	done, err := (&loop.Runner{Model: scriptModel(turns...), Tools: tb}).Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	assert.Equal(t, [][]string{{"crm__update", "<absent>"}}, src.sought())
	res, ok := resultFor(done.Transcript, "u1")
	require.True(t, ok)
	assert.False(t, res.IsError, res.Content)
	assert.Equal(t, "crm__update ran", res.Content)
}

// TestAVoteThatEditsLooksForItsTool: an edit in a vote is checked against
// the tool's schema as a decision's is, so a tool whose source this
// process could not list at start-up is looked for again (reviewer
// helper-91 F2: before, the vote's edit was refused as unavailable).
func TestAVoteThatEditsLooksForItsTool(t *testing.T) {
	update, _, st := heldUpdate(t)

	src := &fakeSource{absent: map[string]string{"crm__": "MCP server crm was unavailable when this process started"}}
	src.found = func() { src.set(nil, update) }
	tb, err := loop.NewToolboxWithSource(src)
	require.NoError(t, err)
	vote := loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{{CallID: "u1", Action: loop.ActionEdit, Input: json.RawMessage(`{}`)}}}
	require.NoError(t, loop.ValidateVote(context.Background(), tb, nil, st.PendingCalls, st.TurnDigest, vote, 1))
	assert.Equal(t, [][]string{{"crm__update"}}, src.sought())
}

// heldUpdate returns an MCP write tool, crm__update, the model turns of a
// run that calls it and then says it is done, and the state of that run
// held for the call's approval (by a process that could list the tool).
func heldUpdate(t *testing.T) (loop.Tool, []loop.Message, *loop.SuspendedState) {
	t.Helper()
	update := remote("crm__update", loop.EffectWrite)
	holderTools, err := loop.NewToolbox(update)
	require.NoError(t, err)
	turns := []loop.Message{asst(use("u1", "crm__update", `{}`)), asst(say("done"))}
	out, err := (&loop.Runner{Model: scriptModel(turns...), Tools: holderTools}).Run(context.Background(), request("update"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	return update, turns, out.Suspended
}

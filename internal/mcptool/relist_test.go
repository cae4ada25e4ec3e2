package mcptool_test

// A server that changes a tool's definition after this process listed it:
// the turn that calls it is held on the definition the server has now, and
// the process's copy is refreshed, so no run is refused for a change that
// came before it started.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// ticketV2 is create_ticket with an added property and a new description.
var ticketV2 = &mcp.Tool{Name: "create_ticket", Description: "Open a support ticket in a queue.", InputSchema: mcptest.ObjectSchema("title", "queue")}

// ticketProcess opens a catalog of the CRM server and a runner whose model
// opens a ticket with input.
func ticketProcess(t *testing.T, input string) (*mcptest.Server, *loop.Toolbox, *loop.Runner) {
	t.Helper()
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	tb := toolbox(t, c)
	r := runner(t, tb, turn(call("c1", "crm__create_ticket", input)), turn(loop.TextBlock("ticket opened")))
	return s, tb, r
}

// currentHash is the hash of the server's tool as a new process lists it.
func currentHash(t *testing.T, s *mcptest.Server, name string) string {
	t.Helper()
	tb := toolbox(t, open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{}))
	h, ok := tb.Hash(name)
	require.True(t, ok)
	return h
}

func approve(t *testing.T, r *loop.Runner, st *loop.SuspendedState) loop.Outcome {
	t.Helper()
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	return out
}

func TestADefinitionChangedBeforeTheRunIsHeldOnTheNewOne(t *testing.T) {
	s, tb, r := ticketProcess(t, `{"title":"printer on fire","queue":"facilities"}`)
	stale, _ := tb.Hash("crm__create_ticket")
	s.AddTool(ticketV2, mcptest.Text("ticket T-7 created"))
	lists := s.Lists()

	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	st := out.Suspended
	assert.Equal(t, lists+1, s.Lists(), "one listing when the turn is held")
	require.Len(t, st.PendingCalls, 1)
	held := st.PendingCalls[0]
	assert.Empty(t, held.Rejected, "the input is checked against the schema the server has now")
	assert.True(t, held.NeedsApproval)
	assert.Contains(t, st.Previews["c1"], "Description: Open a support ticket in a queue.", "approvers see the current definition")
	want := currentHash(t, s, "crm__create_ticket")
	assert.NotEqual(t, stale, want)
	assert.Equal(t, want, st.ToolHashes["crm__create_ticket"], "the call is held on the current definition")
	got, _ := tb.Hash("crm__create_ticket")
	assert.Equal(t, want, got, "the process's copy is refreshed")

	done := approve(t, r, st)
	assert.Equal(t, loop.ReasonCompleted, done.Reason, "no tool_changed for a change that came before the run")
	calls := s.CallsOf("create_ticket")
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"title":"printer on fire","queue":"facilities"}`, string(calls[0].Arguments))
	assert.Equal(t, "ticket T-7 created", resultText(t, done.Transcript, "c1").Content)
}

func TestAnInputTheNewSchemaRefusesIsHeldAsRefused(t *testing.T) {
	// The input fits the listing this process read, not the server's schema now.
	s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
	s.AddTool(ticketV2, mcptest.Text("ticket T-7 created"))
	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	held := out.Suspended.PendingCalls[0]
	assert.Contains(t, held.Rejected, `input does not match the schema of "crm__create_ticket"`)
	assert.Contains(t, out.Suspended.Previews["c1"], "this call will fail as it is")

	done := approve(t, r, out.Suspended)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	assert.Empty(t, s.CallsOf("create_ticket"), "an invalid call never reaches the server")
	assert.True(t, resultText(t, done.Transcript, "c1").IsError)
}

func TestAToolThatBecameATrustedReadRunsAtOnce(t *testing.T) {
	s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
	s.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Look a ticket up.", InputSchema: mcptest.ObjectSchema("title"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("ticket T-1 found"))
	out := start(t, r)
	assert.Equal(t, loop.ReasonCompleted, out.Reason, "judged on the definition the server has now")
	assert.Len(t, s.CallsOf("create_ticket"), 1)
}

func TestADefinitionChangedWhileWaitingIsRefusedOnceAndTheNextRunWorks(t *testing.T) {
	s, tb, r := ticketProcess(t, `{"title":"printer on fire","queue":"facilities"}`)
	// Held on v1 (the input has a property v1 does not allow: refused as it is).
	first := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, first.Kind)
	s.AddTool(ticketV2, mcptest.Text("ticket T-8 created"))

	_, err := r.Resume(context.Background(), first.Suspended, loop.Decision{TurnDigest: first.Suspended.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "c1", Action: loop.ActionEdit, Input: json.RawMessage(`{"title":"printer on fire"}`)}}})
	require.ErrorIs(t, err, loop.ErrToolChanged)
	assert.Contains(t, err.Error(), `tool "crm__create_ticket" (call c1) is not what the approver reviewed`)
	assert.Contains(t, err.Error(), "changed after the run was held")
	assert.NotContains(t, err.Error(), "while the run waited")
	assert.Empty(t, s.CallsOf("create_ticket"), "nothing of the turn runs")
	got, _ := tb.Hash("crm__create_ticket")
	assert.Equal(t, currentHash(t, s, "crm__create_ticket"), got, "the refusal refreshed the process's copy")

	// The next run in the same process: held on v2, approved, runs.
	second := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, second.Kind)
	assert.Empty(t, second.Suspended.PendingCalls[0].Rejected)
	done := approve(t, r, second.Suspended)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	require.Len(t, s.CallsOf("create_ticket"), 1)
}

func TestAResumingProcessWithAnOlderListingAsksTheServer(t *testing.T) {
	// Lambda: the run is held by one container (which sees v2) and resumed
	// by another that listed v1 before the change.
	s, _, resumer := ticketProcess(t, `{"title":"printer on fire","queue":"facilities"}`)
	s.AddTool(ticketV2, mcptest.Text("ticket T-9 created"))
	holder := runner(t, toolbox(t, open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})),
		turn(call("c1", "crm__create_ticket", `{"title":"printer on fire","queue":"facilities"}`)), turn(loop.TextBlock("ticket opened")))
	out := start(t, holder)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)

	done := approve(t, resumer, out.Suspended)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	assert.Len(t, s.CallsOf("create_ticket"), 1)
}

func TestOneListingForEveryRemoteToolOfAHeldTurn(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	r := runner(t, toolbox(t, c), turn(
		call("f1", "crm__find_customer", `{"query":"acme"}`),
		call("c1", "crm__create_ticket", `{"title":"a"}`),
		call("x1", "crm__close_ticket", `{"id":"T-1"}`),
		call("n1", "crm__note_add", `{"text":"b"}`)), turn(loop.TextBlock("done")))
	lists := s.Lists()
	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.Equal(t, lists+1, s.Lists(), "one listing when the turn is held")
	approve(t, r, out.Suspended)
	assert.Equal(t, lists+2, s.Lists(), "one listing when it resumes")

	reads := runner(t, toolbox(t, c), turn(call("f1", "crm__find_customer", `{"query":"acme"}`)), turn(loop.TextBlock("done")))
	lists = s.Lists()
	start(t, reads)
	assert.Equal(t, lists, s.Lists(), "a read that runs at once lists nothing")
}

func TestARemovedToolIsNotCalled(t *testing.T) {
	s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
	s.MCP.RemoveTools("create_ticket")
	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.Contains(t, out.Suspended.Previews["c1"], "The server no longer offers this tool")
	done := approve(t, r, out.Suspended)
	assert.Contains(t, resultText(t, done.Transcript, "c1").Content, "no longer offers the tool create_ticket")
	assert.Empty(t, s.CallsOf("create_ticket"))
}

// TestAToolListedTwiceIsNotCalled: start-up refuses a listing that offers
// a name twice; a later listing that does (here a read-only copy after the
// write) makes the tool uncallable, whichever copy says what, until the
// server lists it once again: the permissive copy never lets the write run
// unattended.
func TestAToolListedTwiceIsNotCalled(t *testing.T) {
	s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
	s.ListAlso(&mcp.Tool{Name: "create_ticket", Description: "Look a ticket up.", InputSchema: mcptest.ObjectSchema("title"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind, "held, not run at once")
	assert.Contains(t, out.Suspended.Previews["c1"], "The server lists this tool twice")
	done := approve(t, r, out.Suspended)
	assert.Contains(t, resultText(t, done.Transcript, "c1").Content, "lists the tool create_ticket twice; it was not called")
	assert.Empty(t, s.CallsOf("create_ticket"))

	s.ListAlso()
	out = start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind, "listed once again: a write, held")
	done = approve(t, r, out.Suspended)
	assert.Equal(t, loop.ReasonCompleted, done.Reason)
	assert.Len(t, s.CallsOf("create_ticket"), 1, "and called once approved")
}

// TestAListingThatFailsAsTheTurnIsHeldIsNotedOnTheCall: the server is down
// when the turn is held; the call is held on the definition the process
// listed before, and says why the server could not be asked and when that
// definition was listed. A listing that succeeds leaves no note, and the
// resume asks the server again as before.
func TestAListingThatFailsAsTheTurnIsHeldIsNotedOnTheCall(t *testing.T) {
	t.Run("down since start-up", func(t *testing.T) {
		before := time.Now()
		s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
		opened := time.Now()
		s.Close()

		out := start(t, r)
		require.Equal(t, loop.OutcomeSuspended, out.Kind, "held on the definition listed at start-up")
		held := out.Suspended.PendingCalls[0]
		require.NotNil(t, held.DefinitionUnverified, "the approver is told")
		assert.Equal(t, "the connection was refused", held.DefinitionUnverified.Reason)
		at := held.DefinitionUnverified.ListedAt
		assert.False(t, at.Before(before) || at.After(opened), "listed at start-up: got %s, want between %s and %s", at, before, opened)
		assert.NotContains(t, held.DefinitionUnverified.Reason, strings.TrimPrefix(s.URL, "http://"))
		assert.Contains(t, out.Suspended.Previews["c1"], "Description: Open a support ticket.", "the preview is of the definition listed before")

		done := approve(t, r, out.Suspended)
		assert.Equal(t, loop.ReasonCompleted, done.Reason)
		assert.Contains(t, resultText(t, done.Transcript, "c1").Content, "MCP server crm could not be reached (the connection was refused)", "the resume asks again")
	})
	t.Run("down after a later listing", func(t *testing.T) {
		s, _, r := ticketProcess(t, `{"title":"printer on fire"}`)
		before := time.Now()
		healthy := start(t, r)
		listed := time.Now()
		require.Equal(t, loop.OutcomeSuspended, healthy.Kind)
		assert.Nil(t, healthy.Suspended.PendingCalls[0].DefinitionUnverified, "a listing that succeeds leaves no note")

		s.Close()
		out := start(t, r)
		require.Equal(t, loop.OutcomeSuspended, out.Kind)
		u := out.Suspended.PendingCalls[0].DefinitionUnverified
		require.NotNil(t, u)
		assert.False(t, u.ListedAt.Before(before) || u.ListedAt.After(listed), "listed when the first turn was held: got %s, want between %s and %s", u.ListedAt, before, listed)
	})
}

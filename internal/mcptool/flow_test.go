package mcptool_test

// The approval gate around remote tools, through the loop: a scripted model
// calls the test server's tools; the server counts what arrives.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// script plays assistant turns by counting the assistant messages so far.
func script(turns ...loop.Message) loop.Model {
	return loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == loop.RoleAssistant {
				n++
			}
		}
		if n >= len(turns) {
			return loop.ModelResponse{}, fmt.Errorf("script ended")
		}
		stop := loop.StopEndTurn
		if len(turns[n].ToolUses()) > 0 {
			stop = loop.StopToolUse
		}
		return loop.ModelResponse{Message: turns[n], StopReason: stop}, nil
	})
}

func turn(blocks ...loop.Block) loop.Message {
	return loop.Message{Role: loop.RoleAssistant, Content: blocks}
}

func call(id, name, input string) loop.Block {
	return loop.ToolUseBlock(id, name, json.RawMessage(input))
}

func runner(t *testing.T, tb *loop.Toolbox, turns ...loop.Message) *loop.Runner {
	t.Helper()
	n := 0
	return &loop.Runner{Model: script(turns...), Tools: tb, NewID: func() string { n++; return fmt.Sprintf("s%d", n) }}
}

func start(t *testing.T, r *loop.Runner) loop.Outcome {
	t.Helper()
	out, err := r.Run(context.Background(), loop.Request{RunID: "run-1", Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText("help the customer")}}})
	require.NoError(t, err)
	return out
}

func resultText(t *testing.T, tr loop.Transcript, callID string) loop.Block {
	t.Helper()
	for _, m := range tr.Messages {
		for _, b := range m.Content {
			if b.Type == loop.BlockToolResult && b.ToolUseID == callID {
				return b
			}
		}
	}
	t.Fatalf("no result for %s", callID)
	return loop.Block{}
}

// heldTicket runs a turn that reads a customer (runs at once) and then a
// turn that opens a ticket (unannotated: suspends).
func heldTicket(t *testing.T) (*mcptest.Server, *mcptool.Catalog, *loop.Runner, *loop.SuspendedState) {
	t.Helper()
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	r := runner(t, toolbox(t, c),
		turn(call("f1", "crm__find_customer", `{"query":"acme"}`)),
		turn(call("c1", "crm__create_ticket", `{"title":"printer on fire"}`)),
		turn(loop.TextBlock("ticket opened")))
	out := start(t, r)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.Len(t, s.CallsOf("find_customer"), 1, "the read ran at once")
	assert.Contains(t, resultText(t, out.Transcript, "f1").Content, "customer 42")
	assert.Empty(t, s.CallsOf("create_ticket"), "the unannotated tool waits for approval")
	require.Len(t, out.Suspended.PendingCalls, 1)
	assert.True(t, out.Suspended.PendingCalls[0].NeedsApproval)
	assert.Contains(t, out.Suspended.Previews["c1"], "MCP defaults: the server declares none")
	return s, c, r, out.Suspended
}

func TestApproveRunsTheCallExactlyOnceWithItsIdempotencyKey(t *testing.T) {
	s, _, r, st := heldTicket(t)
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	calls := s.CallsOf("create_ticket")
	require.Len(t, calls, 1)
	assert.Equal(t, "run-1/s1/c1", calls[0].IdempotencyKey)
	assert.JSONEq(t, `{"title":"printer on fire"}`, string(calls[0].Arguments))
	assert.Equal(t, "ticket T-1 created", resultText(t, out.Transcript, "c1").Content)
}

func TestDenyRunsNothing(t *testing.T) {
	s, _, r, st := heldTicket(t)
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionDeny, Message: "not now"})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Empty(t, s.CallsOf("create_ticket"))
	assert.Contains(t, resultText(t, out.Transcript, "c1").Content, "denied by the approver: not now")
}

func TestEditSendsTheEditedArguments(t *testing.T) {
	s, _, r, st := heldTicket(t)
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "c1", Action: loop.ActionEdit, Input: json.RawMessage(`{"title":"x","extra":1}`)}}})
	require.ErrorIs(t, err, loop.ErrInvalidDecision, "edits are validated against the server's input schema")
	assert.Empty(t, s.CallsOf("create_ticket"))

	_, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "c1", Action: loop.ActionEdit, Input: json.RawMessage(`{"title":"printer smoking"}`)}}})
	require.NoError(t, err)
	calls := s.CallsOf("create_ticket")
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"title":"printer smoking"}`, string(calls[0].Arguments))
}

func TestASchemaChangedWhileWaitingRefusesTheResume(t *testing.T) {
	changed := &mcp.Tool{Name: "create_ticket", Description: "Open a support ticket.", InputSchema: mcptest.ObjectSchema("title", "priority")}
	t.Run("same process (listing re-checked at resume)", func(t *testing.T) {
		s, _, r, st := heldTicket(t)
		s.AddTool(changed, mcptest.Text("ticket T-2 created"))
		out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.ErrorIs(t, err, loop.ErrToolChanged)
		assert.Contains(t, err.Error(), `tool "crm__create_ticket" (call c1) is not what the approver reviewed: its server's definition of it now differs from the one the call was held with`)
		assert.Empty(t, out.Trace)
		assert.Empty(t, s.CallsOf("create_ticket"))
	})
	t.Run("new process (fresh catalog)", func(t *testing.T) {
		s, _, r, st := heldTicket(t)
		s.AddTool(changed, mcptest.Text("ticket T-2 created"))
		fresh := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
		r.Tools = toolbox(t, fresh)
		_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.ErrorIs(t, err, loop.ErrToolChanged)
		assert.Empty(t, s.CallsOf("create_ticket"))
	})
	t.Run("annotations changed", func(t *testing.T) {
		s, _, r, st := heldTicket(t)
		s.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Open a support ticket.", InputSchema: mcptest.ObjectSchema("title"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: mcptest.Bool(false)}}, mcptest.Text("x"))
		_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.ErrorIs(t, err, loop.ErrToolChanged)
		assert.Empty(t, s.CallsOf("create_ticket"))
	})
	t.Run("a reworded description is not a change", func(t *testing.T) {
		s, _, r, st := heldTicket(t)
		s.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Opens a ticket.", InputSchema: mcptest.ObjectSchema("title")}, mcptest.Text("ok"))
		_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.NoError(t, err)
		assert.Len(t, s.CallsOf("create_ticket"), 1)
	})
	t.Run("removed tool", func(t *testing.T) {
		s, _, r, st := heldTicket(t)
		s.MCP.RemoveTools("create_ticket")
		_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
		require.ErrorIs(t, err, loop.ErrToolChanged)
	})
}

func TestServerDownAtResumeRunsNothingAndTellsTheModel(t *testing.T) {
	s, _, r, st := heldTicket(t)
	s.Close()
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	res := resultText(t, out.Transcript, "c1")
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "MCP server crm could not be reached (the connection was refused)")
	assert.NotContains(t, res.Content, strings.TrimPrefix(s.URL, "http://"), "the model is not told the server's address")
}

package main

// `serve --tools`: MCP servers' tools behind the approval gate, end to end
// through the local server (API, in-process worker, embedded store) against
// the in-process test MCP server, which counts the calls that arrive.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// ticketScript reads a customer (runs at once), opens a ticket (needs
// approval), then finishes.
const ticketScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_find", "name": "crm__find_customer", "input": {"query": "acme"}}]},
  {"content": [{"type": "tool_use", "id": "toolu_ticket", "name": "crm__create_ticket", "input": {"title": "printer on fire"}}]},
  {"content": [{"type": "text", "text": "Ticket opened."}]}
]}`

func ticketServer(t *testing.T) *mcptest.Server {
	t.Helper()
	s := mcptest.New(t, mcptest.Options{MetaKey: mcptool.IdempotencyKeyMeta})
	s.AddTool(&mcp.Tool{Name: "find_customer", Description: "Find a customer.", InputSchema: mcptest.ObjectSchema("query"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("customer 42: ACME Ltd"))
	s.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Open a support ticket.", InputSchema: mcptest.ObjectSchema("title")},
		mcptest.Text("ticket T-1 created"))
	return s
}

// startToolServer runs `serve` as startLocal does, with --tools naming the
// given servers and --model the script.
func startToolServer(t *testing.T, script string, servers ...mcptool.Server) (*localServer, *apiClient, *apiClient) {
	t.Helper()
	return startToolServerAt(t, script, nil, servers...)
}

// startToolServerAt is startToolServer on the clock now (nil: the wall clock).
func startToolServerAt(t *testing.T, script string, now func() time.Time, servers ...mcptool.Server) (*localServer, *apiClient, *apiClient) {
	t.Helper()
	dir := t.TempDir()
	raw, err := json.Marshal(mcptool.File{Servers: servers})
	require.NoError(t, err)
	toolsPath := filepath.Join(dir, "tools.json")
	require.NoError(t, os.WriteFile(toolsPath, raw, 0o600))
	logs := &syncBuffer{}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: "scripted:" + writeScript(t, dir, script), tools: toolsPath,
		tokens: linkTokens, mailOut: &syncBuffer{}, logger: slog.New(slog.NewJSONHandler(logs, nil)), now: now,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return s, &apiClient{t: t, base: s.URL, token: linkAliceToken}, &apiClient{t: t, base: s.URL, token: linkBobToken}
}

func startTicketRun(t *testing.T, alice *apiClient) runJSON {
	t.Helper()
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "the printer is on fire", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	return alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
}

func TestServeToolsGatesAnMCPServer(t *testing.T) {
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})

	run := startTicketRun(t, alice)
	assert.Len(t, crm.CallsOf("find_customer"), 1, "the trusted read-only tool ran at once")
	assert.Empty(t, crm.CallsOf("create_ticket"), "the unannotated tool waits")
	require.NotNil(t, run.Pending)
	require.Len(t, run.Pending.Calls, 1)
	call := run.Pending.Calls[0]
	assert.Equal(t, "crm__create_ticket", call.Tool)
	assert.True(t, call.NeedsApproval)
	assert.Contains(t, call.Preview, `MCP tool "create_ticket" on server "crm" (Test CRM)`)
	assert.Contains(t, call.Preview, "destructive=true idempotent=false openWorld=true")
	assert.Contains(t, call.Preview, "\"title\": \"printer on fire\"")

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Ticket opened.")

	calls := crm.CallsOf("create_ticket")
	require.Len(t, calls, 1, "exactly one call")
	assert.Equal(t, run.ID+"/"+run.Pending.SuspensionID+"/toolu_ticket", calls[0].IdempotencyKey)
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "crm__create_ticket"))
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "crm__find_customer"))
}

func TestServeToolsDenyAndEdit(t *testing.T) {
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})

	denied := startTicketRun(t, alice)
	bob.do(http.MethodPost, "/runs/"+denied.ID+"/decision", map[string]any{"turn_digest": denied.Pending.TurnDigest, "action": "deny", "message": "call the fire brigade"}, http.StatusAccepted, nil)
	alice.waitStatus(denied.ID, "COMPLETED")
	assert.Empty(t, crm.CallsOf("create_ticket"), "deny: zero calls")

	edited := startTicketRun(t, alice)
	bob.do(http.MethodPost, "/runs/"+edited.ID+"/decision", map[string]any{"turn_digest": edited.Pending.TurnDigest, "calls": []map[string]any{
		{"call_id": "toolu_ticket", "action": "edit", "input": map[string]any{"title": "printer on fire", "priority": "high"}}}}, http.StatusUnprocessableEntity, nil)
	bob.do(http.MethodPost, "/runs/"+edited.ID+"/decision", map[string]any{"turn_digest": edited.Pending.TurnDigest, "calls": []map[string]any{
		{"call_id": "toolu_ticket", "action": "edit", "input": map[string]any{"title": "printer smoking"}}}}, http.StatusAccepted, nil)
	alice.waitStatus(edited.ID, "COMPLETED")
	calls := crm.CallsOf("create_ticket")
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"title":"printer smoking"}`, string(calls[0].Arguments))
}

func TestServeToolsRefusesAToolThatChangedWhileTheRunWaited(t *testing.T) {
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})
	run := startTicketRun(t, alice)
	crm.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Open a support ticket.", InputSchema: mcptest.ObjectSchema("title", "assignee")},
		mcptest.Text("ticket T-9 created"))

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	failed := alice.waitStatus(run.ID, "FAILED")
	assert.Equal(t, "tool_changed", failed.Reason)
	assert.Contains(t, string(failed.Output), `crm__create_ticket`)
	assert.Contains(t, string(failed.Output), "is not what the approver reviewed: its server's definition of it now differs from the one the call was held with")
	assert.Empty(t, crm.CallsOf("create_ticket"), "nothing ran")
}

func TestServeToolsHoldsARunOnADefinitionChangedBeforeItStarted(t *testing.T) {
	// The outside tester's story: the server adds an optional property
	// after serve listed it; every later run used to be refused at resume.
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})
	crm.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Open a support ticket, optionally with a priority.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"priority":{"type":"string"}},"required":["title"],"additionalProperties":false}`)},
		mcptest.Text("ticket T-5 created"))

	for i := range 2 {
		run := startTicketRun(t, alice)
		require.Len(t, run.Pending.Calls, 1)
		assert.Contains(t, run.Pending.Calls[0].Preview, "optionally with a priority", "approvers see the definition the server has now")
		bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
		done := alice.waitStatus(run.ID, "COMPLETED")
		assert.Contains(t, string(done.Output), "Ticket opened.")
		assert.Len(t, crm.CallsOf("create_ticket"), i+1)
	}
}

func TestServeToolsNeverSendsAWriteTwiceAfterItsOutcomeWasLost(t *testing.T) {
	crm := ticketServer(t)
	s, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})
	run := startTicketRun(t, alice)
	crm.DropCallsOf("create_ticket", 1) // the call arrives, then the connection dies

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	failed := alice.waitStatus(run.ID, "FAILED")
	assert.Equal(t, "interrupted_write", failed.Reason)
	_, err := s.App.Sweeper.Sweep(context.Background())
	require.NoError(t, err)
	s.Dispatcher.Wait()
	assert.Len(t, crm.CallsOf("create_ticket"), 1, "never a second call")
	assert.Equal(t, "FAILED", alice.run(run.ID).Status)
}

func TestServeToolsWithAServerDownAtStartUp(t *testing.T) {
	crm := ticketServer(t)
	down := mcptest.New(t, mcptest.Options{})
	down.Close()
	_, alice, _ := startToolServer(t, ticketScript,
		mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true},
		mcptool.Server{Name: "billing", URL: down.URL})

	var errBody struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "refund", "approvers": []string{"bob"},
		"allowed_tools": []string{"crm__find_customer", "billing__refund"}}, http.StatusUnprocessableEntity, &errBody)
	assert.Contains(t, errBody.Error.Message, `tool "billing__refund" is unavailable: MCP server billing was unavailable when this process started`)

	// The other server's tools work.
	run := startTicketRun(t, alice)
	assert.True(t, strings.HasPrefix(run.Pending.Calls[0].Tool, "crm__"))
}

func TestServeToolsRecordsWhyAnApprovedCallOfADownServerDidNotRun(t *testing.T) {
	// The outside tester's story: the MCP server is killed while the run
	// waits, then the held call is approved. Its tool_executed event names
	// the rule, as every other call's does, and says it was not run and
	// why, without the server's address.
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, ticketScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})
	run := startTicketRun(t, alice)
	crm.Close()

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.waitStatus(run.ID, "COMPLETED")
	assert.Empty(t, crm.CallsOf("create_ticket"), "nothing ran")

	var got map[string]any
	for _, e := range eventsOf(alice.events(run.ID), "tool_executed") {
		var d map[string]any
		require.NoError(t, json.Unmarshal(e.Data, &d))
		assert.Equal(t, "default", d["rule"], "every call's event names its rule: %s", e.Data)
		if d["call_id"] == "toolu_ticket" {
			got = d
		}
	}
	require.NotNil(t, got, "the approved call has its event")
	assert.Equal(t, true, got["is_error"])
	assert.Equal(t, "approve", got["action"])
	detail, _ := got["detail"].(string)
	assert.True(t, strings.HasPrefix(detail, "not run: crm__create_ticket could not be run or its current definition confirmed here (MCP server crm could not be reached"), "got detail %q", detail)
	host := strings.TrimPrefix(strings.TrimPrefix(crm.URL, "http://"), "https://")
	host = strings.SplitN(host, "/", 2)[0]
	assert.NotContains(t, detail, host, "never the server's address")
	assert.NotContains(t, got, "effect", "nothing took effect")
}

package main

// `serve --tools` in a process that lives on: an MCP server that was down
// when serve started is tried again when a run needs its tools (at most
// once per interval) and its tools are offered from then on, without a
// restart; a tool a server adds later is offered once a listing sees it,
// gated by the tool-sources file, and a server that sets
// list_every_seconds is listed on its own.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// refundScript refunds an order (a write: held), then finishes.
const refundScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_refund", "name": "billing__refund", "input": {"order": "7"}}]},
  {"content": [{"type": "text", "text": "Refunded."}]}
]}`

type errorJSON struct {
	Error struct{ Code, Message string } `json:"error"`
}

func TestServeToolsListsAServerThatWasDownAtStartUp(t *testing.T) {
	billing := mcptest.New(t, mcptest.Options{MetaKey: mcptool.IdempotencyKeyMeta})
	billing.AddTool(&mcp.Tool{Name: "refund", Description: "Refund an order.", InputSchema: mcptest.ObjectSchema("order")}, mcptest.Text("refund R-1 done"))
	billing.Close()
	host := strings.TrimPrefix(strings.TrimSuffix(billing.URL, "/mcp"), "http://")
	clock := clocktest.New(time.Now())
	_, alice, bob := startToolServerAt(t, refundScript, clock.Now, mcptool.Server{Name: "billing", URL: billing.URL})
	refund := map[string]any{"prompt": "refund order 7", "approvers": []string{"bob"}, "allowed_tools": []string{"billing__refund"}}

	// Down: refused, with when it is tried again, never the address.
	var refused errorJSON
	alice.do(http.MethodPost, "/runs", refund, http.StatusUnprocessableEntity, &refused)
	assert.Contains(t, refused.Error.Message, `tool "billing__refund" is unavailable: MCP server billing was unavailable when this process started (the connection was refused); it is tried again when a run needs its tools, at most every 30s`)
	assert.NotContains(t, refused.Error.Message, host)

	// Up, within the interval of the start-up attempt: not asked yet.
	billing.Restart(t)
	clock.Advance(20 * time.Second)
	alice.do(http.MethodPost, "/runs", refund, http.StatusUnprocessableEntity, nil)
	assert.Zero(t, billing.Conns(), "the server is not asked within the interval")

	// Past it: the run that needs the server connects; its call is held
	// (a write), approved and sent once. No restart.
	clock.Advance(11 * time.Second)
	var run runJSON
	alice.do(http.MethodPost, "/runs", refund, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	require.Len(t, run.Pending.Calls, 1)
	assert.Equal(t, "billing__refund", run.Pending.Calls[0].Tool)
	assert.True(t, run.Pending.Calls[0].NeedsApproval)
	assert.Empty(t, billing.CallsOf("refund"))
	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Refunded.")
	assert.Len(t, billing.CallsOf("refund"), 1)

	// A run that may call every tool is offered it too.
	var all runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "refund order 7", "approvers": []string{"bob"}}, http.StatusAccepted, &all)
	all = alice.waitStatus(all.ID, "WAITING_FOR_APPROVAL")
	assert.Equal(t, "billing__refund", all.Pending.Calls[0].Tool)
}

// newToolsScript calls a tool the server had at start-up and three it adds
// later; the first run holds the turn (a listing), the second is offered
// what that listing found.
const newToolsScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_ticket", "name": "crm__create_ticket", "input": {"title": "printer on fire"}},
               {"type": "tool_use", "id": "toolu_refund", "name": "crm__refund_customer", "input": {"customer": "42"}},
               {"type": "tool_use", "id": "toolu_export", "name": "crm__export_customers", "input": {}},
               {"type": "tool_use", "id": "toolu_drop", "name": "crm__drop_customers", "input": {}}]},
  {"content": [{"type": "text", "text": "Done."}]}
]}`

type heldCallJSON struct {
	ID            string `json:"id"`
	Tool          string `json:"tool"`
	NeedsApproval bool   `json:"needs_approval"`
	Rejected      string `json:"rejected"`
}

func heldCalls(t *testing.T, c *apiClient, id string) map[string]heldCallJSON {
	t.Helper()
	var run struct {
		Pending struct {
			Calls []heldCallJSON `json:"calls"`
		} `json:"pending"`
	}
	c.do(http.MethodGet, "/runs/"+id, nil, http.StatusOK, &run)
	out := map[string]heldCallJSON{}
	for _, pc := range run.Pending.Calls {
		out[pc.Tool] = pc
	}
	return out
}

func TestServeToolsOffersToolsTheServerAddsLaterGatedByTheFile(t *testing.T) {
	crm := ticketServer(t)
	_, alice, bob := startToolServer(t, newToolsScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true,
		Exclude: []string{"drop_customers"}, Approval: map[string]mcptool.Approval{"export_customers": "always"}})
	// Added after serve listed the server: a write, a read the file says
	// always to ask about, and a read the file excludes.
	crm.AddTool(&mcp.Tool{Name: "refund_customer", Description: "Refund a customer.", InputSchema: mcptest.ObjectSchema("customer")},
		mcptest.Text("refunded"))
	crm.AddTool(&mcp.Tool{Name: "export_customers", Description: "Export every customer.", InputSchema: mcptest.ObjectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("exported"))
	crm.AddTool(&mcp.Tool{Name: "drop_customers", Description: "Delete every customer.", InputSchema: mcptest.ObjectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("dropped"))

	// The first run's turn is held on create_ticket: that listing sees the
	// new tools, which this run was not offered.
	first := startTicketRun(t, alice)
	calls := heldCalls(t, alice, first.ID)
	assert.Contains(t, calls["crm__refund_customer"].Rejected, `unknown tool "crm__refund_customer"`)
	bob.do(http.MethodPost, "/runs/"+first.ID+"/decision", map[string]any{"turn_digest": first.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.waitStatus(first.ID, "COMPLETED")

	// The next run is offered them, gated by the file: held, not run.
	second := startTicketRun(t, alice)
	calls = heldCalls(t, alice, second.ID)
	for _, tool := range []string{"crm__create_ticket", "crm__refund_customer", "crm__export_customers"} {
		assert.True(t, calls[tool].NeedsApproval, "%s needs approval", tool)
		assert.Empty(t, calls[tool].Rejected, tool)
	}
	assert.Contains(t, calls["crm__drop_customers"].Rejected, `unknown tool "crm__drop_customers"`, "excluded: never offered")
	assert.Empty(t, crm.CallsOf("refund_customer"), "a new write waits")
	assert.Empty(t, crm.CallsOf("export_customers"), "a new read the file says always to ask about waits")

	bob.do(http.MethodPost, "/runs/"+second.ID+"/decision", map[string]any{"turn_digest": second.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.waitStatus(second.ID, "COMPLETED")
	assert.Len(t, crm.CallsOf("refund_customer"), 1, "sent once approved")
	assert.Len(t, crm.CallsOf("export_customers"), 1)
	assert.Empty(t, crm.CallsOf("drop_customers"))
}

func TestServeToolsAcceptsARunNamingAToolTheServerAddedLater(t *testing.T) {
	crm := ticketServer(t)
	_, alice, _ := startToolServer(t, newToolsScript, mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true})
	crm.AddTool(&mcp.Tool{Name: "refund_customer", Description: "Refund a customer.", InputSchema: mcptest.ObjectSchema("customer")},
		mcptest.Text("refunded"))
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "refund", "approvers": []string{"bob"},
		"allowed_tools": []string{"crm__create_ticket", "crm__refund_customer"}}, http.StatusAccepted, &run)
	alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	calls := heldCalls(t, alice, run.ID)
	assert.True(t, calls["crm__refund_customer"].NeedsApproval)
	assert.Empty(t, calls["crm__refund_customer"].Rejected)
	assert.Empty(t, crm.CallsOf("refund_customer"))
}

// crmRefundScript calls a tool the CRM server adds after serve started.
const crmRefundScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_refund", "name": "crm__refund", "input": {"order": "7"}}]},
  {"content": [{"type": "text", "text": "Refunded."}]}
]}`

func TestServeListsAServerOnItsOwnAndStopsWhenItCloses(t *testing.T) {
	crm := ticketServer(t)
	dir := t.TempDir()
	raw, err := json.Marshal(mcptool.File{Servers: []mcptool.Server{{Name: "crm", URL: crm.URL, TrustAnnotations: true, ListEverySeconds: 1}}})
	require.NoError(t, err)
	toolsPath := filepath.Join(dir, "tools.json")
	require.NoError(t, os.WriteFile(toolsPath, raw, 0o600))
	logs := &syncBuffer{}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: "scripted:" + writeScript(t, dir, crmRefundScript), tools: toolsPath,
		tokens: linkTokens, mailOut: &syncBuffer{}, logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			assert.NoError(t, s.Close())
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	alice, bob := &apiClient{t: t, base: s.URL, token: linkAliceToken}, &apiClient{t: t, base: s.URL, token: linkBobToken}

	// The server adds a tool; no run names it, yet the process lists the
	// server on its own and offers it to a run without allowed_tools.
	crm.AddTool(&mcp.Tool{Name: "refund", Description: "Refund an order.", InputSchema: mcptest.ObjectSchema("order")}, mcptest.Text("refunded"))
	assert.Eventually(t, func() bool { return slices.Contains(s.App.Tools.Names(), "crm__refund") }, time.Minute, 20*time.Millisecond,
		"serve lists the server on its own")
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "refund order 7", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	require.Len(t, run.Pending.Calls, 1)
	assert.Equal(t, "crm__refund", run.Pending.Calls[0].Tool, "the new tool is gated as the file says: a write, held")
	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	alice.waitStatus(run.ID, "COMPLETED")
	assert.Len(t, crm.CallsOf("refund"), 1)

	// Closed: the background listing has stopped with it.
	closed = true
	require.NoError(t, s.Close())
	lists := crm.Lists()
	time.Sleep(1500 * time.Millisecond)
	assert.Equal(t, lists, crm.Lists(), "nothing lists the server after serve closed")
}

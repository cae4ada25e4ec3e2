//go:build integration

package main

// The MCP reference server (@modelcontextprotocol/server-everything, pinned
// in tools/npm) behind the approval gate of the local server: its tools are
// listed and gated, a scripted model calls one read-only tool (runs at
// once) and one that is not read-only (waits), the approval goes through
// the API, and the server's real answers reach the model.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/gateway"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/nodeserver"
	"github.com/agentgate/agentgate/internal/provider/scripted"
)

// everythingScript is the scripted model README's "Try it with the MCP
// reference server" runs: add 2 and 3, toggle simulated logging, finish.
const everythingScript = "../../examples/mcp-everything-script.json"

func startEverything(t *testing.T) string {
	t.Helper()
	bin := nodeserver.Bin(t, "mcp-server-everything")
	return nodeserver.Start(t, bin, "", nil, "streamableHttp") + "/mcp"
}

func TestEverythingServerBehindTheGate(t *testing.T) {
	url := startEverything(t)
	dir := t.TempDir()
	toolsPath := filepath.Join(dir, "tools.json")
	require.NoError(t, os.WriteFile(toolsPath, []byte(`{"servers": [{"name": "everything", "url": "`+url+`",
	  "trust_annotations": true, "timeout_seconds": 20,
	  "exclude": ["trigger-long-running-operation"],
	  "approval": {"get-env": "always"}}]}`), 0o600))
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	file, err := readServeTools(toolsPath, logger, nil)
	require.NoError(t, err)
	catalog, err := openServeTools(context.Background(), toolsPath, file, logger, nil)
	require.NoError(t, err)
	require.Empty(t, catalog.Absent())

	// What the gate makes of the reference server's tools.
	tb, err := loop.NewToolbox(catalog.Tools()...)
	require.NoError(t, err)
	gated := map[string]string{}
	for _, name := range tb.Names() {
		tl, _ := tb.Lookup(name)
		d := tl.Definition()
		switch {
		case d.RequiresApproval:
			gated[name] = "approval (override always)"
		case d.Effect == loop.EffectRead:
			gated[name] = "read"
		default:
			gated[name] = "approval"
		}
	}
	t.Logf("reference server tools as gated: %v", gated)
	assert.Equal(t, "read", gated["everything__get-sum"])
	assert.Equal(t, "read", gated["everything__echo"])
	assert.Equal(t, "approval (override always)", gated["everything__get-env"])
	assert.Equal(t, "approval", gated["everything__toggle-simulated-logging"])
	assert.Equal(t, "approval", gated["everything__gzip-file-as-resource"])
	assert.NotContains(t, gated, "everything__trigger-long-running-operation", "excluded")

	// Content kinds: an image becomes a summary, structured content JSON,
	// an embedded resource its text.
	for tool, want := range map[string]string{
		"everything__get-tiny-image":         "[image: image/png,",
		"everything__get-structured-content": `"temperature"`,
		"everything__get-resource-reference": "[embedded resource demo://resource/dynamic/text/1, text/plain]",
	} {
		tl, ok := tb.Lookup(tool)
		require.True(t, ok, tool)
		in := json.RawMessage(`{}`)
		if tool == "everything__get-structured-content" {
			in = json.RawMessage(`{"location":"Chicago"}`)
		}
		res, err := tl.Call(context.Background(), in)
		require.NoError(t, err, tool)
		assert.False(t, res.IsError, "%s: %s", tool, res.Content)
		assert.Contains(t, res.Content, want, tool)
	}

	model := &recordingModel{model: must(scripted.Parse(must(os.ReadFile(everythingScript))))}
	alice, bob := serveApp(t, dir, model, catalog, logs)

	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "add 2 and 3, then turn on logging", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	sum := model.toolResults("toolu_sum")
	require.Len(t, sum, 1, "the read-only tool ran before the suspension")
	assert.Contains(t, sum[0].Content, "The sum of 2 and 3 is 5")
	require.Len(t, run.Pending.Calls, 1)
	assert.Equal(t, "everything__toggle-simulated-logging", run.Pending.Calls[0].Tool)
	assert.Contains(t, run.Pending.Calls[0].Preview, "Everything Reference Server")
	assert.Contains(t, run.Pending.Calls[0].Preview, "needs approval: not read-only")
	assert.Contains(t, run.Pending.Calls[0].Preview, "destructive=false idempotent=false openWorld=false readOnly=false")

	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Finished. I added 2 and 3")
	toggled := model.toolResults("toolu_log")
	require.NotEmpty(t, toggled)
	assert.False(t, toggled[0].IsError, toggled[0].Content)
	assert.Contains(t, toggled[0].Content, "logging")
	t.Logf("the server's answers: %q, %q", sum[0].Content, toggled[0].Content)
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "everything__toggle-simulated-logging"))
}

// serveApp serves the local application with the given model and tool
// sources as `serve` does (app.OpenLocal behind the gateway).
func serveApp(t *testing.T, dir string, model loop.Model, catalog *mcptool.Catalog, logs *syncBuffer) (*apiClient, *apiClient) {
	t.Helper()
	seedDemoDocuments(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: model, ToolSources: catalog, BaseURL: url, MailOut: &syncBuffer{}, Logger: logger})
	require.NoError(t, err)
	srv := &http.Server{Handler: &gateway.Gateway{StartRun: local.API.Handle, Resume: local.API.Handle, Tokens: linkTokens, Logger: logger},
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		local.Dispatcher.Wait()
		assert.NoError(t, local.Close())
		assert.NoError(t, catalog.Close())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &apiClient{t: t, base: url, token: linkAliceToken}, &apiClient{t: t, base: url, token: linkBobToken}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// sumScript adds two numbers with the reference server's read-only tool.
const sumScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_sum", "name": "everything__get-sum", "input": {"a": 2, "b": 3}}]},
  {"content": [{"type": "text", "text": "Sum computed."}]}
]}`

// TestEverythingServerDownAtStartUpJoinsLater: serve starts while the
// reference server is down; once it is up and the retry interval has
// passed, a run that names its tool connects to it and runs it, in the
// same serve process.
func TestEverythingServerDownAtStartUpJoinsLater(t *testing.T) {
	bin := nodeserver.Bin(t, "mcp-server-everything")
	// The reference server, started after serve, stops after it (serve
	// ends its session with the server when it stops).
	last := &cleanupLast{TB: t}
	t.Cleanup(last.run)
	port := nodeserver.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	clock := clocktest.New(time.Now())
	_, alice, _ := startToolServerAt(t, sumScript, clock.Now, mcptool.Server{Name: "everything", URL: url, TrustAnnotations: true, TimeoutSeconds: 20})
	sum := map[string]any{"prompt": "add 2 and 3", "approvers": []string{"bob"}, "allowed_tools": []string{"everything__get-sum"}}

	var refused errorJSON
	alice.do(http.MethodPost, "/runs", sum, http.StatusUnprocessableEntity, &refused)
	assert.Contains(t, refused.Error.Message, `tool "everything__get-sum" is unavailable: MCP server everything was unavailable when this process started (the connection was refused)`)
	assert.NotContains(t, refused.Error.Message, fmt.Sprint(port), "never the server's address")

	nodeserver.StartAt(last, port, bin, "", nil, "streamableHttp")
	clock.Advance(mcptool.DefaultRetryInterval)
	var run runJSON
	alice.do(http.MethodPost, "/runs", sum, http.StatusAccepted, &run)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Sum computed.")
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "everything__get-sum"))
}

// TestEverythingServerDownAtStartUpJoinsAfterItsOwnRetryInterval: the
// same story with the server's retry_interval_seconds at 5: a run 5 s
// after start-up (not the default 30 s) connects to the reference server.
func TestEverythingServerDownAtStartUpJoinsAfterItsOwnRetryInterval(t *testing.T) {
	bin := nodeserver.Bin(t, "mcp-server-everything")
	last := &cleanupLast{TB: t}
	t.Cleanup(last.run)
	port := nodeserver.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	clock := clocktest.New(time.Now())
	_, alice, _ := startToolServerAt(t, sumScript, clock.Now, mcptool.Server{Name: "everything", URL: url, TrustAnnotations: true,
		RetryIntervalSeconds: 5, ConnectTimeoutSeconds: 8})
	sum := map[string]any{"prompt": "add 2 and 3", "approvers": []string{"bob"}, "allowed_tools": []string{"everything__get-sum"}}

	var refused errorJSON
	alice.do(http.MethodPost, "/runs", sum, http.StatusUnprocessableEntity, &refused)
	assert.Contains(t, refused.Error.Message, "it is tried again when a run needs its tools, at most every 5s")

	nodeserver.StartAt(last, port, bin, "", nil, "streamableHttp")
	clock.Advance(4 * time.Second)
	alice.do(http.MethodPost, "/runs", sum, http.StatusUnprocessableEntity, nil)
	clock.Advance(time.Second)
	var run runJSON
	alice.do(http.MethodPost, "/runs", sum, http.StatusAccepted, &run)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Sum computed.")
}

// TestEverythingServerIsListedOnItsOwn: with list_every_seconds the
// local server tries the reference server, down when it started, on its
// own: its tools join with no run asking (a run would not try it again
// within the 30 s retry interval), and a run naming one is accepted and
// runs it.
func TestEverythingServerIsListedOnItsOwn(t *testing.T) {
	bin := nodeserver.Bin(t, "mcp-server-everything")
	last := &cleanupLast{TB: t}
	t.Cleanup(last.run)
	port := nodeserver.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	s, alice, _ := startToolServerAt(t, sumScript, nil, mcptool.Server{Name: "everything", URL: url, TrustAnnotations: true,
		ListEverySeconds: 1})
	require.Len(t, s.tools.Absent(), 1, "down at start-up")

	nodeserver.StartAt(last, port, bin, "", nil, "streamableHttp")
	assert.Eventually(t, func() bool { return len(s.tools.Absent()) == 0 }, time.Minute, 50*time.Millisecond,
		"listed with no run asking")
	assert.Contains(t, s.App.Tools.Names(), "everything__get-sum")

	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "add 2 and 3", "approvers": []string{"bob"},
		"allowed_tools": []string{"everything__get-sum"}}, http.StatusAccepted, &run)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Sum computed.")
	assert.Equal(t, 1, toolExecutions(t, alice.events(run.ID), "everything__get-sum"))
}

// cleanupLast is a test whose cleanups run when run does (register run
// first, so that they run after the test's other cleanups).
type cleanupLast struct {
	testing.TB
	fns []func()
}

func (c *cleanupLast) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanupLast) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
}

// The reference server answers a request on a session it does not know
// (it restarted) with HTTP 400, not the spec's 404. A listing on such a
// session drops it and lists again on a new one: a held call approved
// after a restart runs, once, and a turn held after a restart has its
// definitions confirmed.

// restartableEverything starts the reference server on a port of its
// own, and returns its URL and a function that restarts it there. The
// server running when the test ends stops after serve (serve ends its
// session with the server when it stops).
func restartableEverything(t *testing.T) (string, func()) {
	t.Helper()
	bin := nodeserver.Bin(t, "mcp-server-everything")
	server := &cleanupLast{TB: t}
	t.Cleanup(server.run)
	port := nodeserver.FreePort(t)
	nodeserver.StartAt(server, port, bin, "", nil, "streamableHttp")
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), func() {
		t.Helper()
		server.run()
		server.fns = nil
		nodeserver.StartAt(server, port, bin, "", nil, "streamableHttp")
	}
}

// heldSum starts a run whose one call, get-sum, waits for approval (the
// server's annotations are not trusted), and checks that the held call's
// definition was confirmed.
func heldSum(t *testing.T, alice *apiClient) runJSON {
	t.Helper()
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "add 2 and 3", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	require.Len(t, run.Pending.Calls, 1)
	assert.Equal(t, "everything__get-sum", run.Pending.Calls[0].Tool)
	var raw struct {
		Pending struct {
			Calls []map[string]any `json:"calls"`
		} `json:"pending"`
	}
	alice.do(http.MethodGet, "/runs/"+run.ID, nil, http.StatusOK, &raw)
	require.Len(t, raw.Pending.Calls, 1)
	assert.NotContains(t, raw.Pending.Calls[0], "definition_unverified", "the server listed its tools")
	return run
}

// approveSum approves the held get-sum and checks that it ran, once.
func approveSum(t *testing.T, alice, bob *apiClient, run runJSON) {
	t.Helper()
	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Contains(t, string(done.Output), "Sum computed.")
	evs := alice.events(run.ID)
	assert.Equal(t, 1, toolExecutions(t, evs, "everything__get-sum"))
	for _, e := range eventsOf(evs, "tool_executed") {
		var d struct {
			IsError bool `json:"is_error"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &d))
		assert.False(t, d.IsError, "the approved call ran: %s", e.Data)
	}
}

func TestEverythingServerRestartedWhileARunWaits(t *testing.T) {
	url, restart := restartableEverything(t)
	_, alice, bob := startToolServerAt(t, sumScript, nil, mcptool.Server{Name: "everything", URL: url, TimeoutSeconds: 20})
	run := heldSum(t, alice)
	restart()
	approveSum(t, alice, bob, run)
}

func TestEverythingServerRestartedBeforeATurnIsHeld(t *testing.T) {
	url, restart := restartableEverything(t)
	_, alice, bob := startToolServerAt(t, sumScript, nil, mcptool.Server{Name: "everything", URL: url, TimeoutSeconds: 20})
	restart() // after serve listed it at start-up
	run := heldSum(t, alice)
	approveSum(t, alice, bob, run)
}

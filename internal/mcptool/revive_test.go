package mcptool_test

// A server that was down when the process started is tried again when a
// run needs its tools, at most once per retry interval, and its tools join
// the toolbox for the runs that start afterwards; a tool a server offers in
// a later listing joins it too, gated by the tool-sources file. Runs in
// flight keep the tools they started with.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// initCounter counts the MCP initialize requests a client sends: one per
// attempt to connect to a server, whether or not the server answers.
type initCounter struct{ n atomic.Int32 }

func (c *initCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"method":"initialize"`)) {
			c.n.Add(1)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// downAtStart opens a catalog of a CRM server that is down, on the clock,
// with a toolbox that follows the catalog.
func downAtStart(t *testing.T, clock *clocktest.Clock, o mcptool.Options) (*mcptest.Server, *mcptool.Catalog, *loop.Toolbox) {
	t.Helper()
	s := crmServer(t, mcptest.Options{})
	s.Close()
	o.Now = clock.Now
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), o)
	require.Len(t, c.Absent(), 1)
	tb, err := loop.NewToolboxWithSource(c, echoTool())
	require.NoError(t, err)
	return s, c, tb
}

// echoTool is a builtin read tool beside the remote ones.
func echoTool() loop.Tool {
	return &loop.FuncTool{Def: loop.Definition{Name: "echo", Description: "Echo.", Effect: loop.EffectRead},
		CallFunc: func(_ context.Context, in json.RawMessage) (loop.Result, error) {
			return loop.Result{Content: string(in)}, nil
		}}
}

func findRun(allowed ...string) loop.Request {
	return loop.Request{RunID: "run-1", Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText("find acme")}},
		Options: loop.Options{AllowedTools: allowed}}
}

func TestAServerDownAtStartUpJoinsWhenARunNeedsIt(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 5, 9, 14, 2, 0, time.UTC))
	s, c, tb := downAtStart(t, clock, mcptool.Options{})
	host := strings.TrimPrefix(strings.TrimSuffix(s.URL, "/mcp"), "http://")
	var offered [][]string
	var mu sync.Mutex
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		var names []string
		for _, spec := range req.Tools {
			names = append(names, spec.Name)
		}
		mu.Lock()
		offered = append(offered, names)
		mu.Unlock()
		if len(req.Messages) == 1 && slices.Contains(names, "crm__find_customer") {
			return loop.ModelResponse{Message: turn(call("f1", "crm__find_customer", `{"query":"acme"}`)), StopReason: loop.StopToolUse}, nil
		}
		return loop.ModelResponse{Message: turn(loop.TextBlock("done")), StopReason: loop.StopEndTurn}, nil
	})
	r := &loop.Runner{Model: model, Tools: tb}

	// Down: the run that names the server's tool is refused, and says
	// when the server is tried again.
	_, err := r.Run(context.Background(), findRun("crm__find_customer"))
	require.ErrorIs(t, err, loop.ErrInvalidRequest)
	assert.Contains(t, err.Error(), `tool "crm__find_customer" is unavailable: MCP server crm was unavailable when this process started (the connection was refused); it is tried again when a run needs its tools, at most every 30s`)
	assert.NotContains(t, err.Error(), host, "never the server's address")

	// Up again, but within the interval of the start-up attempt: not tried.
	s.Restart(t)
	clock.Advance(10 * time.Second)
	_, err = r.Run(context.Background(), findRun("crm__find_customer"))
	require.ErrorIs(t, err, loop.ErrInvalidRequest)
	assert.Zero(t, s.Conns(), "the server is not asked within the interval")

	// Past the interval: the run that needs it connects, and runs.
	clock.Advance(21 * time.Second)
	out, err := r.Run(context.Background(), findRun("crm__find_customer"))
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	assert.Len(t, s.CallsOf("find_customer"), 1)
	assert.Empty(t, c.Absent())
	assert.Contains(t, tb.Names(), "crm__create_ticket", "the toolbox follows the catalog")

	// A run that may call every tool is offered them, with no new attempt.
	conns := s.Conns()
	out, err = r.Run(context.Background(), findRun())
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
	mu.Lock()
	last := offered[len(offered)-1]
	mu.Unlock()
	assert.Equal(t, []string{"echo", "crm__close_ticket", "crm__create_ticket", "crm__find_customer", "crm__note_add"}, last)
	assert.Len(t, s.CallsOf("find_customer"), 2)
	assert.Equal(t, 1, s.Lists()-0, "listed once, when it came back (a read that runs at once lists nothing)")
	assert.LessOrEqual(t, s.Conns()-conns, 1, "a present server is not connected to again")
}

func TestARunThatMayCallEveryToolLooksForAnAbsentServer(t *testing.T) {
	clock := clocktest.New(time.Now())
	s, _, tb := downAtStart(t, clock, mcptool.Options{})
	var seen atomic.Value
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		var names []string
		for _, spec := range req.Tools {
			names = append(names, spec.Name)
		}
		seen.Store(names)
		return loop.ModelResponse{Message: turn(loop.TextBlock("done")), StopReason: loop.StopEndTurn}, nil
	})
	r := &loop.Runner{Model: model, Tools: tb}
	_, err := r.Run(context.Background(), findRun())
	require.NoError(t, err)
	assert.Equal(t, []string{"echo"}, seen.Load(), "down: the model sees the other tools")

	s.Restart(t)
	clock.Advance(mcptool.DefaultRetryInterval)
	_, err = r.Run(context.Background(), findRun())
	require.NoError(t, err)
	assert.Contains(t, seen.Load(), "crm__find_customer", "back: the model sees its tools")

	// A run limited to other tools does not look for absent servers.
	_, _, tb2 := downAtStart(t, clock, mcptool.Options{})
	clock.Advance(mcptool.DefaultRetryInterval)
	r2 := &loop.Runner{Model: model, Tools: tb2}
	_, err = r2.Run(context.Background(), findRun("echo"))
	require.NoError(t, err)
	assert.Contains(t, tb2.Missing("crm__find_customer"), "when this process started (the connection was refused); it is", "not tried again")
}

func TestAnAbsentServerIsTriedAtMostOncePerInterval(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 5, 9, 14, 2, 0, time.UTC))
	inits := &initCounter{}
	s, c, tb := downAtStart(t, clock, mcptool.Options{Transport: inits, RetryInterval: time.Minute})
	host := strings.TrimPrefix(strings.TrimSuffix(s.URL, "/mcp"), "http://")
	require.EqualValues(t, 1, inits.n.Load(), "one attempt at start-up")
	seek := func() { tb.Revive(context.Background(), []string{"crm__find_customer"}, false) }

	clock.Advance(59 * time.Second)
	seek()
	tb.Revive(context.Background(), nil, true)
	assert.EqualValues(t, 1, inits.n.Load(), "within the interval of the start-up attempt: not tried")

	clock.Advance(time.Second)
	seek()
	assert.EqualValues(t, 2, inits.n.Load(), "past it: tried once")
	reason := tb.Missing("crm__find_customer")
	assert.Contains(t, reason, "MCP server crm was unavailable when this process started (the connection was refused) and when last tried, at 2026-12-05T09:15:02Z (the connection was refused); it is tried again when a run needs its tools, at most every 1m0s")
	assert.NotContains(t, reason, host)
	seek()
	assert.EqualValues(t, 2, inits.n.Load(), "not again at once")

	// Many runs at once past the interval: one attempt, which they share.
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seek()
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 3, inits.n.Load(), "one attempt for all of them")

	// Names of other tools (a builtin, another server's) ask nothing.
	clock.Advance(time.Minute)
	tb.Revive(context.Background(), []string{"echo", "billing__refund", "read_document"}, false)
	assert.EqualValues(t, 3, inits.n.Load())
	assert.Len(t, c.Absent(), 1)
}

func TestAnAttemptIsBoundedByTheConnectTimeout(t *testing.T) {
	// A server that takes the initialize request and never answers (it
	// takes notifications, so that the SDK's notice of the cancelled
	// request does not hold the attempt up after its timeout).
	hang := make(chan struct{})
	blackHole := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"notifications/`)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		<-hang
	}))
	t.Cleanup(blackHole.Close)
	t.Cleanup(func() { close(hang) })
	clock := clocktest.New(time.Now())
	c := open(t, file(t, mcptool.Server{Name: "slow", URL: blackHole.URL + "/mcp"}), mcptool.Options{Now: clock.Now, ConnectTimeout: 100 * time.Millisecond})
	require.Len(t, c.Absent(), 1)
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)

	clock.Advance(mcptool.DefaultRetryInterval)
	returns := func(ctx context.Context) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			tb.Revive(ctx, []string{"slow__x"}, false)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // a guard against hanging, not a speed check
			t.Fatal("the run still waits for the server")
		}
	}
	returns(context.Background())
	// The attempt ends at its timeout; the MCP SDK may take a while longer
	// to give the connection up (a notice of the cancelled request to a
	// server that does not answer): its outcome is noted then.
	assert.Eventually(t, func() bool {
		return strings.Contains(tb.Missing("slow__x"), "and when last tried, at ") &&
			strings.Contains(tb.Missing("slow__x"), "(no answer in time); it is tried again")
	}, time.Minute, 10*time.Millisecond)

	// A run whose context ends stops waiting at once.
	clock.Advance(mcptool.DefaultRetryInterval)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	returns(ctx)
}

func TestRunsInFlightKeepTheirToolsWhileAServerComesBack(t *testing.T) {
	clock := clocktest.New(time.Now())
	s, c, tb := downAtStart(t, clock, mcptool.Options{})
	// Every run calls echo, then answers: its two model turns must be
	// offered the same tools, whatever the catalog does meanwhile.
	var inconsistent atomic.Int32
	var runs sync.Map
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		var names []string
		for _, spec := range req.Tools {
			names = append(names, spec.Name)
		}
		key := req.Messages[0].Content[0].Text
		if len(req.Messages) == 1 {
			runs.Store(key, names)
			return loop.ModelResponse{Message: turn(call("e1", "echo", `{}`)), StopReason: loop.StopToolUse}, nil
		}
		first, _ := runs.Load(key)
		if !slices.Equal(first.([]string), names) {
			inconsistent.Add(1)
		}
		return loop.ModelResponse{Message: turn(loop.TextBlock("done")), StopReason: loop.StopEndTurn}, nil
	})
	r := &loop.Runner{Model: model, Tools: tb}
	// The server is up again, but not tried within the interval of the
	// start-up attempt; the clock passes it while the runs go on.
	s.Restart(t)
	var refused, withCRM atomic.Int32
	var started, wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine runs until it saw three runs of the server's
			// tool complete (a bound guards against looping for ever).
			mine := 0
			for i := 0; mine < 3 && i < 10000; i++ {
				if i == 4 {
					started.Done()
				}
				req := loop.Request{RunID: fmt.Sprintf("run-%d-%d", g, i), Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText(fmt.Sprintf("run %d %d", g, i))}}}
				if i%2 == 1 {
					req.Options.AllowedTools = []string{"echo", "crm__find_customer"}
				}
				out, err := r.Run(context.Background(), req)
				if err != nil {
					assert.ErrorIs(t, err, loop.ErrInvalidRequest, "refused only while the server is absent")
					refused.Add(1)
					continue
				}
				assert.Equal(t, loop.ReasonCompleted, out.Reason)
				if i%2 == 1 {
					withCRM.Add(1)
					mine++
				}
				_ = tb.Names()
				_, _ = tb.Hash("crm__find_customer")
			}
		}()
	}
	started.Wait()
	clock.Advance(mcptool.DefaultRetryInterval)
	wg.Wait()
	assert.Zero(t, inconsistent.Load(), "a run's tools never change under it")
	assert.NotZero(t, refused.Load(), "runs were refused while the server was absent")
	assert.NotZero(t, withCRM.Load(), "and ran once it was back, without a restart")
	assert.Empty(t, c.Absent())
	_, err := r.Run(context.Background(), findRun("crm__find_customer"))
	require.NoError(t, err, "back for the runs after")
}

// newTools are tools the CRM server offers only after the process listed it.
func addNewTools(s *mcptest.Server) {
	s.AddTool(&mcp.Tool{Name: "refund", Description: "Refund an order.", InputSchema: mcptest.ObjectSchema("order")},
		mcptest.Text("refunded"))
	s.AddTool(&mcp.Tool{Name: "lookup_order", Description: "Look an order up.", InputSchema: mcptest.ObjectSchema("order"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("order 7: shipped"))
	s.AddTool(&mcp.Tool{Name: "export_all", Description: "Export every customer.", InputSchema: mcptest.ObjectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("exported"))
	s.AddTool(&mcp.Tool{Name: "drop_all", Description: "Delete everything.", InputSchema: mcptest.ObjectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("dropped"))
	s.AddTool(&mcp.Tool{Name: "note_add", Description: "Add a note (new spelling).", InputSchema: mcptest.ObjectSchema("text"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcptest.Text("noted"))
}

func TestToolsAServerAddsLaterJoinGatedByTheFile(t *testing.T) {
	tests := []struct {
		name  string
		trust bool
		// want: the gate of each new tool ("" = not offered).
		want map[string]string
	}{
		{"trusted server", true, map[string]string{
			"crm__refund": "approval", "crm__lookup_order": "read", "crm__export_all": "approval (always)", "crm__drop_all": ""}},
		{"untrusted server: a new read-only tool asks too", false, map[string]string{
			"crm__refund": "approval", "crm__lookup_order": "approval", "crm__export_all": "approval (always)", "crm__drop_all": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := crmServer(t, mcptest.Options{})
			c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: tt.trust,
				Exclude: []string{"drop_all"}, Approval: map[string]mcptool.Approval{"export_all": "always"}}), mcptool.Options{})
			tb, err := loop.NewToolboxWithSource(c)
			require.NoError(t, err)
			before := tb.Names()
			addNewTools(s)

			// A turn held on a server tool lists the server: the new tools join.
			r := runner(t, tb, turn(call("c1", "crm__create_ticket", `{"title":"a"}`)), turn(loop.TextBlock("done")))
			require.Equal(t, loop.OutcomeSuspended, start(t, r).Kind)
			for name, gate := range tt.want {
				tl, ok := tb.Lookup(name)
				if gate == "" {
					assert.False(t, ok, "%s: not offered", name)
					continue
				}
				require.True(t, ok, name)
				d := tl.Definition()
				got := "approval"
				switch {
				case d.RequiresApproval:
					got = "approval (always)"
				case d.Effect == loop.EffectRead:
					got = "read"
				}
				assert.Equal(t, gate, got, name)
				assert.False(t, d.NoApproval, name)
			}
			assert.Len(t, tb.Names(), len(before)+3)
			noted, ok := tb.Lookup("crm__note_add")
			require.True(t, ok)
			assert.Equal(t, "Add a note.", noted.Definition().Description, "a new tool whose exposed name another has is left out; the one offered before stays")

			// A run calling the new tools: the write and the always-ask
			// read are held, not run.
			held := runner(t, tb, turn(
				call("r1", "crm__refund", `{"order":"7"}`),
				call("x1", "crm__export_all", `{}`)), turn(loop.TextBlock("done")))
			out := start(t, held)
			require.Equal(t, loop.OutcomeSuspended, out.Kind)
			require.Len(t, out.Suspended.PendingCalls, 2)
			for _, pc := range out.Suspended.PendingCalls {
				assert.True(t, pc.NeedsApproval, pc.Name)
				assert.Empty(t, pc.Rejected, pc.Name)
			}
			assert.Empty(t, s.CallsOf("refund"))
			assert.Empty(t, s.CallsOf("export_all"))
			done := approve(t, held, out.Suspended)
			assert.Equal(t, loop.ReasonCompleted, done.Reason)
			assert.Len(t, s.CallsOf("refund"), 1, "runs once approved")
		})
	}
}

func TestARunNamingAToolTheServerAddedListsItAgain(t *testing.T) {
	clock := clocktest.New(time.Now())
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{Now: clock.Now})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	s.AddTool(&mcp.Tool{Name: "refund", Description: "Refund an order.", InputSchema: mcptest.ObjectSchema("order")}, mcptest.Text("refunded"))
	lists := s.Lists()

	r := runner(t, tb, turn(call("r1", "crm__refund", `{"order":"7"}`)), turn(loop.TextBlock("done")))
	out, err := r.Run(context.Background(), findRun("crm__refund"))
	require.NoError(t, err, "the run's tool is looked for on its server")
	require.Equal(t, loop.OutcomeSuspended, out.Kind, "a new write waits for approval")
	assert.True(t, out.Suspended.PendingCalls[0].NeedsApproval)
	assert.Equal(t, lists+2, s.Lists(), "listed for the run, and when its turn was held")

	// A name the server does not offer lists it at most once per interval
	// (the listing for crm__refund counts).
	lists = s.Lists()
	for range 3 {
		_, err = r.Run(context.Background(), findRun("crm__nothing"))
		require.ErrorIs(t, err, loop.ErrInvalidRequest)
		assert.Contains(t, err.Error(), `unknown tool "crm__nothing"`)
	}
	assert.Equal(t, lists, s.Lists())
	clock.Advance(mcptool.DefaultRetryInterval)
	for range 3 {
		_, err = r.Run(context.Background(), findRun("crm__nothing"))
		require.ErrorIs(t, err, loop.ErrInvalidRequest)
	}
	assert.Equal(t, lists+1, s.Lists())
}

func TestANewToolWhoseSchemaDoesNotCompileIsLeftOut(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	logs := &bytes.Buffer{}
	var mu sync.Mutex
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{Logger: slog.New(slog.NewJSONHandler(lockedWriter{&mu, logs}, nil))})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`)}, mcptest.Text("x"))
	s.AddTool(&mcp.Tool{Name: "fine", InputSchema: mcptest.ObjectSchema("a")}, mcptest.Text("x"))
	r := runner(t, tb, turn(call("c1", "crm__create_ticket", `{"title":"a"}`)), turn(loop.TextBlock("done")))
	require.Equal(t, loop.OutcomeSuspended, start(t, r).Kind)
	_, ok := tb.Lookup("crm__broken")
	assert.False(t, ok)
	_, ok = tb.Lookup("crm__fine")
	assert.True(t, ok, "the toolbox took the tools that fit")
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, logs.String(), "cannot be offered")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package mcptool_test

// The settings of a server's later listings: list_every_seconds lists a
// server again without a run asking (so a tool it adds reaches runs that
// name no tools), retry_interval_seconds spaces the attempts runs bring
// about, connect_timeout_seconds bounds each later attempt.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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

// gateOf says how the toolbox gates a tool: "read", "approval",
// "approval (always)", or "" when it does not offer it.
func gateOf(tb *loop.Toolbox, name string) string {
	tl, ok := tb.Lookup(name)
	if !ok {
		return ""
	}
	d := tl.Definition()
	switch {
	case d.RequiresApproval:
		return "approval (always)"
	case d.Effect == loop.EffectRead && !d.NoApproval:
		return "read"
	case d.NoApproval:
		return "write without approval"
	}
	return "approval"
}

func TestListEveryListsAServerOnItsOwnAndNewToolsJoinGatedByTheFile(t *testing.T) {
	clock := clocktest.New(time.Now())
	crm := crmServer(t, mcptest.Options{})
	billing := crmServer(t, mcptest.Options{})
	c := open(t, file(t,
		mcptool.Server{Name: "crm", URL: crm.URL, TrustAnnotations: true, ListEverySeconds: 60,
			Exclude: []string{"drop_all"}, Approval: map[string]mcptool.Approval{"export_all": "always"}},
		mcptool.Server{Name: "billing", URL: billing.URL, TrustAnnotations: true}),
		mcptool.Options{Now: clock.Now})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	addNewTools(crm)
	addNewTools(billing)
	crmLists, billingLists := crm.Lists(), billing.Lists()
	inFlight := tb.Revive(context.Background(), nil, true) // a run's snapshot, taken before

	// Within the interval of the start-up listing: nothing is listed.
	clock.Advance(59 * time.Second)
	next, ok := c.Relist(context.Background())
	require.True(t, ok, "a server sets list_every_seconds")
	assert.Equal(t, time.Second, next, "the crm server falls due in a second")
	assert.Equal(t, crmLists, crm.Lists())
	assert.Empty(t, gateOf(tb, "crm__refund"))

	// Due: listed once, with no run asking; the new tools are gated as
	// the file says (and as if listed at start-up).
	clock.Advance(time.Second)
	next, ok = c.Relist(context.Background())
	require.True(t, ok)
	assert.Equal(t, time.Minute, next)
	assert.Equal(t, crmLists+1, crm.Lists(), "listed once")
	assert.Equal(t, billingLists, billing.Lists(), "a server without list_every_seconds is not listed")
	for name, want := range map[string]string{
		"crm__refund": "approval", "crm__lookup_order": "read", "crm__export_all": "approval (always)", "crm__drop_all": "",
		"billing__refund": "", "billing__lookup_order": "",
	} {
		assert.Equal(t, want, gateOf(tb, name), name)
	}
	noted, ok := tb.Lookup("crm__note_add")
	require.True(t, ok)
	assert.Equal(t, "Add a note.", noted.Definition().Description, "a new tool whose exposed name another has is left out")

	// A run without allowed_tools is offered them; the run that took its
	// snapshot before keeps its tools.
	var offered []string
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		offered = offered[:0]
		for _, spec := range req.Tools {
			offered = append(offered, spec.Name)
		}
		return loop.ModelResponse{Message: turn(loop.TextBlock("done")), StopReason: loop.StopEndTurn}, nil
	})
	_, err = (&loop.Runner{Model: model, Tools: tb}).Run(context.Background(), findRun())
	require.NoError(t, err)
	assert.Contains(t, offered, "crm__refund")
	assert.Contains(t, offered, "crm__lookup_order")
	assert.NotContains(t, inFlight.Names(), "crm__refund", "a run in flight keeps its snapshot")
	assert.Contains(t, inFlight.Names(), "crm__create_ticket")

	// Not again within the interval; a listing a run brought about counts.
	clock.Advance(30 * time.Second)
	_, _ = c.Relist(context.Background())
	assert.Equal(t, crmLists+1, crm.Lists(), "not again within the interval")
	r := runner(t, tb, turn(call("c1", "crm__create_ticket", `{"title":"a"}`)), turn(loop.TextBlock("done")))
	require.Equal(t, loop.OutcomeSuspended, start(t, r).Kind, "the held turn lists the server")
	assert.Equal(t, crmLists+2, crm.Lists())
	clock.Advance(59 * time.Second)
	next, _ = c.Relist(context.Background())
	assert.Equal(t, crmLists+2, crm.Lists(), "the held turn's listing counts")
	assert.Equal(t, time.Second, next)
}

func TestListEveryOffListsNothing(t *testing.T) {
	clock := clocktest.New(time.Now())
	crm := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: crm.URL}), mcptool.Options{Now: clock.Now})
	lists := crm.Lists()
	clock.Advance(365 * 24 * time.Hour)
	_, ok := c.Relist(context.Background())
	assert.False(t, ok, "off by default")
	assert.Equal(t, lists, crm.Lists())

	done := make(chan struct{})
	go func() {
		c.KeepListed(context.Background())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against hanging, not a speed check
		t.Fatal("KeepListed waits although no server sets list_every_seconds")
	}
}

func TestListEveryTriesAnAbsentServerOnItsOwn(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 5, 9, 14, 2, 0, time.UTC))
	s := crmServer(t, mcptest.Options{})
	s.Close()
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true, ListEverySeconds: 300}), mcptool.Options{Now: clock.Now})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	assert.Contains(t, tb.Missing("crm__find_customer"), "it is tried again when a run needs its tools, at most every 30s, and every 5m0s without one")

	s.Restart(t)
	clock.Advance(299 * time.Second)
	_, _ = c.Relist(context.Background())
	assert.Zero(t, s.Conns(), "not before it falls due")
	clock.Advance(time.Second)
	_, _ = c.Relist(context.Background())
	assert.Empty(t, c.Absent(), "tried and listed with no run asking")
	assert.Equal(t, "read", gateOf(tb, "crm__find_customer"))
	assert.Equal(t, "approval", gateOf(tb, "crm__create_ticket"))

	// The attempt counts for the retry interval of the attempts runs bring about.
	s2 := crmServer(t, mcptest.Options{})
	s2.Close()
	c2 := open(t, file(t, mcptool.Server{Name: "crm", URL: s2.URL, ListEverySeconds: 60}), mcptool.Options{Now: clock.Now})
	tb2, err := loop.NewToolboxWithSource(c2)
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, _ = c2.Relist(context.Background())
	assert.Contains(t, tb2.Missing("crm__find_customer"), "and when last tried, at 2026-12-05T09:20:02Z (the connection was refused)")
	s2.Restart(t)
	clock.Advance(20 * time.Second)
	tb2.Revive(context.Background(), []string{"crm__find_customer"}, false)
	assert.Zero(t, s2.Conns(), "a run within the retry interval of the periodic attempt does not try again")
}

func TestKeepListedAddsToolsOnTheWallClockAndStopsWithItsContext(t *testing.T) {
	crm := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: crm.URL, ListEverySeconds: 1}), mcptool.Options{})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.KeepListed(ctx)
		close(done)
	}()
	crm.AddTool(&mcp.Tool{Name: "refund", Description: "Refund an order.", InputSchema: mcptest.ObjectSchema("order")}, mcptest.Text("refunded"))
	assert.Eventually(t, func() bool { return slices.Contains(tb.Names(), "crm__refund") }, time.Minute, 20*time.Millisecond,
		"the background listing offers the new tool")
	assert.Equal(t, "approval", gateOf(tb, "crm__refund"))

	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against hanging, not a speed check
		t.Fatal("KeepListed goes on after its context ended")
	}
	lists := crm.Lists()
	time.Sleep(1500 * time.Millisecond)
	assert.Equal(t, lists, crm.Lists(), "nothing lists the server once it stopped")
}

func TestTheRetryIntervalIsSetPerServer(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 5, 9, 14, 2, 0, time.UTC))
	crm, billing := crmServer(t, mcptest.Options{}), crmServer(t, mcptest.Options{})
	crm.Close()
	billing.Close()
	c := open(t, file(t,
		mcptool.Server{Name: "crm", URL: crm.URL, RetryIntervalSeconds: 5},
		mcptool.Server{Name: "billing", URL: billing.URL}), mcptool.Options{Now: clock.Now})
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)
	assert.Contains(t, tb.Missing("crm__find_customer"), "it is tried again when a run needs its tools, at most every 5s")
	assert.Contains(t, tb.Missing("billing__find_customer"), "it is tried again when a run needs its tools, at most every 30s")

	crm.Restart(t)
	billing.Restart(t)
	clock.Advance(4 * time.Second)
	tb.Revive(context.Background(), nil, true)
	assert.Len(t, c.Absent(), 2, "within both intervals: neither is tried")
	clock.Advance(time.Second)
	tb.Revive(context.Background(), nil, true)
	require.Len(t, c.Absent(), 1, "past its own interval: crm is tried and joins")
	assert.Equal(t, "billing", c.Absent()[0].Server)
	assert.Zero(t, billing.Conns(), "the default interval (30s) still holds for billing")
	clock.Advance(25 * time.Second)
	tb.Revive(context.Background(), nil, true)
	assert.Empty(t, c.Absent())

	// A present server is listed for a tool it lacks at most once per its interval.
	lists := crm.Lists()
	for range 3 {
		tb.Revive(context.Background(), []string{"crm__nothing"}, false)
	}
	assert.Equal(t, lists+1, crm.Lists())
	clock.Advance(5 * time.Second)
	tb.Revive(context.Background(), []string{"crm__nothing"}, false)
	assert.Equal(t, lists+2, crm.Lists())
}

func TestTheConnectTimeoutOfALaterAttemptIsSetPerServer(t *testing.T) {
	// The server's port refuses connections at start-up (which is quick,
	// whatever the process's bound); later a server there takes the
	// initialize request and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	clock := clocktest.New(time.Now())
	c := open(t, file(t, mcptool.Server{Name: "slow", URL: "http://" + addr + "/mcp", ConnectTimeoutSeconds: 1}),
		mcptool.Options{Now: clock.Now, ConnectTimeout: 10 * time.Minute})
	require.Len(t, c.Absent(), 1)
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)

	hang := make(chan struct{})
	var asked atomic.Int32
	blackHole := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"notifications/`)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		asked.Add(1)
		<-hang
	}))
	l, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	blackHole.Listener.Close()
	blackHole.Listener = l
	blackHole.Start()
	t.Cleanup(blackHole.Close)
	t.Cleanup(func() { close(hang) })

	clock.Advance(mcptool.DefaultRetryInterval)
	done := make(chan struct{})
	go func() {
		tb.Revive(context.Background(), []string{"slow__x"}, false)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against hanging, not a speed check
		t.Fatal("the run waits on the process's bound (10m), not the server's connect_timeout_seconds (1s)")
	}
	assert.EqualValues(t, 1, asked.Load(), "the attempt reached the server")
	assert.Eventually(t, func() bool {
		return strings.Contains(tb.Missing("slow__x"), "and when last tried, at ") &&
			strings.Contains(tb.Missing("slow__x"), "(no answer in time); it is tried again")
	}, time.Minute, 10*time.Millisecond, "the attempt ends at the server's bound")
}

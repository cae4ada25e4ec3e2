package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// crmServer is a test MCP server with a read tool, an unannotated tool, a
// destructive tool and a tool whose name needs mapping.
func crmServer(t *testing.T, o mcptest.Options) *mcptest.Server {
	t.Helper()
	o.MetaKey = mcptool.IdempotencyKeyMeta
	s := mcptest.New(t, o)
	s.AddTool(&mcp.Tool{Name: "find_customer", Description: "Find a customer by name.", InputSchema: mcptest.ObjectSchema("query"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: mcptest.Bool(false)}},
		func(args json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "customer 42 matches " + string(args)}}}
		})
	s.AddTool(&mcp.Tool{Name: "create_ticket", Description: "Open a support ticket.", InputSchema: mcptest.ObjectSchema("title")},
		mcptest.Text("ticket T-1 created"))
	s.AddTool(&mcp.Tool{Name: "close_ticket", Description: "Close a ticket for good.", InputSchema: mcptest.ObjectSchema("id"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: mcptest.Bool(true), IdempotentHint: true}},
		mcptest.Text("closed"))
	s.AddTool(&mcp.Tool{Name: "note.add", Description: "Add a note.", InputSchema: mcptest.ObjectSchema("text"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: mcptest.Bool(false)}},
		mcptest.Text("noted"))
	return s
}

func file(t *testing.T, servers ...mcptool.Server) *mcptool.File {
	t.Helper()
	raw, err := json.Marshal(mcptool.File{Servers: servers})
	require.NoError(t, err)
	f, err := mcptool.ParseFile(raw, mcptool.ParseOptions{AllowEnvHeaders: true})
	require.NoError(t, err)
	return f
}

func open(t *testing.T, f *mcptool.File, o mcptool.Options) *mcptool.Catalog {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := mcptool.Open(context.Background(), f, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func toolbox(t *testing.T, c *mcptool.Catalog) *loop.Toolbox {
	t.Helper()
	tb, err := loop.NewToolbox(c.Tools()...)
	require.NoError(t, err)
	c.NoteAbsent(tb)
	return tb
}

func TestCatalogExposesEveryToolUnderItsServerName(t *testing.T) {
	s := crmServer(t, mcptest.Options{PageSize: 1}) // four pages
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	tb := toolbox(t, c)
	assert.Equal(t, []string{"crm__close_ticket", "crm__create_ticket", "crm__find_customer", "crm__note_add"}, tb.Names())
	assert.Equal(t, 4, s.Lists(), "one tools/list request per page")
	for _, name := range tb.Names() {
		assert.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, name, "valid for OpenAI, Bedrock and Anthropic")
	}
	assert.Empty(t, c.Absent())
}

func TestIncludeAndExclude(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t,
		mcptool.Server{Name: "a", URL: s.URL, Include: []string{"find_customer", "close_ticket"}, Exclude: []string{"close_ticket"}}),
		mcptool.Options{})
	assert.Equal(t, []string{"a__find_customer"}, toolbox(t, c).Names())
}

func TestEffectsAndApproval(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	type want struct {
		effect   loop.Effect
		approval bool // needs approval by the loop's rule (marker or write without exemption)
	}
	tests := []struct {
		name     string
		trust    bool
		approval map[string]mcptool.Approval
		want     map[string]want
		summary  string // serve's start-up line
	}{
		{"untrusted server: everything asks", false, nil, map[string]want{
			"find_customer": {loop.EffectWrite, true}, "create_ticket": {loop.EffectWrite, true},
			"close_ticket": {loop.EffectWrite, true}, "note.add": {loop.EffectWrite, true}},
			"4 tools (0 run at once, 4 need approval)\n"},
		{"trusted server: readOnlyHint reads, the rest asks", true, nil, map[string]want{
			"find_customer": {loop.EffectRead, false}, "create_ticket": {loop.EffectWrite, true},
			"close_ticket": {loop.EffectWrite, true}, "note.add": {loop.EffectWrite, true}},
			"4 tools (1 runs at once, 3 need approval)\n"},
		{"overrides win", true, map[string]mcptool.Approval{"find_customer": "always", "note.add": "never", "close_ticket": "default"}, map[string]want{
			"find_customer": {loop.EffectRead, true}, "create_ticket": {loop.EffectWrite, true},
			"close_ticket": {loop.EffectWrite, true}, "note.add": {loop.EffectWrite, false}},
			"4 tools (0 run at once, 3 need approval, 1 write runs without approval)\n"},
		{"one of each", true, map[string]mcptool.Approval{"close_ticket": "never", "note.add": "never"}, map[string]want{
			"find_customer": {loop.EffectRead, false}, "create_ticket": {loop.EffectWrite, true},
			"close_ticket": {loop.EffectWrite, false}, "note.add": {loop.EffectWrite, false}},
			"4 tools (1 runs at once, 1 needs approval, 2 writes run without approval)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: tt.trust, Approval: tt.approval}), mcptool.Options{})
			tb := toolbox(t, c)
			for tool, w := range tt.want {
				tl, ok := tb.Lookup(mcptool.ExposedName("crm", tool))
				require.True(t, ok, tool)
				def := tl.Definition()
				assert.Equal(t, w.effect, def.Effect, tool)
				needs := def.RequiresApproval || (def.Effect == loop.EffectWrite && !def.NoApproval)
				assert.Equal(t, w.approval, needs, tool)
				assert.False(t, def.Idempotent, "%s: a remote write is never retried after an unknown outcome, whatever its hints say", tool)
			}
			assert.Equal(t, "mcp server crm: "+tt.summary, c.Summary(), "the counts add up to the tools")
		})
	}
}

// TestSummaryOfOneTool: the start-up line of a server with one tool says
// "1 tool", not "1 tools".
func TestSummaryOfOneTool(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, Include: []string{"create_ticket"}}), mcptool.Options{})
	assert.Equal(t, "mcp server crm: 1 tool (0 run at once, 1 needs approval)\n", c.Summary())
}

func TestCollisionsAndLongNamesAreRefusedAtStartUp(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	s.AddTool(&mcp.Tool{Name: "note_add", InputSchema: mcptest.ObjectSchema("text")}, mcptest.Text("x"))
	_, err := mcptool.Open(context.Background(), file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{Logger: slog.New(slog.DiscardHandler)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"note.add" and "note_add"`)
	assert.Contains(t, err.Error(), `"crm__note_add"`)

	// Excluding one of them resolves it.
	open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, Exclude: []string{"note_add"}}), mcptool.Options{})

	long := crmServer(t, mcptest.Options{})
	long.AddTool(&mcp.Tool{Name: strings.Repeat("x", 60), InputSchema: mcptest.ObjectSchema("a")}, mcptest.Text("x"))
	_, err = mcptool.Open(context.Background(), file(t, mcptool.Server{Name: "crm", URL: long.URL}), mcptool.Options{Logger: slog.New(slog.DiscardHandler)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "providers allow 64")
}

func TestServerDownAtStartUpLeavesItsToolsAbsent(t *testing.T) {
	up := crmServer(t, mcptest.Options{})
	down := crmServer(t, mcptest.Options{})
	down.Close()
	c := open(t, file(t,
		mcptool.Server{Name: "crm", URL: up.URL},
		mcptool.Server{Name: "billing", URL: down.URL}), mcptool.Options{ConnectTimeout: 5 * time.Second})
	tb := toolbox(t, c)
	assert.Len(t, tb.Names(), 4)
	require.Len(t, c.Absent(), 1)
	assert.Equal(t, "billing", c.Absent()[0].Server)
	assert.Contains(t, tb.Missing("billing__refund"), "MCP server billing was unavailable when this process started (the connection was refused)")
	host := strings.TrimPrefix(strings.TrimSuffix(down.URL, "/mcp"), "http://")
	assert.NotContains(t, tb.Missing("billing__refund"), host, "callers never learn the server's address")
	assert.Contains(t, c.Summary(), "mcp server billing: absent")
}

func TestHeadersComeFromSecretsOrTheEnvironment(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	arn := "arn:aws:secretsmanager:us-east-1:123456789012:secret:crm-token-AbCdEf"
	secrets := fakeSecrets{arn: `{"token":"s3cr3t"}`}
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, Headers: map[string]mcptool.HeaderValue{
		"Authorization": {SecretARN: arn, JSONKey: "token", Prefix: "Bearer "},
		"X-Tenant":      {Env: "CRM_TENANT"},
	}}), mcptool.Options{Secrets: secrets, Getenv: func(k string) string { return map[string]string{"CRM_TENANT": "acme"}[k] }})
	require.NotEmpty(t, c.Tools())
	assert.Equal(t, "Bearer s3cr3t", s.LastHeader("Authorization"))
	assert.Equal(t, "acme", s.LastHeader("X-Tenant"))

	// A secret that cannot be read leaves the server absent, with a reason
	// that names the header and never a value.
	c = open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, Headers: map[string]mcptool.HeaderValue{
		"Authorization": {SecretARN: arn + "x"}}}), mcptool.Options{Secrets: secrets})
	require.Len(t, c.Absent(), 1)
	assert.Contains(t, c.Absent()[0].Reason, "header Authorization")
	assert.NotContains(t, c.Absent()[0].Reason, "s3cr3t")
}

type fakeSecrets map[string]string

func (f fakeSecrets) SecretString(_ context.Context, id string) (string, error) {
	v, ok := f[id]
	if !ok {
		return "", errors.New("ResourceNotFoundException: secret not found")
	}
	return v, nil
}

// refusingDialer refuses the first n connections, as a server that is not
// listening does, then dials for real.
type refusingDialer struct {
	left atomic.Int32
	d    net.Dialer
}

func (r *refusingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	return r.d.DialContext(ctx, network, addr)
}

func TestPreviewShowsHintsDescriptionAndPrettyArguments(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	tl, _ := toolbox(t, c).Lookup("crm__close_ticket")
	text, err := tl.(loop.Previewer).Preview(context.Background(), json.RawMessage(`{"id":"T-1"}`))
	require.NoError(t, err)
	for _, want := range []string{`MCP tool "close_ticket" on server "crm" (Test CRM)`, "needs approval: not read-only",
		"destructive=true idempotent=true openWorld=true readOnly=false", "Description: Close a ticket for good.", "{\n  \"id\": \"T-1\"\n}"} {
		assert.Contains(t, text, want)
	}
	tl, _ = toolbox(t, c).Lookup("crm__create_ticket")
	text, _ = tl.(loop.Previewer).Preview(context.Background(), json.RawMessage(`{"title":"x"}`))
	assert.Contains(t, text, "MCP defaults: the server declares none")
}

func TestCallSendsArgumentsAndIdempotencyKey(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
	tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
	res, err := tl.Call(loop.WithIdempotencyKey(context.Background(), "run-1/s-1/toolu_1"), json.RawMessage(`{"title":"broken"}`))
	require.NoError(t, err)
	assert.Equal(t, loop.Result{Content: "ticket T-1 created"}, res)
	calls := s.CallsOf("create_ticket")
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"title":"broken"}`, string(calls[0].Arguments))
	assert.Equal(t, "run-1/s-1/toolu_1", calls[0].IdempotencyKey)
}

func TestSessionExpiryReinitializesOnce(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
	tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
	s.ExpireSession()
	res, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
	require.NoError(t, err)
	assert.False(t, res.IsError, res.Content)
	assert.Equal(t, 1, s.Expired(), "the call met an expired session")
	assert.Len(t, s.CallsOf("create_ticket"), 1, "the 404 call was not processed; the retry on the new session is the one call")
}

func TestRetries(t *testing.T) {
	t.Run("a write is retried when the connection was refused", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		d := &refusingDialer{}
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}})
		tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
		d.left.Store(2)
		res, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
		require.NoError(t, err)
		assert.False(t, res.IsError, res.Content)
		assert.Len(t, s.CallsOf("create_ticket"), 1)
	})
	t.Run("a write that never left becomes an error result", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		d := &refusingDialer{}
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}})
		tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
		d.left.Store(100)
		res, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
		require.NoError(t, err, "nothing happened, so it is a tool failure the model can see, not an unknown outcome")
		assert.True(t, res.IsError)
		assert.Contains(t, res.Content, "could not be reached, create_ticket did not run (the connection was refused)")
		assert.NotContains(t, res.Content, strings.TrimPrefix(s.URL, "http://"), "the model is not told the server's address")
		assert.Empty(t, s.CallsOf("create_ticket"))
	})
	t.Run("a write whose connection died after sending is never sent again", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
		tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
		s.DropCallsOf("create_ticket", 1)
		_, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
		require.Error(t, err, "the outcome is unknown: the loop's write fence decides")
		assert.Contains(t, err.Error(), "outcome of the write is unknown")
		var unknown *loop.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown, "the run's detail says why the outcome is unknown")
		assert.NotContains(t, unknown.Cause, s.URL, "the cause never names the server's address")
		assert.NotEmpty(t, unknown.Cause)
		assert.Len(t, s.CallsOf("create_ticket"), 1)
	})
	t.Run("a read is retried after its connection died", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
		tl, _ := toolbox(t, c).Lookup("crm__find_customer")
		s.DropCallsOf("find_customer", 1)
		res, err := tl.Call(context.Background(), json.RawMessage(`{"query":"acme"}`))
		require.NoError(t, err)
		assert.Contains(t, res.Content, "customer 42")
		assert.Len(t, s.CallsOf("find_customer"), 2)
	})
	t.Run("a read whose connection dies on every attempt is an error result naming no address", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
		tl, _ := toolbox(t, c).Lookup("crm__find_customer")
		s.DropCallsOf("find_customer", 3)
		res, err := tl.Call(context.Background(), json.RawMessage(`{"query":"acme"}`))
		require.NoError(t, err, "a read's lost answer leaves nothing undone: the model sees an error result")
		assert.True(t, res.IsError)
		assert.Equal(t, "Error: the MCP server crm gave no usable answer to find_customer in 3 attempts (the connection was lost)", res.Content,
			"the read reached the server, so it is not said not to have run")
		assert.Len(t, s.CallsOf("find_customer"), 3)
	})
	t.Run("a server-side protocol error is a tool failure", func(t *testing.T) {
		s := crmServer(t, mcptest.Options{})
		c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
		tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
		s.MCP.RemoveTools("create_ticket")
		res, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Contains(t, res.Content, "refused the call")
	})
}

func TestToolErrorsAndContentKinds(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	s.AddTool(&mcp.Tool{Name: "media", InputSchema: mcptest.ObjectSchema()}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{
			IsError: true,
			Content: []mcp.Content{
				&mcp.TextContent{Text: "partly failed"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("PNGDATA")},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
				&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://b", MIMEType: "text/plain", Text: "inline text"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://c", MIMEType: "application/zip", Blob: []byte("PK")}},
			},
			StructuredContent: map[string]any{"temperature": 21},
		}
	})
	s.AddTool(&mcp.Tool{Name: "huge", InputSchema: mcptest.ObjectSchema()}, mcptest.Text(strings.Repeat("é", mcptool.MaxResultBytes)))
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
	tb := toolbox(t, c)

	tl, _ := tb.Lookup("crm__media")
	res, err := tl.Call(context.Background(), json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, strings.Join([]string{
		"partly failed",
		"[image: image/png, 7 bytes, not shown]",
		"[audio: audio/wav, 4 bytes, not shown]",
		"[resource link: file:///a.txt name a.txt, text/plain]",
		"[embedded resource mem://b, text/plain]\ninline text",
		"[embedded resource mem://c: application/zip, 2 bytes, not shown]",
		`{"temperature":21}`,
	}, "\n"), res.Content)

	tl, _ = tb.Lookup("crm__huge")
	res, err = tl.Call(context.Background(), json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(res.Content), mcptool.MaxResultBytes+100)
	assert.Contains(t, res.Content, fmt.Sprintf("[result truncated by agentgate: %d of %d bytes kept]", mcptool.MaxResultBytes, 2*mcptool.MaxResultBytes))
	assert.True(t, strings.HasPrefix(res.Content, "éé"))
}

func TestWritesGoOnAFreshConnection(t *testing.T) {
	s := crmServer(t, mcptest.Options{})
	c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
	tb := toolbox(t, c)
	read, _ := tb.Lookup("crm__find_customer")
	write, _ := tb.Lookup("crm__create_ticket")
	for range 2 {
		_, err := read.Call(context.Background(), json.RawMessage(`{"query":"a"}`))
		require.NoError(t, err)
	}
	before := s.Conns()
	for range 2 {
		_, err := write.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
		require.NoError(t, err)
	}
	// A pooled connection the server already closed (an idle one, after a
	// Lambda thawed) would leave a write's outcome unknown; writes never
	// take one.
	assert.Equal(t, before+2, s.Conns(), "each write dials its own connection")
	assert.Len(t, s.CallsOf("create_ticket"), 2)
}

// TestTheLogNeverHoldsTheURLsQuery: a key in the server URL's query (as
// some servers take it) is cut out of every logged error, which quotes the
// URL the transport sent to; before, the log had it whole.
func TestTheLogNeverHoldsTheURLsQuery(t *testing.T) {
	const key = "Hunter2SecretPW"
	var logs strings.Builder
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	s := crmServer(t, mcptest.Options{})
	down := crmServer(t, mcptest.Options{})
	down.Close()
	c := open(t, file(t,
		mcptool.Server{Name: "crm", URL: s.URL + "?key=" + key},
		mcptool.Server{Name: "billing", URL: down.URL + "?key=" + key}), mcptool.Options{Logger: logger, ConnectTimeout: 5 * time.Second})
	tb := toolbox(t, c)
	s.Close()
	for _, name := range []string{"crm__find_customer", "crm__create_ticket"} {
		tool, ok := tb.Lookup(name)
		require.True(t, ok, name)
		_, _ = tool.Call(context.Background(), json.RawMessage(`{"query":"x","title":"x"}`))
		if dc, ok := tool.(loop.DefinitionChecker); ok {
			_, _ = dc.CurrentDefinition(context.Background())
		}
	}
	for _, want := range []string{"mcp server unavailable", "mcp tool call", "mcp tools/list"} {
		assert.Contains(t, logs.String(), want)
	}
	assert.NotContains(t, logs.String(), key)
}

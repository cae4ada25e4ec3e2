package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of a server's tool listing.
const (
	// MaxListPages bounds the pages of one tools/list pagination.
	MaxListPages = 100
	// MaxToolsPerServer bounds the tools kept of one server.
	MaxToolsPerServer = 1000
)

// IdempotencyKeyMeta is the _meta key of a tools/call request that carries
// the call's idempotency key, "runID/suspensionID/callID": the same for
// every attempt of one approved call, so a server can deduplicate.
const IdempotencyKeyMeta = "io.agentgate/idempotency-key"

// ClientName is the client name agentgate announces to MCP servers.
const ClientName = "agentgate"

// attempt records what happened to the HTTP request of one tools/call (or
// tools/list) attempt: whether a connection was ever obtained (if not, the
// request provably never left), the last status, and whether a session id
// was sent.
type attempt struct {
	gotConn     atomic.Bool
	status      atomic.Int32
	sentSession atomic.Bool
	// fresh sends the request on a new connection, never a pooled one: an
	// idle connection the server closed (say while a Lambda was frozen)
	// would make a write's outcome unknown for nothing.
	fresh bool
}

type attemptKey struct{}

// sessionExpired: the server answered 404 to a request that carried a
// session id (MCP: the session is gone; the request was not processed).
func (a *attempt) sessionExpired() bool {
	return a.sentSession.Load() && a.status.Load() == http.StatusNotFound
}

// sessionRefused: the server answered 404 or 400 to a request that carried
// a session id. 404 is the spec's answer for a session it no longer has;
// 400 is what servers built on the TypeScript SDK's example answer for an
// unknown session id (among them the MCP reference server, say after a
// restart), and what a server answers for any request it cannot accept.
func (a *attempt) sessionRefused() bool {
	s := a.status.Load()
	return a.sentSession.Load() && (s == http.StatusNotFound || s == http.StatusBadRequest)
}

// neverSent: no connection was ever obtained for the request.
func (a *attempt) neverSent() bool { return !a.gotConn.Load() }

// transport adds the configured headers to every request and records the
// fate of tracked requests in their attempt.
type transport struct {
	base    http.RoundTripper
	fresh   http.RoundTripper
	headers http.Header
}

// newTransport wraps base; fresh-connection requests go through a clone of
// base without keep-alives (or base itself when it is not an *http.Transport).
func newTransport(base http.RoundTripper, headers http.Header) *transport {
	t := &transport{base: base, fresh: base, headers: headers}
	if ht, ok := base.(*http.Transport); ok {
		c := ht.Clone()
		c.DisableKeepAlives = true
		t.fresh = c
	}
	return t
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.headers {
		req.Header[k] = vs
	}
	a, _ := req.Context().Value(attemptKey{}).(*attempt)
	if a != nil && req.Method == http.MethodPost {
		if req.Header.Get("Mcp-Session-Id") != "" {
			a.sentSession.Store(true)
		}
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { a.gotConn.Store(true) }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	rt := t.base
	if a != nil && a.fresh && req.Method == http.MethodPost {
		rt = t.fresh
	}
	resp, err := rt.RoundTrip(req)
	if a != nil && resp != nil && req.Method == http.MethodPost {
		a.status.Store(int32(resp.StatusCode)) //nolint:gosec // an HTTP status has three digits
	}
	return resp, err
}

// conn is the client side of one MCP server: a session, connected lazily
// and re-initialized when the server lost it.
type conn struct {
	server  Server
	client  *mcp.Client
	http    *http.Client
	logger  *slog.Logger
	mu      sync.Mutex
	session *mcp.ClientSession
	info    *mcp.Implementation
}

func newConn(s Server, headers http.Header, base http.RoundTripper, logger *slog.Logger, version string) *conn {
	if base == nil {
		base = http.DefaultTransport
	}
	return &conn{
		server: s,
		client: mcp.NewClient(&mcp.Implementation{Name: ClientName, Version: version}, nil),
		http:   &http.Client{Transport: newTransport(base, headers)},
		logger: logger,
	}
}

// current returns the open session, connecting first when there is none.
func (c *conn) current(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	t := &mcp.StreamableClientTransport{Endpoint: c.server.URL, HTTPClient: c.http, DisableStandaloneSSE: true}
	cs, err := c.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.server.URL, err)
	}
	c.session = cs
	if res := cs.InitializeResult(); res != nil {
		c.info = res.ServerInfo
	}
	return cs, nil
}

// drop forgets the session cs (if it is still the current one), so the
// next request connects again.
func (c *conn) drop(cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == cs {
		c.session = nil
	}
	c.mu.Unlock()
	_ = cs.Close()
}

// serverInfo is what the server said about itself when it was initialized.
func (c *conn) serverInfo() *mcp.Implementation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Close ends the session.
func (c *conn) Close() error {
	c.mu.Lock()
	cs := c.session
	c.session = nil
	c.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}

// withSession runs f on the current session. When the server refuses the
// session (a 400 or 404 answer to a request that carried its id) the
// session is dropped, so that the next request initializes a new one, and
// f runs once more on a new session when that is safe: always for a
// request that may be repeated (write false: tools/list, a read's
// tools/call), and for a write's tools/call only after a 404.
//
// Why a write is not sent again after a 400: the MCP transport gives 404
// on a session id one meaning, "this session is gone", after which the
// server must answer every request on it with 404, so the request was not
// processed (the rule since the first version of this package). A 400
// means only that the server could not accept the request: the TypeScript
// SDK's example servers say so of an unknown session, but any server says
// so of anything it finds wrong with a request, and nothing in the answer
// tells the two apart but a free-text message. A server that keeps the
// transport's rules did not run a call it answered 400, but "provably not
// processed" would then rest on every server and proxy on the way keeping
// them, which is the promise the write fence exists not to rely on. So a
// write's 400 keeps its outcome (a JSON-RPC error in the body: the server
// refused the call; otherwise unknown, and the fence decides), and is
// never sent again. A held write is not exposed to this: before it runs,
// the loop lists its server's tools (CurrentDefinition), and that listing
// meets the stale session first, starts a new one, and the write goes out
// on it.
//
// initialize itself never carries a session id (it starts one): a failed
// connect is returned as is, the request never sent. f gets a fresh
// attempt each time.
func (c *conn) withSession(ctx context.Context, write bool, f func(ctx context.Context, cs *mcp.ClientSession) error) (*attempt, error) {
	var a *attempt
	for try := 0; ; try++ {
		cs, err := c.current(ctx)
		if err != nil {
			// Connecting failed: the request itself was never sent.
			return &attempt{}, err
		}
		a = &attempt{fresh: write}
		err = f(context.WithValue(ctx, attemptKey{}, a), cs)
		if err == nil {
			return a, nil
		}
		if isProtocolError(err) && !a.sessionRefused() {
			return a, err
		}
		// The session was refused, or some other failure may have broken
		// it: start afresh next time.
		c.drop(cs)
		again := a.sessionExpired() || (!write && a.sessionRefused())
		if again && try == 0 {
			c.logger.InfoContext(ctx, "mcp session refused, re-initializing", "server", c.server.Name, "status", a.status.Load())
			continue
		}
		return a, err
	}
}

// listTools lists every tool of the server, following the pagination cursor.
func (c *conn) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	_, err := c.withSession(ctx, false, func(ctx context.Context, cs *mcp.ClientSession) error {
		tools = tools[:0]
		params := &mcp.ListToolsParams{}
		for page := 0; ; page++ {
			if page == MaxListPages {
				return fmt.Errorf("more than %d pages of tools", MaxListPages)
			}
			res, err := cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			tools = append(tools, res.Tools...)
			if len(tools) > MaxToolsPerServer {
				return fmt.Errorf("more than %d tools", MaxToolsPerServer)
			}
			if res.NextCursor == "" {
				return nil
			}
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
	})
	return tools, err
}

// callOutcome classifies a failed tools/call attempt.
type callOutcome int

const (
	// outcomeRefused: the server answered with a JSON-RPC error; the tool did not run.
	outcomeRefused callOutcome = iota
	// outcomeNotSent: the request provably never left (no connection).
	outcomeNotSent
	// outcomeUnknown: the request may have reached the server.
	outcomeUnknown
)

// callError is a failed tools/call with what is known about its fate.
type callError struct {
	outcome callOutcome
	err     error
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// callTool sends one tools/call (one attempt, plus one on a new session
// when the server refused the session: see withSession); a write goes on
// a fresh connection.
func (c *conn) callTool(ctx context.Context, name string, args json.RawMessage, key string, write bool) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if key != "" {
		params.Meta = mcp.Meta{IdempotencyKeyMeta: key}
	}
	var res *mcp.CallToolResult
	a, err := c.withSession(ctx, write, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		res, err = cs.CallTool(ctx, params)
		return err
	})
	if err == nil {
		return res, nil
	}
	switch {
	case isProtocolError(err):
		return nil, &callError{outcomeRefused, err}
	case a.neverSent():
		return nil, &callError{outcomeNotSent, err}
	default:
		return nil, &callError{outcomeUnknown, err}
	}
}

// codeRejectedByTransport is the code of the SDK's "rejected by transport"
// error, which wraps failures to send a request (not a server's answer).
const codeRejectedByTransport = -32005

// isProtocolError reports whether the server answered with a JSON-RPC error.
func isProtocolError(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code != codeRejectedByTransport
}

// backoff is the pause before retry n (1, 2, ...).
func backoff(n int) time.Duration {
	return time.Duration(n*n) * 200 * time.Millisecond
}

package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call is one tools/call the server received.
type Call struct {
	Tool           string
	Arguments      json.RawMessage
	IdempotencyKey string
}

// Server is a running test MCP server.
type Server struct {
	// URL is the streamable-HTTP endpoint.
	URL string
	// MCP is the SDK server; add or replace tools on it.
	MCP *mcp.Server
	// MetaKey is the _meta key read as the idempotency key.
	MetaKey string

	mu        sync.Mutex
	calls     []Call
	expireOne bool
	dropTool  string
	dropLeft  int
	lists     int
	expired   int
	// seen are the session ids requests carried; forgotten those
	// ForgetSessions forgot, answered with forgetAnswer.
	seen         map[string]bool
	forgotten    map[string]bool
	forgetStatus int
	forgetEchoID bool
	refused      int
	conns        int
	headers      http.Header
	http         *httptest.Server
	handler      http.Handler
	// extra are listed after the SDK's own tools (ListAlso).
	extra []*mcp.Tool
}

// ListAlso makes every later tools/list answer end with tools as well,
// after the tools the SDK server lists: a server that lists a name twice,
// which the SDK server itself never does.
func (s *Server) ListAlso(tools ...*mcp.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extra = tools
}

// appendListed rewrites a recorded tools/list answer (JSON or one SSE
// message) to end with extra.
func appendListed(body []byte, extra []*mcp.Tool) []byte {
	rewrite := func(msg []byte) []byte {
		var m map[string]any
		if json.Unmarshal(msg, &m) != nil {
			return msg
		}
		res, _ := m["result"].(map[string]any)
		if res == nil {
			return msg
		}
		tools, _ := res["tools"].([]any)
		for _, t := range extra {
			tools = append(tools, t)
		}
		res["tools"] = tools
		out, err := json.Marshal(m)
		if err != nil {
			return msg
		}
		return out
	}
	lines := bytes.Split(body, []byte("\n"))
	sse := false
	for i, l := range lines {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			lines[i] = append([]byte("data: "), rewrite(d)...)
			sse = true
		}
	}
	if sse {
		return bytes.Join(lines, []byte("\n"))
	}
	return rewrite(body)
}

// Options configure New.
type Options struct {
	// PageSize is the tools/list page size (0: the SDK default).
	PageSize int
	// MetaKey is the _meta key of the idempotency key.
	MetaKey string
}

// New starts a server with no tools; it stops when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{MetaKey: o.MetaKey}
	s.MCP = mcp.NewServer(&mcp.Implementation{Name: "mcptest", Title: "Test CRM", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: o.PageSize})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP }, nil)
	s.handler = s.middleware(h)
	s.http = s.serve(nil)
	s.URL = s.http.URL + "/mcp"
	// The server serving when the test ends (Restart may have replaced
	// the first) stops then, after what the test started later.
	t.Cleanup(func() { s.http.Close() })
	return s
}

// serve starts serving on l (nil: a new loopback port).
func (s *Server) serve(l net.Listener) *httptest.Server {
	hs := httptest.NewUnstartedServer(s.handler)
	if l != nil {
		hs.Listener.Close()
		hs.Listener = l
	}
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	hs.Start()
	return hs
}

// Close stops the server (its URL then refuses connections).
func (s *Server) Close() { s.http.Close() }

// Restart serves again, with the same tools, at the URL a Close left: a
// server that was down and came back. Sessions it gave out before are
// kept (the handler is the same). Call it from the test's goroutine.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", s.http.Listener.Addr().String())
	if err != nil {
		t.Fatalf("mcptest: listen again on %s: %v", s.http.Listener.Addr(), err)
	}
	s.http = s.serve(l)
}

// middleware implements the misbehaviours and counts list requests.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		s.mu.Lock()
		sid := r.Header.Get("Mcp-Session-Id")
		if sid != "" && s.forgotten[sid] {
			s.refused++
			status, echo := s.forgetStatus, s.forgetEchoID
			s.mu.Unlock()
			refuseSession(w, status, echo, msg.ID)
			return
		}
		if sid != "" {
			if s.seen == nil {
				s.seen = map[string]bool{}
			}
			s.seen[sid] = true
		}
		expire := s.expireOne && r.Header.Get("Mcp-Session-Id") != ""
		if expire {
			s.expireOne = false
			s.expired++
		}
		drop := msg.Method == "tools/call" && msg.Params.Name != "" && msg.Params.Name == s.dropTool && s.dropLeft > 0
		if drop {
			s.dropLeft--
		}
		s.headers = r.Header.Clone()
		if msg.Method == "tools/list" {
			s.lists++
		}
		s.mu.Unlock()
		if expire {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if drop {
			// The call arrived (and is counted), then the connection dies
			// before any answer: the client cannot know what happened.
			s.record(msg.Params.Name, body)
			hj, ok := w.(http.Hijacker)
			if !ok {
				panic("mcptest: response writer cannot be hijacked")
			}
			c, _, err := hj.Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		s.mu.Lock()
		extra := s.extra
		s.mu.Unlock()
		if msg.Method == "tools/list" && len(extra) > 0 {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				if k != "Content-Length" {
					w.Header()[k] = v
				}
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(appendListed(rec.Body.Bytes(), extra))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// record notes a tools/call from its raw JSON-RPC body.
func (s *Server) record(tool string, body []byte) {
	var msg struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
			Meta      map[string]any  `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	key, _ := msg.Params.Meta[s.MetaKey].(string)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Tool: tool, Arguments: msg.Params.Arguments, IdempotencyKey: key})
	s.mu.Unlock()
}

// AddTool adds (or replaces) a tool whose handler answers text; the call is
// recorded before the handler runs.
func (s *Server) AddTool(t *mcp.Tool, answer func(args json.RawMessage) *mcp.CallToolResult) {
	s.MCP.AddTool(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key, _ := req.Params.Meta[s.MetaKey].(string)
		s.mu.Lock()
		s.calls = append(s.calls, Call{Tool: t.Name, Arguments: req.Params.Arguments, IdempotencyKey: key})
		s.mu.Unlock()
		return answer(req.Params.Arguments), nil
	})
}

// Text is an answer of one text block.
func Text(text string) func(json.RawMessage) *mcp.CallToolResult {
	return func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	}
}

// Calls returns the tools/call requests received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsOf returns the calls of one tool.
func (s *Server) CallsOf(tool string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// Lists returns how many tools/list requests arrived.
func (s *Server) Lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// ExpireSession makes the server answer the next request that carries a
// session id with 404, as a server that lost the session does.
func (s *Server) ExpireSession() {
	s.mu.Lock()
	s.expireOne = true
	s.mu.Unlock()
}

// ForgetSessions makes the server forget every session it gave out so
// far, as a server that restarted does: every later request that carries
// one of their ids is answered status (and not processed), with the body
// of the TypeScript SDK's example server (which the MCP reference server
// copies), a JSON-RPC error {"code":-32000,"message":"Bad Request: No
// valid session ID provided"}. That server answers 400 where the spec says
// 404, and echoes the request's id only when its HTTP framework parsed the
// body (the reference server's does not: echoID false).
func (s *Server) ForgetSessions(status int, echoID bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forgotten == nil {
		s.forgotten = map[string]bool{}
	}
	for id := range s.seen {
		s.forgotten[id] = true
	}
	s.seen = nil
	s.forgetStatus, s.forgetEchoID = status, echoID
}

// Refused returns how many requests were answered for a forgotten session.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// refuseSession answers a request on a forgotten session.
func refuseSession(w http.ResponseWriter, status int, echoID bool, id json.RawMessage) {
	answer := map[string]any{"jsonrpc": "2.0", "error": map[string]any{"code": -32000, "message": "Bad Request: No valid session ID provided"}}
	if echoID && len(id) > 0 {
		answer["id"] = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer)
}

// DropCallsOf makes the next n tools/call requests of tool arrive (and be
// recorded) and then lose their connection before any answer.
func (s *Server) DropCallsOf(tool string, n int) {
	s.mu.Lock()
	s.dropTool, s.dropLeft = tool, n
	s.mu.Unlock()
}

// Conns returns how many TCP connections clients opened so far.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Expired returns how many requests were answered 404 by ExpireSession.
func (s *Server) Expired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// LastHeader returns a header of the last POST the server received.
func (s *Server) LastHeader(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers.Get(name)
}

// ObjectSchema is a JSON schema of an object with the given string
// properties, all required, no others allowed.
func ObjectSchema(props ...string) json.RawMessage {
	p := map[string]any{}
	for _, name := range props {
		p[name] = map[string]any{"type": "string"}
	}
	schema := map[string]any{"type": "object", "properties": p, "additionalProperties": false}
	if len(props) > 0 {
		schema["required"] = props
	}
	b, _ := json.Marshal(schema)
	return b
}

// Bool returns a pointer to b (for annotation hints).
func Bool(b bool) *bool { return &b }

package apitest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/gateway"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
)

// Script is the default scripted model: read the pricing page and a write
// that needs approval in one turn, then finish.
const Script = `{"turns":[
 {"content":[{"type":"text","text":"Reading, then updating the page."},
             {"type":"tool_use","id":"toolu_read","name":"read_document","input":{"path":"pages/pricing.md"}},
             {"type":"tool_use","id":"toolu_write","name":"write_document","input":{"path":"pages/pricing.md","text":"# Pricing\n\n- Team: 12 EUR\n"}}],
  "usage":{"input_tokens":100,"output_tokens":20}},
 {"content":[{"type":"text","text":"Done: the Team plan now costs 12 EUR."}],"usage":{"input_tokens":150,"output_tokens":12}}
]}`

// Pricing is the seeded pages/pricing.md.
const Pricing = "# Pricing\n\n- Team: 10 EUR\n"

// Options configure Start.
type Options struct {
	// Script is the scripted model (JSON); empty: Script.
	Script string
	// Observe, when set, sees every request to the model (to check what
	// the model was told), before the scripted model answers it.
	Observe func(loop.ModelRequest)
	// Principals get one bearer token each (Server.Token); empty: alice,
	// bob and carol.
	Principals []string
	// Now is the application's clock (nil: the wall clock).
	Now func() time.Time
	// Validator checks the traffic (nil: a new one for the current spec).
	Validator *apispec.Validator
	// Webhooks configure webhook delivery (nil: none).
	Webhooks *app.Webhooks
	// Rows and States, when both set, replace the embedded store (the
	// integration tier passes DynamoDB and S3 adapters).
	Rows   runs.RowStore
	States runs.StateStore
	// Governance is the directory and policy (zero: neither).
	Governance app.Governance
	// Dir, when set, is the directory of a server stopped before (its
	// Dir): the new server opens its store again, as a restart with, say,
	// another directory file would. Empty: a new one.
	Dir string
}

// Server is a running local server.
type Server struct {
	// URL is the base URL, http://127.0.0.1:<port>.
	URL string
	// App is the in-process application.
	App *app.Local
	// Dir holds the store, content/ and outbox/.
	Dir string
	// Validator checks every exchange; its Unseen tells what a suite missed.
	Validator *apispec.Validator
	tokens    map[string]string // principal -> token
	mail      *syncBuffer
	stop      func()
}

// Links returns the approval links mailed to approver so far, oldest
// first.
func (s *Server) Links(approver string) []string {
	var out []string
	prefix := "approval link for " + approver + ": "
	for _, line := range strings.Split(s.mail.String(), "\n") {
		if link, ok := strings.CutPrefix(line, prefix); ok {
			out = append(out, strings.TrimSpace(link))
		}
	}
	return out
}

// WaitLinks waits until at least n approval links were mailed to approver
// and returns them, oldest first. The mail is sent after the suspension is
// stored, so a run seen WAITING_FOR_APPROVAL may not have its links yet.
// It fails the test after 30 s (a generous bound for a loaded machine; it
// asserts nothing about speed).
func (s *Server) WaitLinks(t testing.TB, approver string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		links := s.Links(approver)
		if len(links) >= n {
			return links
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s got %d approval links, want %d", approver, len(links), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Mail returns every approval mail written to the outbox so far (the
// .eml files, concatenated).
func (s *Server) Mail() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(s.Dir, "outbox", "*"))
	sort.Strings(files)
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil { //nolint:gosec // the test's own outbox
			b.Write(data)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Token returns the bearer token of a principal given in Options.
func (s *Server) Token(principal string) string {
	tok, ok := s.tokens[principal]
	if !ok {
		panic("apitest: no token for " + principal)
	}
	return tok
}

// Principals returns the principals with tokens, sorted.
func (s *Server) Principals() []string {
	var out []string
	for p := range s.tokens {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Start starts a server; it stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Script == "" {
		o.Script = Script
	}
	if len(o.Principals) == 0 {
		o.Principals = []string{"alice", "bob", "carol"}
	}
	v := o.Validator
	if v == nil {
		v = apispec.MustValidator(t)
	}
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(dir, "content", "pages"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "content", "pages", "pricing.md"), []byte(Pricing), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := scripted.Parse([]byte(o.Script))
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	var model loop.Model = script
	if o.Observe != nil {
		model = loop.ModelFunc(func(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
			o.Observe(req)
			return script.Generate(ctx, req)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mail := &syncBuffer{}
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: model, BaseURL: base, Logger: logger, Now: o.Now, MailOut: mail, Webhooks: o.Webhooks, Rows: o.Rows, States: o.States, Governance: o.Governance})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s := &Server{URL: base, App: local, Dir: dir, Validator: v, tokens: map[string]string{}, mail: mail}
	byToken := map[string]string{}
	for _, p := range o.Principals {
		tok := p + "-token-" + gateway.NewToken()
		s.tokens[p] = tok
		byToken[tok] = p
	}
	h := v.Handler(t, local.API.Handle)
	gw := &gateway.Gateway{StartRun: h, Resume: h, Tokens: byToken, Logger: logger}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.stop = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
		}
		local.Dispatcher.Wait()
		_ = local.Close()
	})
	t.Cleanup(s.stop)
	return s
}

// Stop stops the server before the test ends (once; the test's end stops
// it otherwise): its workers finish and its store is closed, so another
// server may open it (Options.Dir).
func (s *Server) Stop() { s.stop() }

// Client returns an HTTP client whose requests and responses are validated
// too (the gateway's own answers, such as a refused token, included).
func (s *Server) Client(t testing.TB) *http.Client {
	return &http.Client{Transport: s.Validator.Transport(t, nil), Timeout: 30 * time.Second}
}

// syncBuffer is a bytes.Buffer safe for the workers that mail links while
// the test reads them.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testWriter sends log lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

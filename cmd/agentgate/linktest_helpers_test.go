package main

// Helpers of the approval-link tests (approval_link_test.go and the
// integration and browser suites): a local server driven over HTTP, the
// approval mail read back from the outbox output, and page requests.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/approval/approvaltest"
	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/gateway"
	"github.com/agentgate/agentgate/internal/loop"
)

// Bearer tokens of the link tests' callers: alice starts runs, bob is an
// API approver; the e-mail approver decides through the link only.
const (
	linkAliceToken = "alice-link-token-0123456789"
	linkBobToken   = "bob-link-token-0123456789ab"
	linkApprover   = "ops@example.com"
)

// linkWait bounds every poll of the link tests.
const linkWait = 60 * time.Second

// syncBuffer is a bytes.Buffer safe for the worker goroutines that print
// approval links while the test reads them.
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

// linkServer is a local agentgate server for the link tests with the
// clients to drive it.
type linkServer struct {
	t   *testing.T
	url string
	dir string
	// mail receives the "approval link for <approver>: <link>" lines.
	mail *syncBuffer
	logs *syncBuffer
	// app is the in-process application (nil unless built by
	// startClockedServer).
	app *app.Local
	// handle is the API handler behind the server.
	handle gateway.Handler
	alice  *apiClient
	bob    *apiClient
}

// linkServerOptions configure startLinkServer.
type linkServerOptions struct {
	// script is a scripted model (JSON); empty: the demo script.
	script string
	// store is "" (embedded) or "aws".
	store string
}

var linkTokens = map[string]string{linkAliceToken: "alice", linkBobToken: "bob"}

// startLinkServer starts the local server (startLocal, as `serve` does) on
// 127.0.0.1:0 with a fresh folder, alice and bob as bearer-token callers
// and no purge timer, so no reminder or expiry happens behind the test's
// back.
func startLinkServer(t *testing.T, o linkServerOptions) *linkServer {
	t.Helper()
	dir := t.TempDir()
	model := ""
	if o.script != "" {
		model = "scripted:" + writeScript(t, dir, o.script)
	}
	ls := &linkServer{t: t, dir: dir, mail: &syncBuffer{}, logs: &syncBuffer{}}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: model, store: o.store, tokens: linkTokens,
		mailOut: ls.mail, logger: slog.New(slog.NewJSONHandler(ls.logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		ls.dumpLogs()
	})
	ls.url, ls.handle = s.URL, s.App.API.Handle
	ls.clients()
	return ls
}

// startClockedServer serves the embedded-default application as startLocal
// does (same app.OpenLocal, same gateway), but with a clock the test moves
// and a model of the test's choosing: for expiry and reminders, which
// startLocal offers no clock for, and to see what the model is sent.
func startClockedServer(t *testing.T, clock *fakeClock, model loop.Model) *linkServer {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, seedDocuments(dir))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ls := &linkServer{t: t, dir: dir, url: "http://" + ln.Addr().String(), mail: &syncBuffer{}, logs: &syncBuffer{}}
	logger := slog.New(slog.NewJSONHandler(ls.logs, nil))
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: model, BaseURL: ls.url, MailOut: ls.mail, Logger: logger, Now: clock.Now})
	if err != nil {
		ln.Close()
		require.NoError(t, err)
	}
	srv := &http.Server{Handler: &gateway.Gateway{StartRun: local.API.Handle, Resume: local.API.Handle, Tokens: linkTokens, Logger: logger},
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		// A browser may hold a pre-connected socket that never sends a
		// request; Shutdown counts such a connection as idle only once it
		// is 5 s old, so wait past that and then close what is left.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Logf("shutdown: %v; closing the remaining connections", err)
			assert.NoError(t, srv.Close())
		}
		local.Dispatcher.Wait()
		assert.NoError(t, local.Close())
		ls.dumpLogs()
	})
	ls.app, ls.handle = local, local.API.Handle
	ls.clients()
	return ls
}

func (ls *linkServer) clients() {
	ls.alice = &apiClient{t: ls.t, base: ls.url, token: linkAliceToken}
	ls.bob = &apiClient{t: ls.t, base: ls.url, token: linkBobToken}
}

func (ls *linkServer) dumpLogs() {
	if ls.t.Failed() {
		ls.t.Logf("server log:\n%s", ls.logs.String())
	}
}

// writeScript writes a scripted model into dir and returns its path.
func writeScript(t *testing.T, dir, script string) string {
	t.Helper()
	path := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o600))
	return path
}

// fakeClock is a clock the test moves forward.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to at.
func (c *fakeClock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}

// recordingModel wraps a model and keeps every request it is sent.
type recordingModel struct {
	model loop.Model
	mu    sync.Mutex
	reqs  []loop.ModelRequest
}

func (m *recordingModel) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.model.Generate(ctx, req)
}

// toolResults returns every tool_result block the model was sent for the
// call id, in the order of the requests.
func (m *recordingModel) toolResults(callID string) []loop.Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []loop.Block
	for _, req := range m.reqs {
		for _, msg := range req.Messages {
			for _, b := range msg.Content {
				if b.Type == loop.BlockToolResult && b.ToolUseID == callID {
					out = append(out, b)
				}
			}
		}
	}
	return out
}

// startRun starts a run as alice with the e-mail approver (and bob) and
// returns its id; extra fields are merged into the request.
func (ls *linkServer) startRun(extra map[string]any) string {
	ls.t.Helper()
	req := map[string]any{
		"prompt":    "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers": []string{"bob", linkApprover},
	}
	for k, v := range extra {
		req[k] = v
	}
	var run runJSON
	ls.alice.do(http.MethodPost, "/runs", req, http.StatusAccepted, &run)
	require.NotEmpty(ls.t, run.ID)
	return run.ID
}

// suspend starts a run and waits until it waits for approval and its
// approval mail was recorded; it returns the run and the link mailed to
// linkApprover.
func (ls *linkServer) suspend(extra map[string]any) (runJSON, string) {
	ls.t.Helper()
	id := ls.startRun(extra)
	ls.alice.waitStatus(id, "WAITING_FOR_APPROVAL")
	ls.alice.waitEvent(id, "notified")
	return ls.alice.run(id), ls.linkFor(id, linkApprover, false)
}

// linkFor returns the approval link mailed to approver for run id (the
// first mail, or with reminder the reminder): read from the run's .eml file
// in the outbox (text and HTML part carry the same link) and checked
// against the line the outbox printed.
func (ls *linkServer) linkFor(id, approver string, reminder bool) string {
	ls.t.Helper()
	var link string
	poll(ls.t, fmt.Sprintf("approval mail (reminder %t) to %s for run %s", reminder, approver, id), func() bool {
		entries, err := os.ReadDir(filepath.Join(ls.dir, "outbox"))
		require.NoError(ls.t, err)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".eml") || !strings.Contains(e.Name(), id) ||
				strings.Contains(e.Name(), "-reminder-") != reminder {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(ls.dir, "outbox", e.Name()))
			require.NoError(ls.t, err)
			m, err := approvaltest.ParseEML(string(raw))
			if err != nil || len(m.To) != 1 || m.To[0] != approver {
				continue // not this approver's, or still being written
			}
			textLink, textOK := approvaltest.ExtractLink(m.Text, ls.url)
			htmlLink, htmlOK := approvaltest.ExtractLink(m.HTML, ls.url)
			if !textOK || !htmlOK {
				continue // still being written
			}
			require.Equal(ls.t, textLink, htmlLink, "text and HTML part of %s carry the same link", e.Name())
			link = textLink
		}
		// The outbox prints the link once the file is written.
		return link != "" && slices.Contains(printedLinks(ls.mail.String(), approver), link)
	})
	return link
}

var printedLink = regexp.MustCompile(`approval link for (\S+): (\S+)`)

// printedLinks returns the links the outbox printed for approver, oldest
// first.
func printedLinks(out, approver string) []string {
	var links []string
	for _, m := range printedLink.FindAllStringSubmatch(out, -1) {
		if m[1] == approver {
			links = append(links, m[2])
		}
	}
	return links
}

// runJSON is the part of GET /runs/{id} the link tests read.
type runJSON struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Reason  string `json:"termination_reason"`
	Version int64  `json:"version"`
	Pending *struct {
		SuspensionID string    `json:"suspension_id"`
		TurnDigest   string    `json:"turn_digest"`
		Deadline     time.Time `json:"deadline"`
		Calls        []struct {
			ID            string          `json:"id"`
			Tool          string          `json:"tool"`
			Input         json.RawMessage `json:"input"`
			NeedsApproval bool            `json:"needs_approval"`
			Preview       string          `json:"preview"`
		} `json:"calls"`
	} `json:"pending"`
	Decision *struct {
		By       string    `json:"by"`
		Via      string    `json:"via"`
		At       time.Time `json:"at"`
		Decision struct {
			TurnDigest string `json:"turn_digest"`
			Action     string `json:"action"`
			Message    string `json:"message"`
			Calls      []struct {
				CallID  string `json:"call_id"`
				Action  string `json:"action"`
				Message string `json:"message"`
			} `json:"calls"`
		} `json:"decision"`
	} `json:"decision"`
	Output json.RawMessage `json:"output"`
}

// eventJSON is one event of GET /runs/{id}/events.
type eventJSON struct {
	Seq   int64           `json:"seq"`
	Type  string          `json:"type"`
	Actor string          `json:"actor"`
	Data  json.RawMessage `json:"data"`
}

// apiClient calls the REST API with a bearer token.
type apiClient struct {
	t     *testing.T
	base  string
	token string
}

// do sends body as JSON, requires status want and decodes the answer into
// into (nil: ignore it).
func (c *apiClient) do(method, path string, body any, want int, into any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: got %d, want %d: %s", method, path, resp.StatusCode, want, b)
	if into != nil {
		require.NoError(c.t, json.Unmarshal(b, into), "%s %s: %s", method, path, b)
	}
}

// run reads GET /runs/{id}.
func (c *apiClient) run(id string) runJSON {
	c.t.Helper()
	var r runJSON
	c.do(http.MethodGet, "/runs/"+id, nil, http.StatusOK, &r)
	return r
}

// events reads the whole audit trail of run id.
func (c *apiClient) events(id string) []eventJSON {
	c.t.Helper()
	var all []eventJSON
	after := int64(0)
	for range 100 {
		var page struct {
			Events []eventJSON `json:"events"`
			Next   *int64      `json:"next"`
		}
		c.do(http.MethodGet, fmt.Sprintf("/runs/%s/events?after=%d", id, after), nil, http.StatusOK, &page)
		all = append(all, page.Events...)
		if page.Next == nil || len(page.Events) == 0 {
			return all
		}
		after = *page.Next
	}
	c.t.Fatalf("run %s: more than 100 event pages", id)
	return nil
}

// waitStatus polls run id until it has status (a different terminal status
// fails at once) and returns it.
func (c *apiClient) waitStatus(id, status string) runJSON {
	c.t.Helper()
	var r runJSON
	poll(c.t, "run "+id+" "+status, func() bool {
		r = c.run(id)
		if r.Status != status && isTerminal(r.Status) {
			c.t.Fatalf("run %s ended %s/%s while waiting for %s: %s", id, r.Status, r.Reason, status, r.Output)
		}
		return r.Status == status
	})
	return r
}

// waitEvent polls the events of run id until one of type typ is there.
func (c *apiClient) waitEvent(id, typ string) eventJSON {
	c.t.Helper()
	var ev eventJSON
	poll(c.t, "event "+typ+" of run "+id, func() bool {
		for _, e := range c.events(id) {
			if e.Type == typ {
				ev = e
				return true
			}
		}
		return false
	})
	return ev
}

func isTerminal(status string) bool {
	switch status {
	case "COMPLETED", "FAILED", "CANCELLED", "EXPIRED":
		return true
	}
	return false
}

// poll calls cond every 20 ms until it is true, failing after linkWait.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(linkWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %s", what, linkWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// page is an answer of an approval-link route.
type page struct {
	status int
	header http.Header
	body   string
}

var runIDOnPage = regexp.MustCompile(`<dt>Run</dt><dd class="mono">([^<]+)</dd>`)

// runID returns the run id a confirm page shows.
func (p page) runID() string {
	if m := runIDOnPage.FindStringSubmatch(p.body); m != nil {
		return m[1]
	}
	return ""
}

// digest returns the turn digest in the confirm page's form.
func (p page) digest() string {
	m := regexp.MustCompile(`name="digest" value="([0-9a-f]{64})"`).FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return m[1]
}

// getPage requests an approval link with GET or HEAD, without credentials.
func getPage(t *testing.T, method, link string) page {
	t.Helper()
	req, err := http.NewRequest(method, link, nil)
	require.NoError(t, err)
	return send(t, req)
}

// postForm posts body to an approval link with the given Content-Type.
func postForm(t *testing.T, link, contentType, body string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, link, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return send(t, req)
}

// decideForm posts the confirm form: the digest and the action, plus extra
// fields.
func decideForm(t *testing.T, link, digest, action string, extra url.Values) page {
	t.Helper()
	form := url.Values{approvalpage.FieldDigest: {digest}, approvalpage.FieldAction: {action}}
	for k, v := range extra {
		form[k] = v
	}
	return postForm(t, link, "application/x-www-form-urlencoded", form.Encode())
}

func send(t *testing.T, req *http.Request) page {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// requirePage checks an approval page: its status, that it is HTML with
// the security headers (no scripts or outside resources, no Referer, no
// caching), and that its body holds each of wants.
func requirePage(t *testing.T, p page, status int, wants ...string) {
	t.Helper()
	require.Equal(t, status, p.status, "page status; body:\n%s", p.body)
	assertSecurityHeaders(t, p.header)
	for _, w := range wants {
		require.Contains(t, p.body, w, "page (status %d) lacks %q", p.status, w)
	}
}

// assertSecurityHeaders checks the headers every approval page carries.
func assertSecurityHeaders(t *testing.T, h http.Header) {
	t.Helper()
	assert.Equal(t, "text/html; charset=utf-8", h.Get("Content-Type"))
	csp := h.Get("Content-Security-Policy")
	for _, directive := range []string{"default-src 'none'", "form-action 'self'", "frame-ancestors 'none'"} {
		assert.Contains(t, csp, directive, "Content-Security-Policy")
	}
	assert.NotContains(t, csp, "script-src", "Content-Security-Policy allows no scripts")
	assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	assert.Equal(t, "no-store", h.Get("Cache-Control"))
	assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
}

// documentText reads a document of a local server's embedded store.
func (ls *linkServer) documentText(name string) string {
	ls.t.Helper()
	b, err := os.ReadFile(filepath.Join(ls.dir, "content", filepath.FromSlash(name)))
	require.NoError(ls.t, err)
	return string(b)
}

// toolExecutions counts the tool_executed events of tool whose call ran
// (approved or edited, not denied).
func toolExecutions(t *testing.T, evs []eventJSON, tool string) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.Type != "tool_executed" {
			continue
		}
		var d struct{ Tool, Action string }
		require.NoError(t, json.Unmarshal(e.Data, &d), "tool_executed data %s", e.Data)
		if d.Tool == tool && d.Action != "deny" {
			n++
		}
	}
	return n
}

// eventsOf returns the events of type typ.
func eventsOf(evs []eventJSON, typ string) []eventJSON {
	var out []eventJSON
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// waitEventCount polls the events of run id until n events of type typ are
// there, and returns all events.
func (c *apiClient) waitEventCount(id, typ string, n int) []eventJSON {
	c.t.Helper()
	var evs []eventJSON
	poll(c.t, fmt.Sprintf("%d %s events of run %s", n, typ, id), func() bool {
		evs = c.events(id)
		return len(eventsOf(evs, typ)) >= n
	})
	return evs
}

// secondLinkFor returns the link mailed to linkApprover for run id that is
// not old: the mail of a later suspension.
func (ls *linkServer) secondLinkFor(id, old string) string {
	ls.t.Helper()
	var link string
	poll(ls.t, "a second approval link for run "+id, func() bool {
		for _, l := range printedLinks(ls.mail.String(), linkApprover) {
			if l != old && ls.linkRunID(l) == id {
				link = l
			}
		}
		return link != ""
	})
	return link
}

// linkRunID returns the run id the page behind link shows ("" unless it is
// a confirm page). A GET never changes state, so reading is harmless.
func (ls *linkServer) linkRunID(link string) string {
	ls.t.Helper()
	p := getPage(ls.t, http.MethodGet, link)
	if p.status != http.StatusOK {
		return ""
	}
	return p.runID()
}

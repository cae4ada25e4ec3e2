package main

// Helpers of the approval-link tests (approval_link_test.go and the
// integration and browser suites): a local server driven over HTTP, the
// approval mail read back from the outbox output, and page requests.

import (
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

// linkServer is a local agentgate server for the link tests with the
// clients to drive it.
type linkServer struct {
	t   *testing.T
	url string
	dir string
	// mail receives the "approval link for <approver>: <link>" lines.
	mail *syncBuffer
	logs *syncBuffer
	// handle is the API handler behind the server.
	handle gateway.Handler
	alice  *apiClient
}

// linkServerOptions configure startLinkServer.
type linkServerOptions struct {
	// script is a scripted model (JSON); empty: the demo script.
	script string
	// store is "" (embedded) or "aws".
	store string
	// tools is a tool-sources file (serve --tools); empty: none.
	tools string
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
		// The scripts read and write the demo pages, which a new store
		// starts with only for the demo script.
		seedDemoDocuments(t, dir)
	}
	ls := &linkServer{t: t, dir: dir, mail: &syncBuffer{}, logs: &syncBuffer{}}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, model: model, store: o.store, tools: o.tools, tokens: linkTokens,
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

// startModelServer serves the embedded-default application as startLocal
// does (same app.OpenLocal, same gateway), with a model of the test's
// choosing (startLocal takes a model spec only): to see what the model is
// sent.
func startModelServer(t *testing.T, model loop.Model) *linkServer {
	t.Helper()
	dir := t.TempDir()
	seedDemoDocuments(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ls := &linkServer{t: t, dir: dir, url: "http://" + ln.Addr().String(), mail: &syncBuffer{}, logs: &syncBuffer{}}
	logger := slog.New(slog.NewJSONHandler(ls.logs, nil))
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: model, BaseURL: ls.url, MailOut: ls.mail, Logger: logger})
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
	ls.handle = local.API.Handle
	ls.clients()
	return ls
}

func (ls *linkServer) clients() {
	ls.alice = &apiClient{t: ls.t, base: ls.url, token: linkAliceToken}
}

func (ls *linkServer) dumpLogs() {
	if ls.t.Failed() {
		ls.t.Logf("server log:\n%s", ls.logs.String())
	}
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

// page is an answer of an approval-link route.
type page struct {
	status int
	header http.Header
	body   string
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

// seedDemoDocuments writes the demo documents into dir's content folder,
// as a new store for the demo script starts with them.
func seedDemoDocuments(t *testing.T, dir string) {
	t.Helper()
	for name, text := range demoDocuments {
		path := filepath.Join(dir, "content", filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	}
}

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// The handler fuzz targets drive the real API (httpapi.API.Handle, the
// handler of the Lambdas and of `agentgate serve`) with API Gateway proxy
// events over the embedded store, and check every exchange against
// openapi.yaml. Their invariants: no panic and no 5xx; a refused request
// writes nothing; an accepted body is canonical (strict I-JSON, RFC 7493:
// no duplicate member names, valid UTF-8; every member spelled as the
// canonical encoding spells it) and what is stored is exactly its decoded
// value; HTML escapes everything it shows.

// quiet drops the log lines of the millions of requests a fuzz run makes.
var quiet = slog.New(slog.DiscardHandler)

// countingRows counts the writes that reach the row store.
type countingRows struct {
	runs.RowStore
	writes atomic.Int64
}

func (c *countingRows) Write(ctx context.Context, w runs.Write) error {
	c.writes.Add(1)
	return c.RowStore.Write(ctx, w)
}

func (c *countingRows) DeleteRun(ctx context.Context, id string, tokens []string) error {
	c.writes.Add(1)
	return c.RowStore.DeleteRun(ctx, id, tokens)
}

// newFuzzFixture is newFixture for a fuzz target: built once per target on
// f, in memory where possible, its row writes counted, its logs dropped;
// each input sets fx.t before using it.
func newFuzzFixture(f *testing.F) (*fixture, *countingRows) {
	f.Helper()
	var rows *countingRows
	fx := buildFixture(f, fuzzDir(f), script, func(db runs.RowStore) runs.RowStore {
		rows = &countingRows{RowStore: db}
		return rows
	})
	fx.api.Logger, fx.worker.Logger = quiet, quiet
	return fx, rows
}

// fuzzDir returns a folder for a fuzz target's store, in memory (/dev/shm)
// where there is one: the embedded store syncs every commit to disk, which
// would make most of a fuzz run's time waiting for fsync.
func fuzzDir(f *testing.F) string {
	f.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "agentgate-fuzz-")
	if err != nil {
		return f.TempDir()
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// handle serves ev and fails t on a 5xx or a Go error. It checks the
// exchange against openapi.yaml when the request was accepted, and for one
// refused request in eight (chosen by a hash of the request, so an input is
// always checked or never): the check costs some milliseconds, a hundred
// times the request.
func handle(t *testing.T, v *apispec.Validator, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), ev events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	t.Helper()
	resp, err := h(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s %s: Go error %v", ev.HTTPMethod, ev.Path, err)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("%s %s answered %d: %s", ev.HTTPMethod, ev.Path, resp.StatusCode, resp.Body)
	}
	sum := fnv.New32a()
	_, _ = sum.Write([]byte(ev.HTTPMethod + " " + ev.Path + "\n" + ev.Body))
	if resp.StatusCode < 300 || sum.Sum32()%8 == 0 {
		answered := func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return resp, nil
		}
		_, _ = v.Handler(t, answered)(context.Background(), ev)
	}
	return resp
}

// eventBody returns the body of an API Gateway event in testdata, with the
// replacements applied.
func eventBody(f *testing.F, name string, replace ...string) string {
	f.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	var e events.APIGatewayProxyRequest
	if err := json.Unmarshal(b, &e); err != nil {
		f.Fatal(err)
	}
	return strings.NewReplacer(replace...).Replace(e.Body)
}

// checkCanonical reports why an accepted JSON body is not in canonical
// form, given the value the server decoded from it: the body must be
// I-JSON (RFC 7493: valid UTF-8, valid escapes, unique member names), and
// every member it has must appear, spelled the same and with the same
// value, in the value's canonical encoding (members the encoding leaves
// out must be empty: null, "", 0, false, [] or {}).
func checkCanonical(body []byte, decoded any) error {
	if !jsontext.Value(body).IsValid() {
		return fmt.Errorf("the body is not I-JSON (duplicate member names, invalid UTF-8 or a lone surrogate escape)")
	}
	canon, err := json.Marshal(decoded)
	if err != nil {
		return fmt.Errorf("the decoded value does not encode: %w", err)
	}
	var sent, want any
	if err := decodeNumbers(body, &sent); err != nil {
		return err
	}
	if err := decodeNumbers(canon, &want); err != nil {
		return err
	}
	return sameMembers("$", sent, want)
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func sameMembers(path string, sent, want any) error {
	switch s := sent.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: sent an object, stored %T", path, want)
		}
		for k, sv := range s {
			wv, ok := w[k]
			if !ok {
				if !emptyJSON(sv) {
					return fmt.Errorf("%s: member %q was accepted, but the canonical form has no such member (%v)", path, k, keys(w))
				}
				continue
			}
			if err := sameMembers(path+"."+k, sv, wv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) != len(s) {
			return fmt.Errorf("%s: sent %d elements, stored %v", path, len(s), want)
		}
		for i := range s {
			if err := sameMembers(fmt.Sprintf("%s[%d]", path, i), s[i], w[i]); err != nil {
				return err
			}
		}
		return nil
	case json.Number:
		w, ok := want.(json.Number)
		a, err1 := strconv.ParseFloat(string(s), 64)
		b, err2 := strconv.ParseFloat(string(w), 64)
		if !ok || err1 != nil || err2 != nil || a != b {
			return fmt.Errorf("%s: sent %s, stored %v", path, s, want)
		}
		return nil
	default:
		if sent != want && !(sent == nil && emptyJSON(want)) {
			return fmt.Errorf("%s: sent %#v, stored %#v", path, sent, want)
		}
		return nil
	}
}

// sameJSON reports whether a and b encode alike (raw JSON members such as
// tool inputs compacted).
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func emptyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// FuzzStartRun fuzzes the body of POST /runs.
func FuzzStartRun(f *testing.F) {
	fx, rows := newFuzzFixture(f)
	v := apispec.MustValidator(f)
	f.Add(eventBody(f, "post-runs-iam.json"))
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		writes := rows.writes.Load()
		fx.mu.Lock()
		fx.jobs = nil
		fx.mu.Unlock()
		resp := handle(t, v, fx.api.Handle, req("POST", "/runs", alice, body))
		fx.mu.Lock()
		jobs := len(fx.jobs)
		fx.mu.Unlock()
		if resp.StatusCode != 202 {
			if n := rows.writes.Load() - writes; n != 0 || jobs != 0 {
				t.Fatalf("refused with %d, but wrote %d times and dispatched %d jobs: %s", resp.StatusCode, n, jobs, resp.Body)
			}
			return
		}
		if jobs != 1 {
			t.Fatalf("accepted, dispatched %d jobs", jobs)
		}
		var view httpapi.RunView
		if err := json.Unmarshal([]byte(resp.Body), &view); err != nil {
			t.Fatal(err)
		}
		var sent service.StartRequest
		if err := json.Unmarshal([]byte(body), &sent); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		if err := checkCanonical([]byte(body), sent); err != nil {
			t.Fatalf("accepted a non-canonical body: %v\n%q", err, body)
		}
		r, err := fx.store.Get(context.Background(), view.ID)
		if err != nil {
			t.Fatal(err)
		}
		var stored service.StartRequest
		if err := json.Unmarshal(r.Request, &stored); err != nil {
			t.Fatalf("the stored request does not decode: %v", err)
		}
		sent.WebhookURL, sent.WebhookEvents = "", nil
		if !sameJSON(stored, sent) {
			t.Fatalf("stored request %s, sent %q", r.Request, body)
		}
		if r.Status != runs.StatusQueued || r.Initiator != alice || !slices.Equal(r.Approvers, sent.Approvers) {
			t.Fatalf("stored run %+v does not match the request", r)
		}
	})
}

// FuzzDecision fuzzes the body of POST /runs/{id}/decision on a run waiting
// for approval; DIGEST in the input stands for the run's turn digest (the
// calls are tu_read and tu_write).
func FuzzDecision(f *testing.F) {
	fx, rows := newFuzzFixture(f)
	v := apispec.MustValidator(f)
	f.Add(eventBody(f, "post-decision-iam.json"))
	var cur *runs.Run
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		if cur == nil {
			cur = fx.waitingRun()
		}
		body = strings.ReplaceAll(body, "DIGEST", cur.TurnDigest)
		writes := rows.writes.Load()
		resp := handle(t, v, fx.api.Handle, req("POST", "/runs/"+cur.ID+"/decision", bob, body))
		after, err := fx.store.Get(context.Background(), cur.ID)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 202 {
			if n := rows.writes.Load() - writes; n != 0 || after.Version != cur.Version {
				t.Fatalf("refused with %d, but wrote %d times (version %d -> %d): %s", resp.StatusCode, n, cur.Version, after.Version, resp.Body)
			}
			return
		}
		used := cur
		cur = nil // decided: the next input gets a new run
		var sent loop.Decision
		if err := json.Unmarshal([]byte(body), &sent); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		if err := checkCanonical([]byte(body), sent); err != nil {
			t.Fatalf("accepted a non-canonical body: %v\n%q", err, body)
		}
		if after.Status != runs.StatusResuming || after.Decision == nil || after.DecidedBy != bob || after.SuspensionID != used.SuspensionID {
			t.Fatalf("accepted, but the run is %s, decided by %q", after.Status, after.DecidedBy)
		}
		if !sameJSON(*after.Decision, sent) {
			t.Fatalf("stored decision %+v, sent %q", *after.Decision, body)
		}
		fx.drain()
	})
}

// linkFixture is the local application (app.OpenLocal, the wiring of
// `agentgate serve`: approval pages, link tokens, the outbox mailer) with
// one run waiting for ops@example.com, who got a link.
type linkFixture struct {
	local *app.Local
	mail  *lockedBuffer
	v     *apispec.Validator
	run   *runs.Run
	token string
	links int
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLinkFixture(f *testing.F) *linkFixture {
	f.Helper()
	dir := fuzzDir(f)
	if err := os.MkdirAll(filepath.Join(dir, "content", "pages"), 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "content", "pages", "pricing.md"), []byte(apitest.Pricing), 0o600); err != nil {
		f.Fatal(err)
	}
	model, err := scripted.Parse([]byte(apitest.Script))
	if err != nil {
		f.Fatal(err)
	}
	mail := &lockedBuffer{}
	local, err := app.OpenLocal(app.LocalOptions{Dir: dir, Model: model, BaseURL: "https://gate.example.com", MailOut: mail, Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		local.Dispatcher.Wait()
		local.Close()
	})
	return &linkFixture{local: local, mail: mail, v: apispec.MustValidator(f)}
}

// waiting returns the run waiting for a decision and the raw token of its
// link, starting a new run when the last one was decided.
func (lf *linkFixture) waiting(t *testing.T) (*runs.Run, string) {
	t.Helper()
	if lf.run != nil {
		return lf.run, lf.token
	}
	ev := req("POST", "/runs", "", `{"prompt":"update pricing","approvers":["ops@example.com"]}`)
	ev.RequestContext.Authorizer = map[string]any{"principalId": "alice"}
	resp := handle(t, lf.v, lf.local.API.Handle, ev)
	if resp.StatusCode != 202 {
		t.Fatalf("start a run: %d %s", resp.StatusCode, resp.Body)
	}
	var view httpapi.RunView
	if err := json.Unmarshal([]byte(resp.Body), &view); err != nil {
		t.Fatal(err)
	}
	lf.local.Dispatcher.Wait()
	r, err := lf.local.Store.Get(context.Background(), view.ID)
	if err != nil || r.Status != runs.StatusWaiting {
		t.Fatalf("run %s: %v, %v", view.ID, r, err)
	}
	const prefix = "approval link for ops@example.com: https://gate.example.com/approvals/"
	var links []string
	for _, line := range strings.Split(lf.mail.String(), "\n") {
		if tok, ok := strings.CutPrefix(line, prefix); ok {
			links = append(links, tok)
		}
	}
	if len(links) != lf.links+1 {
		t.Fatalf("%d links mailed, want %d", len(links), lf.links+1)
	}
	lf.links, lf.run, lf.token = len(links), r, links[len(links)-1]
	return lf.run, lf.token
}

// templateText is the source of the approval page renderer (the Go files
// of internal/approvalpage, which write every page's markup), and tagNames
// the elements it writes.
var templateText, tagNames = func() (string, map[string]bool) {
	var all strings.Builder
	names := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join("..", "approvalpage", "*.go"))
	if len(files) == 0 {
		panic("no approval page renderer source in ../approvalpage")
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			panic(err)
		}
		all.Write(b)
		for _, m := range elementPattern.FindAllStringSubmatch(string(b), -1) {
			names[strings.ToLower(m[1])] = true
		}
	}
	return all.String(), names
}()

var elementPattern = regexp.MustCompile(`</?([A-Za-z][A-Za-z0-9]*)`)

// checkPage checks an approval-link answer: an HTML page with the security
// headers, whose elements are all the renderer's own, showing none of the
// posted values with markup unescaped.
func checkPage(t *testing.T, resp events.APIGatewayProxyResponse, posted url.Values) {
	t.Helper()
	if ct := resp.Headers["Content-Type"]; ct != approvalpage.ContentType {
		t.Fatalf("answered %d with Content-Type %q: %s", resp.StatusCode, ct, resp.Body)
	}
	for k, want := range approvalpage.SecurityHeaders() {
		if resp.Headers[k] != want {
			t.Fatalf("header %s = %q, want %q", k, resp.Headers[k], want)
		}
	}
	for _, m := range elementPattern.FindAllStringSubmatch(resp.Body, -1) {
		if !tagNames[strings.ToLower(m[1])] {
			t.Fatalf("the page has an element <%s> the renderer never writes:\n%s", m[1], resp.Body)
		}
	}
	// A posted text that could start an element must not be in the page
	// as it is (unless the renderer itself writes that text).
	for k, vs := range posted {
		for _, s := range append([]string{k}, vs...) {
			if elementPattern.MatchString(s) && strings.Contains(resp.Body, s) && !strings.Contains(templateText, s) {
				t.Fatalf("the page shows the posted %q unescaped", s)
			}
		}
	}
}

// FuzzApprovalForm fuzzes the form body of POST /approvals/{token} on a run
// waiting for the link's approver; DIGEST in the input stands for the
// run's turn digest (the calls are toolu_read and toolu_write).
func FuzzApprovalForm(f *testing.F) {
	lf := newLinkFixture(f)
	for _, s := range []string{
		"digest=DIGEST&action=approve",
		"digest=DIGEST&action=deny&message=not+during+the+freeze",
		"digest=DIGEST&action=per_call&call.toolu_write=deny&reason.toolu_write=%3Cb%3Ekeep%3C%2Fb%3E",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, form string) {
		r, token := lf.waiting(t)
		form = strings.ReplaceAll(form, "DIGEST", r.TurnDigest)
		ev := req("POST", "/approvals/"+token, "", "")
		ev.Body = form
		ev.Headers["Content-Type"] = "application/x-www-form-urlencoded"
		resp := handle(t, lf.v, lf.local.API.Handle, ev)
		posted, perr := url.ParseQuery(form)
		checkPage(t, resp, posted)
		after, err := lf.local.Store.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		var want loop.Decision
		if perr == nil {
			want, perr = approvalpage.ParseDecision(posted, r.PendingCalls)
		}
		valid := perr == nil && want.TurnDigest == r.TurnDigest
		if after.Version == r.Version {
			if valid {
				t.Fatalf("a valid form on the right turn was refused (%d): %s", resp.StatusCode, resp.Body)
			}
			return
		}
		lf.run = nil // decided: the next input gets a new run
		lf.local.Dispatcher.Wait()
		if !valid || resp.StatusCode != 200 {
			t.Fatalf("the form %q decided the run (answer %d), but it is not a valid decision on its turn: %v", form, resp.StatusCode, perr)
		}
		if after.Decision == nil || !sameJSON(*after.Decision, want) || after.DecidedBy != "ops@example.com" || after.DecidedVia != runs.ViaLink {
			t.Fatalf("stored decision %+v by %q via %q, want %+v by ops@example.com via link", after.Decision, after.DecidedBy, after.DecidedVia, want)
		}
	})
}

// FuzzApprovalLink fuzzes the token of an approval link: only the exact
// token mailed opens the page (GET, HEAD) or decides (POST); anything else
// is the not-found page, and changes nothing.
func FuzzApprovalLink(f *testing.F) {
	lf := newLinkFixture(f)
	for _, s := range []string{"TOKEN", "TOKEN=", "TOKEN/", "XTOKEN", "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80", "%2e%2e", ""} {
		for _, m := range []string{"GET", "HEAD", "POST"} {
			f.Add(m, s)
		}
	}
	f.Fuzz(func(t *testing.T, method, token string) {
		if method != "GET" && method != "HEAD" && method != "POST" {
			return
		}
		r, raw := lf.waiting(t)
		token = strings.ReplaceAll(token, "TOKEN", raw)
		if strings.Contains(token, "/") || token == "" {
			return // another route
		}
		ev := req(method, "/approvals/"+token, "", "")
		if method == "POST" {
			ev.Body = "digest=" + r.TurnDigest + "&action=approve"
			ev.Headers["Content-Type"] = "application/x-www-form-urlencoded"
		}
		resp := handle(t, lf.v, lf.local.API.Handle, ev)
		after, err := lf.local.Store.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if token != raw {
			if resp.StatusCode != 404 || after.Version != r.Version {
				t.Fatalf("%s with token %q (the link's is %q) answered %d, run version %d -> %d", method, token, raw, resp.StatusCode, r.Version, after.Version)
			}
			if method != "HEAD" {
				checkPage(t, resp, nil)
			}
			return
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s with the link's own token answered %d: %s", method, resp.StatusCode, resp.Body)
		}
		if method == "POST" {
			lf.run = nil
			lf.local.Dispatcher.Wait()
		}
	})
}

package apitest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
)

// validator is shared by every test of the package, so TestMain can tell
// which declared responses none of them produced.
var validator *apispec.Validator

// unreachable are declared responses these tests cannot produce, and why.
var unreachable = map[string]string{
	"GET /runs/{id}/calls/{call_id} 410": "the state blob of a waiting run deleted behind the store's back (the conformance suite covers LoadState's gone)",
	"POST /approvals/{token} 400":        "an unreadable form is refused by the spec's form decoding too; a browser cannot send one",
}

func TestMain(m *testing.M) {
	v, err := apispec.NewValidator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	validator = v
	code := m.Run()
	if code == 0 && !testing.Short() && len(os.Args) > 0 && !strings.Contains(strings.Join(os.Args, " "), "-test.run") {
		var missing []string
		for _, r := range v.Unseen(nil, http.StatusInternalServerError) {
			if unreachable[r] == "" {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "declared responses no test produced (add a case, or list them in unreachable with the reason):\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

func start(t *testing.T, o apitest.Options) *apitest.Server {
	o.Validator = validator
	return apitest.Start(t, o)
}

// call sends one request as principal ("" = no token) through c and
// decodes a JSON answer.
func call(t *testing.T, s *apitest.Server, c *http.Client, method, path, principal, ctype, body string) (int, map[string]any, http.Header) {
	t.Helper()
	caller := &apitest.Caller{URL: s.URL, HTTP: c}
	if principal != "" {
		caller.Token = s.Token(principal)
	}
	r := caller.Call(t, method, path, ctype, body)
	return r.Status, r.JSON(), r.Header
}

const jsonCT = "application/json"

func waitStatus(t *testing.T, s *apitest.Server, c *http.Client, id, want string) map[string]any {
	t.Helper()
	var run map[string]any
	(&apitest.Caller{URL: s.URL, Token: s.Token("alice"), HTTP: c}).WaitStatus(t, id, want, &run)
	return run
}

// TestTrafficMatchesSpec drives every route and most errors through the
// local gateway and handlers; the validator fails the test on any exchange
// the spec does not describe.
func TestTrafficMatchesSpec(t *testing.T) {
	s := start(t, apitest.Options{})
	c := s.Client(t)
	start := `{"prompt":"update pricing","approvers":["bob","ops@example.com"],"metadata":{"ticket":"OPS-1"}}`

	status, run, h := call(t, s, c, "POST", "/runs", "alice", jsonCT, start)
	if status != 202 || h.Get("Location") == "" {
		t.Fatalf("start: %d %v", status, run)
	}
	id := run["id"].(string)
	run = waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	version := int64(run["version"].(float64))

	other := func() string {
		_, r, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"four_eyes":true}`)
		return r["id"].(string)
	}()

	cases := []struct {
		name, method, path, who, ctype, body string
		want                                 int
	}{
		{"events", "GET", "/runs/" + id + "/events?limit=2", "alice", "", "", 200},
		{"events bad limit", "GET", "/runs/" + id + "/events?limit=0", "alice", "", "", 400},
		{"get unauthenticated", "GET", "/runs/" + id, "", "", "", 401},
		{"get forbidden", "GET", "/runs/" + id, "carol", "", "", 403},
		{"get unknown", "GET", "/runs/nope", "alice", "", "", 404},
		{"get past the caller's version", "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=20", id, version-1), "alice", "", "", 200},
		{"get wait without a version", "GET", "/runs/" + id + "?wait=5", "alice", "", "", 422},
		{"get wait too long", "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=21", id, version), "alice", "", "", 400},
		{"get version not a number", "GET", "/runs/" + id + "?after_version=x&wait=1", "alice", "", "", 400},
		{"get wait forbidden", "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=20", id, version), "carol", "", "", 403},
		{"events forbidden", "GET", "/runs/" + id + "/events", "carol", "", "", 403},
		{"events unknown", "GET", "/runs/nope/events", "alice", "", "", 404},
		{"events unauthenticated", "GET", "/runs/" + id + "/events", "", "", "", 401},
		{"start malformed", "POST", "/runs", "alice", jsonCT, `{"prompt":`, 400},
		{"start unknown field", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"colour":"red"}`, 400},
		{"start unauthenticated", "POST", "/runs", "", jsonCT, start, 401},
		{"start too large", "POST", "/runs", "alice", jsonCT, `{"prompt":"` + strings.Repeat("x", 300<<10) + `","approvers":["bob"]}`, 413},
		{"start not json", "POST", "/runs", "alice", "text/plain", start, 415},
		{"start invalid", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":[]}`, 422},
		{"start a tool allowed twice", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"allowed_tools":["read_document","read_document"]}`, 422},
		{"start invalid ttl", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":5}`, 422},
		{"start ttl just below its range", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":59}`, 422},
		{"start ttl at the top of its range", "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"approval_ttl_seconds":604800}`, 202},
		{"decide malformed", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `[]`, 400},
		{"decide unauthenticated", "POST", "/runs/" + id + "/decision", "", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`, 401},
		{"decide not approver", "POST", "/runs/" + id + "/decision", "carol", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`, 403},
		{"decide unknown", "POST", "/runs/nope/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`, 404},
		{"decide stale digest", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + strings.Repeat("0", 64) + `","action":"approve"}`, 409},
		{"decide too large", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + strings.Repeat("0", 70<<10) + `"}`, 413},
		{"decide not json", "POST", "/runs/" + id + "/decision", "bob", "text/plain", `x`, 415},
		{"decide unknown call", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","calls":[{"call_id":"nope","action":"approve"}]}`, 422},
		{"decide deny of a call that needs no approval", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","calls":[{"call_id":"toolu_write","action":"approve"},{"call_id":"toolu_read","action":"deny"}]}`, 422},
		{"cancel body", "POST", "/runs/" + other + "/cancel", "alice", jsonCT, `{"x":1}`, 400},
		{"cancel body not json", "POST", "/runs/" + other + "/cancel", "alice", "text/plain", `{}`, 415},
		{"get wait empty", "GET", fmt.Sprintf("/runs/%s?after_version=%d&wait=", id, version), "alice", "", "", 400},
		{"start trailing slash", "POST", "/runs/", "alice", jsonCT, start, 404},
		{"cancel unauthenticated", "POST", "/runs/" + other + "/cancel", "", "", "", 401},
		{"cancel forbidden", "POST", "/runs/" + other + "/cancel", "carol", "", "", 403},
		{"cancel unknown", "POST", "/runs/nope/cancel", "alice", "", "", 404},
		{"cancel too large", "POST", "/runs/" + other + "/cancel", "alice", jsonCT, strings.Repeat(" ", 2000), 413},
		{"method not allowed", "GET", "/runs", "alice", "", "", 405},
		{"no route", "GET", "/nowhere", "alice", "", "", 404},
		{"tool results without id", "POST", "/runs/" + id + "/tool-results", "alice", jsonCT, `{}`, 422},
		{"tool results, run not waiting for them", "POST", "/runs/" + id + "/tool-results", "alice", jsonCT, `{"tool_results_id":"x","results":[{"call_id":"c","content":"ok"}]}`, 409},
		{"tool results from a stranger", "POST", "/runs/" + id + "/tool-results", "carol", jsonCT, `{"tool_results_id":"x","results":[{"call_id":"c","content":"ok"}]}`, 403},
		{"inbox", "GET", "/approvals?limit=1", "bob", "", "", 200},
		{"inbox bad limit", "GET", "/approvals?limit=0", "bob", "", "", 400},
		{"inbox foreign cursor", "GET", "/approvals?cursor=abc", "bob", "", "", 422},
		{"inbox unauthenticated", "GET", "/approvals", "", "", "", 401},
		{"inbox method not allowed", "POST", "/approvals", "bob", jsonCT, `{}`, 405},
		{"bad token", "GET", "/runs/" + id, "", "", "", 401},
		{"health", "GET", "/healthz", "", "", "", 200},
		{"decide", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`, 202},
		{"decide again", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`, 409},
		{"cancel", "POST", "/runs/" + other + "/cancel", "alice", "", "", 200},
		{"cancel again", "POST", "/runs/" + other + "/cancel", "alice", jsonCT, `{}`, 409},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := call(t, s, c, tt.method, tt.path, tt.who, tt.ctype, tt.body)
			if status != tt.want {
				t.Errorf("got %d, want %d: %v", status, tt.want, out)
			}
		})
	}
	done := waitStatus(t, s, c, id, "COMPLETED")
	if done["output"] == nil {
		t.Errorf("completed run has no output: %v", done)
	}
	status, page, _ := call(t, s, c, "GET", "/runs/"+id+"/events?limit=1000", "alice", "", "")
	if status != 200 || len(page["events"].([]any)) < 5 {
		t.Errorf("events: %d %v", status, page)
	}
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

const formCT = "application/x-www-form-urlencoded"

// TestLinkPagesMatchSpec drives the approval-link routes: pages, the form
// and every page status.
func TestLinkPagesMatchSpec(t *testing.T) {
	clk := clocktest.New(time.Now().UTC())
	s := start(t, apitest.Options{Now: clk.Now})
	c := s.Client(t)
	newWaiting := func() (id, digest, link string) {
		t.Helper()
		before := len(s.Links("ops@example.com"))
		_, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"update","approvers":["ops@example.com","bob"],"approval_ttl_seconds":600}`)
		id = run["id"].(string)
		run = waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
		links := s.WaitLinks(t, "ops@example.com", before+1)
		u, err := url.Parse(links[len(links)-1])
		if err != nil {
			t.Fatal(err)
		}
		return id, run["pending"].(map[string]any)["turn_digest"].(string), u.Path
	}
	id, digest, link := newWaiting()
	bogus := "/approvals/" + strings.Repeat("A", 43)
	cases := []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"page", "GET", link, "", "", 200},
		{"head", "HEAD", link, "", "", 200},
		{"unknown link", "GET", bogus, "", "", 404},
		{"unknown link head", "HEAD", bogus, "", "", 404},
		{"malformed link", "GET", "/approvals/short", "", "", 404},
		{"post unknown link", "POST", bogus, formCT, form("digest", digest, "action", "approve"), 404},
		{"post not a form", "POST", link, "text/plain", "action=approve", 415},
		{"post too large", "POST", link, formCT, form("digest", digest, "action", "deny", "message", strings.Repeat("x", 65<<10)), 413},
		{"post no digest", "POST", link, formCT, form("action", "approve"), 422},
		{"post undecided call", "POST", link, formCT, form("digest", digest, "action", "per_call"), 422},
		{"post approve", "POST", link, formCT, form("digest", digest, "action", "approve"), 200},
		{"page after decision", "GET", link, "", "", 409},
		{"head after decision", "HEAD", link, "", "", 409},
		{"post after decision", "POST", link, formCT, form("digest", digest, "action", "approve"), 409},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			status, _, h := call(t, s, c, tt.method, tt.path, "", tt.ctype, tt.body)
			if status != tt.want {
				t.Errorf("got %d, want %d", status, tt.want)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type %q, want an HTML page", ct)
			}
		})
	}
	waitStatus(t, s, c, id, "COMPLETED")

	// Past the deadline: the page, the form and the API answer "gone".
	id, digest, link = newWaiting()
	clk.Advance(11 * time.Minute)
	for _, tt := range []struct {
		name, method, path, who, ctype, body string
	}{
		{"expired page", "GET", link, "", "", ""},
		{"expired head", "HEAD", link, "", "", ""},
		{"expired form", "POST", link, "", formCT, form("digest", digest, "action", "approve")},
		{"expired decision", "POST", "/runs/" + id + "/decision", "bob", jsonCT, `{"turn_digest":"` + digest + `","action":"approve"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if status, out, _ := call(t, s, c, tt.method, tt.path, tt.who, tt.ctype, tt.body); status != 410 {
				t.Errorf("got %d, want 410: %v", status, out)
			}
		})
	}
	// Once the sweep has ended the run EXPIRED, the API still says 410.
	if _, err := s.App.Sweeper.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, c, id, "EXPIRED")
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 410 {
		t.Errorf("decision on an EXPIRED run: got %d, want 410: %v", status, out)
	}
}

// TestServerRoutesMatchSpec checks the server's routing against the spec:
// every current operation reaches a handler (no "no route" 404, no 405),
// with the API's own answer.
func TestServerRoutesMatchSpec(t *testing.T) {
	s := start(t, apitest.Options{})
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"]}`)
	id := run["id"].(string)
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range apispec.Operations(doc) {
		t.Run(op.String(), func(t *testing.T) {
			path := strings.NewReplacer("{id}", id, "{token}", strings.Repeat("A", 43)).Replace(op.Path)
			status, out, h := call(t, s, c, op.Method, path, "carol", "", "")
			if status == http.StatusMethodNotAllowed {
				t.Fatalf("%s answered 405", op)
			}
			if status == http.StatusNotFound && strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				if msg, _ := out["error"].(map[string]any)["message"].(string); strings.HasPrefix(msg, "no route") {
					t.Fatalf("%s is not routed: %v", op, out)
				}
			}
		})
	}
}

// TestAToolAllowedTwiceIsRefused: allowed_tools with a name twice was
// accepted (202) while approvers and webhook_events with an entry twice
// are 422 (tester helper-112 P3); the message names the duplicate.
func TestAToolAllowedTwiceIsRefused(t *testing.T) {
	s := start(t, apitest.Options{})
	c := s.Client(t)
	status, out, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"x","approvers":["bob"],"allowed_tools":["read_document","write_document","read_document"]}`)
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("a tool allowed twice: %d %v, want 422", status, out)
	}
	e, _ := out["error"].(map[string]any)
	if want := `allowed_tools[2]: "read_document" is listed twice`; e["message"] != want {
		t.Errorf("message %q, want %q", e["message"], want)
	}
}

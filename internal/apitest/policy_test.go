package apitest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/runs"
)

// The directory and policy of the policy tests. Bob's aliases are the
// bypass attempts' targets: a local name, an e-mail address, an IAM user
// ARN and a role whose sessions are him.
const testDirectory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob", "arn:aws:iam::123456789012:user/bob", "arn:aws:iam::123456789012:role/BobAdmin"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"], "tools": ["read_*"]}
 ],
 "groups": [
  {"name": "ops",     "members": ["ann", "bob", "carol", "dave"]},
  {"name": "finance", "members": ["bob", "carol"], "tools": ["write_document"]}
 ],
 "service_accounts": [{"id": "ci", "aliases": ["ci-bot"]}]
}`

const testPolicy = `{"version": 1,
 "rules": [
  {"id": "no-prod-deletes", "tools": ["delete_document"], "when": "args.path.startsWith('prod/')",
   "outcome": "deny", "message": "production documents are never deleted by an agent"},
  {"id": "drafts", "tools": ["write_document"], "when": "args.path.startsWith('drafts/')", "outcome": "allow"},
  {"id": "pricing", "description": "pricing changes go through finance", "tools": ["write_document"],
   "when": "args.path == 'pages/pricing.md'",
   "outcome": "require_approval", "approvers": ["group:finance"], "four_eyes": true}
 ]}`

// bobAliases are bob by other names: each is a bypass attempt when bob
// started the run (case variant, +tag, IAM user ARN for an e-mail
// initiator, another session of his role).
var bobAliases = []string{"Bob", "bob+x@example.com", "arn:aws:iam::123456789012:user/bob", "arn:aws:sts::123456789012:assumed-role/BobAdmin/tuesday"}

func governance(t *testing.T, directory, policy string) app.Governance {
	t.Helper()
	dir := t.TempDir()
	var dp, pp string
	if directory != "" {
		dp = filepath.Join(dir, "directory.json")
		if err := os.WriteFile(dp, []byte(directory), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if policy != "" {
		pp = filepath.Join(dir, "policy.json")
		if err := os.WriteFile(pp, []byte(policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g, err := app.LoadGovernance(dp, pp)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func script(calls ...string) string {
	return `{"turns":[{"content":[` + strings.Join(calls, ",") + `]},{"content":[{"type":"text","text":"done"}]}]}`
}

func toolUse(id, name, input string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}`
}

func policyServer(t *testing.T, sc, directory, policy string) (*apitest.Server, *http.Client) {
	t.Helper()
	principals := append([]string{"ann", "bob", "bob@example.com", "carol", "dave", "ci-bot"}, bobAliases...)
	s := start(t, apitest.Options{Script: sc, Principals: principals, Governance: governance(t, directory, policy)})
	return s, s.Client(t)
}

func waitAs(t *testing.T, s *apitest.Server, c *http.Client, who, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, run, _ := call(t, s, c, "GET", "/runs/"+id, who, "", "")
		if run["status"] == want {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s", id, run["status"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func eventsOf(t *testing.T, s *apitest.Server, c *http.Client, who, id string) []map[string]any {
	t.Helper()
	_, out, _ := call(t, s, c, "GET", "/runs/"+id+"/events?limit=1000", who, "", "")
	var evs []map[string]any
	for _, e := range out["events"].([]any) {
		evs = append(evs, e.(map[string]any))
	}
	return evs
}

// TestPolicyOutcomesEndToEnd: per rule and outcome, through the HTTP API
// with the traffic validated against openapi.yaml.
func TestPolicyOutcomesEndToEnd(t *testing.T) {
	t.Run("deny: the call gets the rule's message, no human is asked", func(t *testing.T) {
		s, c := policyServer(t, script(toolUse("t1", "delete_document", `{"path":"prod/a.md"}`)), testDirectory, testPolicy)
		_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"clean up","approvers":["group:ops"]}`)
		id := run["id"].(string)
		waitAs(t, s, c, "ann", id, "COMPLETED")
		var denied map[string]any
		for _, e := range eventsOf(t, s, c, "ann", id) {
			if e["type"] == runs.EventToolDenied {
				denied = e["data"].(map[string]any)
			}
			if e["type"] == runs.EventSuspended {
				t.Error("a denied call never suspends the run")
			}
		}
		if denied == nil || denied["rule"] != "no-prod-deletes" {
			t.Fatalf("tool_denied event %v, want rule no-prod-deletes", denied)
		}
	})
	t.Run("allow: a write runs without approval", func(t *testing.T) {
		s, c := policyServer(t, script(toolUse("t1", "write_document", `{"path":"drafts/a.md","text":"x"}`)), testDirectory, testPolicy)
		_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"draft","approvers":["group:ops"]}`)
		id := run["id"].(string)
		waitAs(t, s, c, "ann", id, "COMPLETED")
		if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "drafts", "a.md")); err != nil || string(b) != "x" {
			t.Fatalf("drafts/a.md = %q, %v", b, err)
		}
		found := false
		for _, e := range eventsOf(t, s, c, "ann", id) {
			if e["type"] == runs.EventToolExecuted && e["data"].(map[string]any)["rule"] == "drafts" {
				found = true
			}
		}
		if !found {
			t.Error("the tool_executed event names the rule that allowed the write")
		}
	})
	t.Run("require approval: the rule's approvers, shown to approvers; the rest refused", func(t *testing.T) {
		s, c := policyServer(t, "", testDirectory, testPolicy)
		_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"update pricing","approvers":["group:ops"]}`)
		id := run["id"].(string)
		run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
		pending := run["pending"].(map[string]any)
		digest := pending["turn_digest"].(string)
		write := pending["calls"].([]any)[1].(map[string]any)
		approval, _ := write["approval"].(map[string]any)
		if write["rule"] != "pricing" || approval == nil || approval["four_eyes"] != true || approval["description"] != "pricing changes go through finance" {
			t.Fatalf("pending write %v, want rule pricing with its approval rule", write)
		}
		// Only finance members other than the initiator get a link.
		s.WaitLinks(t, "carol@example.com", 1)
		if n := len(s.Links("bob@example.com")); n != 0 {
			t.Errorf("the initiator got %d links under four-eyes", n)
		}
		if n := len(s.Links("dave@example.com")) + len(s.Links("ann@example.com")); n != 0 {
			t.Errorf("ops members outside the rule's group got %d links", n)
		}
		decide := `{"turn_digest":"` + digest + `","action":"approve"}`
		version := notified(t, s, c, "bob", id)["version"]
		for _, who := range append([]string{"bob"}, bobAliases...) {
			if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, decide); status != 403 || !strings.Contains(errMessage(out), "four-eyes") {
				t.Errorf("%s: %d %v, want 403 four-eyes", who, status, out)
			}
		}
		for who, want := range map[string]string{"ann": "not an approver", "dave": "not an approver", "ci-bot": "service account"} {
			if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, decide); status != 403 || !strings.Contains(errMessage(out), want) {
				t.Errorf("%s: %d %v, want 403 %q", who, status, out, want)
			}
		}
		if _, now, _ := call(t, s, c, "GET", "/runs/"+id, "carol", "", ""); now["version"] != version {
			t.Fatalf("refusals changed the run: version %v, was %v", now["version"], version)
		}
		if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "carol", jsonCT, decide); status != 202 {
			t.Fatalf("carol: %d %v", status, out)
		}
		waitAs(t, s, c, "bob", id, "COMPLETED")

		// Four-eyes keeps out an initiator who would otherwise decide: ann,
		// who started this one, is no approver of the pricing rule, and is
		// told that.
		_, run, _ = call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"update pricing","approvers":["group:ops"]}`)
		id = run["id"].(string)
		run = waitAs(t, s, c, "ann", id, "WAITING_FOR_APPROVAL")
		decide = `{"turn_digest":"` + run["pending"].(map[string]any)["turn_digest"].(string) + `","action":"approve"}`
		status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, decide)
		if msg := errMessage(out); status != 403 || !strings.Contains(msg, "not an approver") || strings.Contains(msg, "four-eyes") {
			t.Errorf("ann on her own run, no approver of its call: %d %v, want 403 not an approver (not four-eyes)", status, out)
		}
	})
}

// notified waits until the approvers were told (the notified event) and
// returns the run as it is then.
func notified(t *testing.T, s *apitest.Server, c *http.Client, who, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range eventsOf(t, s, c, who, id) {
			if e["type"] == runs.EventNotified {
				_, run, _ := call(t, s, c, "GET", "/runs/"+id, who, "", "")
				return run
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: approvers were never told", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func errMessage(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// TestToolGate: an approver whose directory entry limits them to other
// tools is refused (403) and nothing changes.
func TestToolGate(t *testing.T) {
	s, c := policyServer(t, script(toolUse("w1", "write_document", `{"path":"pages/about.md","text":"hi"}`)), testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"about page","approvers":["group:ops"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "ann", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "ann", id)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	if n := len(s.Links("dave@example.com")); n != 0 {
		t.Errorf("dave may not approve write_document but got %d links", n)
	}
	body := `{"turn_digest":"` + digest + `","calls":[{"call_id":"w1","action":"approve"}]}`
	status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "dave", jsonCT, body)
	if status != 403 || !strings.Contains(errMessage(out), "may not approve calls of write_document") {
		t.Fatalf("dave: %d %v, want 403 tool gate", status, out)
	}
	if _, now, _ := call(t, s, c, "GET", "/runs/"+id, "ann", "", ""); now["version"] != run["version"] {
		t.Fatal("a refused decision changed the run")
	}
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "carol", jsonCT, body); status != 202 {
		t.Fatalf("carol: %d %v", status, out)
	}
	waitAs(t, s, c, "ann", id, "COMPLETED")
}

// TestFourEyesBypassThroughLinks: a link held by the initiator under any
// alias (issued before the directory learnt the alias, say) is refused
// (403) and changes nothing; the real approver's link then decides.
func TestFourEyesBypassThroughLinks(t *testing.T) {
	s, c := policyServer(t, "", testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "bob@example.com", jsonCT, `{"prompt":"update pricing","approvers":["group:ops"],"four_eyes":true}`)
	if run["id"] == nil {
		t.Fatalf("start: %v", run)
	}
	id := run["id"].(string)
	waitAs(t, s, c, "carol", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "carol", id)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	ctx := context.Background()
	r, err := s.App.Store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	var grants []runs.TokenGrant
	for _, who := range append([]string{"Bob@Example.com", "bob+x@example.com"}, bobAliases[2:]...) {
		raw, hash, err := approval.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		links[who] = "/approvals/" + raw
		grants = append(grants, runs.TokenGrant{Hash: hash, Approver: who})
	}
	r, err = s.App.Store.Renotify(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Reminder: true}, grants)
	if err != nil {
		t.Fatal(err)
	}
	for who, link := range links {
		status, _, h := call(t, s, c, "POST", link, "", formCT, form("digest", digest, "action", "approve"))
		if status != 403 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("link of %s: %d, want the 403 page", who, status)
		}
	}
	after, err := s.App.Store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != r.Version || after.Status != runs.StatusWaiting {
		t.Fatalf("refused links changed the run: %s v%d, was v%d", after.Status, after.Version, r.Version)
	}
	carol := s.WaitLinks(t, "carol@example.com", 1)
	if status, _, _ := call(t, s, c, "POST", linkPath(t, carol[0]), "", formCT, form("digest", digest, "action", "approve")); status != 200 {
		t.Fatalf("carol's link: %d", status)
	}
	waitAs(t, s, c, "carol", id, "COMPLETED")
}

func linkPath(t *testing.T, link string) string {
	t.Helper()
	i := strings.Index(link, "/approvals/")
	if i < 0 {
		t.Fatalf("not a link: %s", link)
	}
	return link[i:]
}

// TestRunsMayOnlyTightenPolicy: a run that asks for less than the
// deployment policy is refused (422) and no run is created.
func TestRunsMayOnlyTightenPolicy(t *testing.T) {
	strict := `{"version": 1, "defaults": {"four_eyes": true, "required_approvals": 2}, "rules": []}`
	s, c := policyServer(t, "", testDirectory, strict)
	for _, tt := range []struct{ name, body, want string }{
		{"four-eyes off", `{"prompt":"x","approvers":["group:ops"],"four_eyes":false}`, "only tighten"},
		{"fewer approvals", `{"prompt":"x","approvers":["group:ops"],"required_approvals":1}`, "only tighten"},
		{"more approvals than persons who may decide", `{"prompt":"x","approvers":["carol","dave"],"required_approvals":3}`, "need 3 distinct persons"},
		{"the initiator cannot count towards the quorum", `{"prompt":"x","approvers":["ann","carol"]}`, "need 2 distinct persons"},
		{"a bad tool pattern", `{"prompt":"x","approvers":["group:ops"],"require_approval":["read document"]}`, "require_approval"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, tt.body)
			if status != 422 || !strings.Contains(errMessage(out), tt.want) {
				t.Errorf("%d %v, want 422 %q", status, out, tt.want)
			}
		})
	}
	if status, out, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"x","approvers":["group:ops"],"four_eyes":true,"required_approvals":3,"require_approval":["read_*"]}`); status != 202 {
		t.Errorf("a tightening run: %d %v", status, out)
	}
}

// TestGroupApproversOnly: on a deployment whose directory says so, runs
// name only groups, so the initiator cannot name themselves.
func TestGroupApproversOnly(t *testing.T) {
	dir := strings.Replace(testDirectory, `{"version": 1,`, `{"version": 1, "group_approvers_only": true,`, 1)
	s, c := policyServer(t, script(toolUse("w1", "write_document", `{"path":"pages/about.md","text":"hi"}`)), dir, "")
	for _, approvers := range []string{`["ann"]`, `["group:ops","ann@example.com"]`, `["Ann+me@Example.com"]`} {
		status, out, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"x","approvers":`+approvers+`}`)
		if status != 422 || !strings.Contains(errMessage(out), "requires approvers to be groups") {
			t.Errorf("approvers %s: %d %v, want 422", approvers, status, out)
		}
	}
	_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"x","approvers":["group:ops"],"four_eyes":true}`)
	id := run["id"].(string)
	run = waitAs(t, s, c, "ann", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	if status, _, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 403 {
		t.Errorf("the initiator through their group: %d, want 403", status)
	}
	mailed := slices.Concat(s.Links("ann@example.com"))
	if len(mailed) != 0 {
		t.Errorf("the initiator got links: %v", mailed)
	}
}

// TestAnEditStaysUnderItsRule: an approver's edit is judged by the policy
// as the call would have been (the tester's bypass: an approver the run
// named, outside finance, edited a write onto the pricing page, and a
// delete onto a production document a deny rule protects). Both are 422
// and nothing is written; an edit that stays under the call's rule runs.
func TestAnEditStaysUnderItsRule(t *testing.T) {
	sc := script(toolUse("w1", "write_document", `{"path":"pages/x.md","text":"x\n"}`))
	s, c := policyServer(t, sc, testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"]}`)
	id := run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	edit := func(input string) string {
		return `{"turn_digest":"` + digest + `","calls":[{"call_id":"w1","action":"edit","input":` + input + `}]}`
	}
	status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, edit(`{"path":"pages/pricing.md","text":"Team: free (edited)\n"}`))
	if status != 422 || !strings.Contains(errMessage(out), `falls under policy rule "pricing"`) {
		t.Fatalf("edit onto the pricing page: %d %v, want 422 naming the pricing rule", status, out)
	}
	if status, out, _ = call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, edit(`{"path":"pages/y.md","text":"y\n"}`)); status != 202 {
		t.Fatalf("edit under the same rule: %d %v", status, out)
	}
	waitAs(t, s, c, "bob", id, "COMPLETED")
	if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "y.md")); err != nil || string(b) != "y\n" {
		t.Fatalf("pages/y.md = %q, %v", b, err)
	}

	sc = script(toolUse("d1", "delete_document", `{"path":"pages/x.md"}`))
	s, c = policyServer(t, sc, testDirectory, testPolicy)
	_, run, _ = call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"]}`)
	id = run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	digest = run["pending"].(map[string]any)["turn_digest"].(string)
	body := `{"turn_digest":"` + digest + `","calls":[{"call_id":"d1","action":"edit","input":{"path":"prod/a.md"}}]}`
	status, out, _ = call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, body)
	if status != 422 || !strings.Contains(errMessage(out), `refused by policy rule "no-prod-deletes"`) {
		t.Fatalf("edit of a delete onto prod/: %d %v, want 422 naming the deny rule", status, out)
	}
}

// TestOnlyHeldCallsAreDecidedOneByOne: through the server, a per-call deny
// or edit of a call of the held turn that needs no approval (a read, a
// write an allow rule lets run, a delete a deny rule refuses) is 422 naming
// the call and why, as the approval page refuses it, and changes nothing;
// approving such a call with the held one is accepted (it runs anyway).
func TestOnlyHeldCallsAreDecidedOneByOne(t *testing.T) {
	sc := script(
		toolUse("w1", "write_document", `{"path":"pages/x.md","text":"x\n"}`),
		toolUse("r1", "read_document", `{"path":"pages/x.md"}`),
		toolUse("a1", "write_document", `{"path":"drafts/a.md","text":"a\n"}`),
		toolUse("d1", "delete_document", `{"path":"prod/a.md"}`))
	s, c := policyServer(t, sc, testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"]}`)
	id := run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	decide := func(other string) string {
		return `{"turn_digest":"` + digest + `","calls":[{"call_id":"w1","action":"approve"},` + other + `]}`
	}
	for _, tt := range []struct{ name, call, want string }{
		{"deny a read", `{"call_id":"r1","action":"deny","message":"no"}`,
			`calls[1]: call "r1" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied`},
		{"edit a read", `{"call_id":"r1","action":"edit","input":{"path":"pages/y.md"}}`,
			`calls[1]: call "r1" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be edited`},
		{"deny a write a rule allows", `{"call_id":"a1","action":"deny"}`,
			`calls[1]: call "a1" (write_document) needs no approval (policy rule "drafts" allows it): it runs without one, so it cannot be denied`},
		{"edit a write a rule allows", `{"call_id":"a1","action":"edit","input":{"path":"drafts/b.md","text":"b\n"}}`,
			`calls[1]: call "a1" (write_document) needs no approval (policy rule "drafts" allows it): it runs without one, so it cannot be edited`},
		{"deny a call a rule denies", `{"call_id":"d1","action":"deny"}`,
			`calls[1]: call "d1" (delete_document) was denied by policy rule "no-prod-deletes": it never runs, so it cannot be decided`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, decide(tt.call))
			if status != 422 || !strings.Contains(errMessage(out), tt.want) {
				t.Fatalf("got %d %v, want 422 saying %s", status, out, tt.want)
			}
		})
	}
	waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	for _, e := range eventsOf(t, s, c, "bob", id) {
		if e["type"] == "decision" {
			t.Fatalf("a refused decision was recorded: %v", e)
		}
	}
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, decide(`{"call_id":"r1","action":"approve"}`)); status != 202 {
		t.Fatalf("approve the held write and the read: %d %v, want 202", status, out)
	}
	waitAs(t, s, c, "bob", id, "COMPLETED")
	for path, want := range map[string]string{"pages/x.md": "x\n", "drafts/a.md": "a\n"} {
		if b, err := os.ReadFile(filepath.Join(s.Dir, "content", path)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
		}
	}
}

// A policy rule's approvers who are not the run's keep read access once
// the run moves on from the turn they were asked about (here to a turn only
// the run's approver decides): before, GET /runs/{id} said 403 to the
// person who had just approved.
func TestRuleApproversStillReadAfterTheTurn(t *testing.T) {
	sc := `{"turns":[{"content":[` + toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}`) + `]},` +
		`{"content":[` + toolUse("w2", "write_document", `{"path":"pages/news.md","text":"New prices\n"}`) + `]},` +
		`{"content":[{"type":"text","text":"done"}]}]}`
	s, c := policyServer(t, sc, testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"p","approvers":["bob"]}`)
	id := run["id"].(string)
	approve := func(who string) {
		t.Helper()
		run := waitAs(t, s, c, who, id, "WAITING_FOR_APPROVAL")
		digest := run["pending"].(map[string]any)["turn_digest"].(string)
		if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 202 {
			t.Fatalf("%s approves: %d %v", who, status, out)
		}
	}
	readers := func(when string, who ...string) {
		t.Helper()
		for _, p := range who {
			for _, path := range []string{"/runs/" + id, "/runs/" + id + "/events"} {
				if status, out, _ := call(t, s, c, "GET", path, p, "", ""); status != 200 {
					t.Errorf("%s: GET %s as %s: %d %v, want 200", when, path, p, status, out)
				}
			}
		}
		for _, p := range []string{"dave", "ci-bot"} {
			if status, out, _ := call(t, s, c, "GET", "/runs/"+id, p, "", ""); status != 403 {
				t.Errorf("%s: GET as %s, neither asked nor named: %d %v, want 403", when, p, status, out)
			}
		}
	}
	approve("carol") // the pricing rule: finance
	waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	readers("second turn held", "carol", "bob", "ann")
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/cancel", "carol", jsonCT, `{}`); status != 403 || !strings.Contains(errMessage(out), "but not cancel it") {
		t.Errorf("cancel by carol, asked about the first turn only: %d %v, want 403", status, out)
	}
	approve("bob") // the news page: the run's approver
	waitAs(t, s, c, "ann", id, "COMPLETED")
	readers("completed", "carol", "bob", "ann")
}

package apitest_test

import (
	"html"
	"net/url"
	"strings"
	"testing"
)

// describedPolicy is testPolicy with descriptions on its allow and deny rules.
const describedPolicy = `{"version": 1,
 "rules": [
  {"id": "no-prod-deletes", "description": "production is kept by people", "tools": ["delete_document"], "when": "args.path.startsWith('prod/')",
   "outcome": "deny", "message": "production documents are never deleted by an agent"},
  {"id": "drafts", "description": "drafts are scratch space", "tools": ["write_document"], "when": "args.path.startsWith('drafts/')", "outcome": "allow"},
  {"id": "pricing", "description": "pricing changes go through finance", "tools": ["write_document"],
   "when": "args.path == 'pages/pricing.md'",
   "outcome": "require_approval", "approvers": ["group:finance"], "four_eyes": true}
 ]}`

// TestRuleDescriptionsReachApprovers: the description of the allow rule
// that lets a write of the held turn run without approval, and of the deny
// rule that refused another, is shown to the approvers, as a held call's
// rule description is: GET /runs/{id} (rule_description), the approval
// mail and the link's page. A run that asks approval for what an allow
// rule lets run shows why the call is held, then the rule's description.
func TestRuleDescriptionsReachApprovers(t *testing.T) {
	sc := script(
		toolUse("w1", "write_document", `{"path":"pages/x.md","text":"x\n"}`),
		toolUse("a1", "write_document", `{"path":"drafts/a.md","text":"a\n"}`),
		toolUse("d1", "delete_document", `{"path":"prod/a.md"}`))
	s, c := policyServer(t, sc, testDirectory, describedPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"]}`)
	id := run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	calls := run["pending"].(map[string]any)["calls"].([]any)
	want := map[string]string{"w1": "", "a1": "drafts are scratch space", "d1": "production is kept by people"}
	for _, raw := range calls {
		call := raw.(map[string]any)
		got, _ := call["rule_description"].(string)
		if got != want[call["id"].(string)] {
			t.Errorf("call %v: rule_description %q, want %q", call["id"], got, want[call["id"].(string)])
		}
	}
	links := s.WaitLinks(t, "ann@example.com", 1)
	mail := s.Mail()
	u, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(string(s.As(t, "").Call(t, "GET", u.Path, "", "").Body))
	for what, text := range map[string]string{"mail": mail, "page": page} {
		for _, d := range []string{"drafts are scratch space", "production is kept by people"} {
			if !strings.Contains(text, d) {
				t.Errorf("the %s does not show %q:\n%s", what, d, text)
			}
		}
	}

	// The run asks approval for every write_document: the drafts write is
	// held, and its approval's description says why before the rule's.
	sc = script(toolUse("a1", "write_document", `{"path":"drafts/a.md","text":"a\n"}`))
	s, c = policyServer(t, sc, testDirectory, describedPolicy)
	_, run, _ = call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"],"require_approval":["write_document"]}`)
	id = run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	held := run["pending"].(map[string]any)["calls"].([]any)[0].(map[string]any)
	approval, _ := held["approval"].(map[string]any)
	if held["rule"] != "drafts" || approval == nil ||
		approval["description"] != "this run asks for approval of write_document calls, which the policy alone lets run (drafts are scratch space)" {
		t.Errorf("held drafts write: %v, want rule drafts and an approval description saying why it is held and what the rule says", held)
	}
	s.WaitLinks(t, "ann@example.com", 1)
	if !strings.Contains(s.Mail(), "which the policy alone lets run (drafts are scratch space)") {
		t.Errorf("the mail does not say why the drafts write is held:\n%s", s.Mail())
	}
}

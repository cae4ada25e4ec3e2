package apitest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
)

// splitDirectory has two groups with no member in common: ann and bob
// write, carol and dave delete; frank starts the runs.
const splitDirectory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}
 ],
 "groups": [{"name": "writers", "members": ["ann", "bob"]}, {"name": "deleters", "members": ["carol", "dave"]}]
}`

// splitPolicy sends writes to the writers and deletes to the deleters,
// one approval each: no quorum.
const splitPolicy = `{"version": 1, "rules": [
  {"id": "writes", "tools": ["write_document"], "outcome": "require_approval", "approvers": ["group:writers"]},
  {"id": "deletes", "tools": ["delete_document"], "outcome": "require_approval", "approvers": ["group:deleters"]}
 ]}`

// writeAndDelete is one turn holding a write (A) and a delete (B), then the end.
var writeAndDelete = strings.Replace(twoWrites, `{"type":"tool_use","id":"toolu_b","name":"write_document","input":{"path":"pages/b.md","text":"B\n"}}`,
	`{"type":"tool_use","id":"toolu_b","name":"delete_document","input":{"path":"pages/pricing.md"}}`, 1)

// runSplitDecision: a turn that needs one approval per call, whose calls
// have approvers with nobody in common, so that no one person may decide
// the whole turn. Each call is decided by its own approvers:
//   - everyone who may decide a call gets a link and an inbox entry;
//   - a writer's decision covers the write only (a choice on the delete
//     is 403), may edit it (checked against the tool's schema; remember
//     is 422), and leaves the run waiting for the delete, out of the
//     writers' inboxes, in the deleters';
//   - a deleter's link then offers the delete only and completes the
//     turn: both calls run once, the write with the writer's edit, and
//     the run's decision and events name who decided, and edited, each
//     call.
func runSplitDecision(t *testing.T, opts ...func(*apitest.Options)) {
	o := apitest.Options{Script: writeAndDelete, Principals: []string{"frank", "ann", "bob", "carol", "dave"}, Governance: governance(t, splitDirectory, splitPolicy)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"write a, delete pricing","approvers":["group:writers"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	for _, who := range []string{"ann", "bob", "carol", "dave"} {
		s.WaitLinks(t, who+"@example.com", 1)
	}
	run = notified(t, s, c, "frank", id)
	if run["votes_needed"] != float64(1) || run["voting"] != true {
		t.Errorf("votes_needed %v, voting %v; want 1 approval, by votes", run["votes_needed"], run["voting"])
	}
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	mail := strings.NewReplacer("=\r\n", "", "=\n", "").Replace(s.Mail()) // quoted-printable's soft line breaks
	if !strings.Contains(mail, "Approvals:  each call is decided by its own approvers, one approval each") {
		t.Errorf("the approval mail does not say each call is decided by its own approvers:\n%s", mail)
	}
	if n := strings.Count(mail, "(needs approval; other approvers decide it, "); n != 4 {
		// Each of the four mails marks the call its reader may not decide
		// (tester helper-85: the page did, the mail did not).
		t.Errorf("%d calls marked 'other approvers decide it' in the text of the mails, want 4 (one per reader):\n%s", n, mail)
	}
	for _, who := range []string{"ann", "carol"} {
		_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
		if list, _ := inbox["approvals"].([]any); len(list) != 1 {
			t.Errorf("%s's inbox: %v, want the run", who, inbox)
		}
	}
	decide := func(who, body string) (int, map[string]any) {
		t.Helper()
		status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, `{"turn_digest":"`+digest+`",`+body+`}`)
		return status, out
	}

	status, out := decide("ann", `"calls":[{"call_id":"toolu_a","action":"approve"},{"call_id":"toolu_b","action":"approve"}]`)
	if status != 403 || !strings.Contains(errMessage(out), `call "toolu_b"`) {
		t.Fatalf("ann deciding the delete too: %d %v, want 403 naming toolu_b", status, out)
	}
	// ann decides the write alone (one approval each), so she may edit it:
	// checked as a decision's edit (the tool's schema), never remembered.
	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"edit","input":{"path":"pages/a.md"}}]`)
	if status != 422 || !strings.Contains(errMessage(out), "edited input") {
		t.Fatalf("ann's edit without the text: %d %v, want 422 naming the edited input", status, out)
	}
	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"edit","input":{"path":"pages/a.md","text":"AA\n"},"remember":"run"}]`)
	if status != 422 || !strings.Contains(errMessage(out), "remember is not possible in a vote of a turn whose calls are each decided by their own approvers") {
		t.Fatalf("ann's edit with remember: %d %v, want 422 saying remember is not possible", status, out)
	}
	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"edit","input":{"path":"pages/a.md","text":"AA\n"}}]`)
	if status != 202 || out["status"] != "WAITING_FOR_APPROVAL" {
		t.Fatalf("ann's edit: %d %v, want 202 and waiting for the delete", status, out)
	}
	for _, pc := range out["pending"].(map[string]any)["calls"].([]any) {
		pc := pc.(map[string]any)
		a := pc["approval"].(map[string]any)
		want := map[string]string{"toolu_a": "[ann] 0", "toolu_b": "<nil> 1"}[pc["id"].(string)]
		if got := fmt.Sprintf("%v %v", a["approved_by"], a["still_needed"]); got != want {
			t.Errorf("call %v: approved_by and still_needed %s, want %s", pc["id"], got, want)
		}
	}
	if votes, _ := out["votes"].([]any); len(votes) != 1 ||
		fmt.Sprint(votes[0].(map[string]any)["calls"]) != `[map[action:edit call_id:toolu_a input:map[path:pages/a.md text:AA
]]]` {
		t.Errorf("votes %v, want ann's edit of the write with its input", out["votes"])
	}
	for who, listed := range map[string]bool{"ann": false, "bob": false, "carol": true, "dave": true} {
		_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
		if list, _ := inbox["approvals"].([]any); (len(list) == 1) != listed {
			t.Errorf("%s's inbox after the write was approved: %v, want listed %v", who, inbox, listed)
		}
	}
	status, _ = decide("bob", `"action":"approve"`)
	if status != 409 {
		t.Errorf("bob after the write was approved: %d, want 409 (nothing left for him)", status)
	}

	carolLink := linkPath(t, s.WaitLinks(t, "carol@example.com", 1)[0])
	_, page := get(t, s, c, "GET", s.URL+carolLink, "")
	for _, want := range []string{"other approvers decide it", "Each call is decided by its own approvers</strong>, one approval each"} {
		if !strings.Contains(page, want) {
			t.Errorf("carol's page does not show %q:\n%s", want, page)
		}
	}
	browser := &apitest.Caller{URL: s.URL, HTTP: c}
	voted := browser.Call(t, "POST", carolLink, formCT, form("digest", digest, "action", "approve"))
	if voted.Status != 200 {
		t.Fatalf("carol's approval by link: %d\n%s", voted.Status, voted.Body)
	}

	done := waitAs(t, s, c, "frank", id, "COMPLETED")
	d := done["decision"].(map[string]any)
	// ann decided through the API as "ann", carol through her link as
	// carol@example.com: the deciders are named by person, the decision's
	// by (and the events' actors) as they authenticated.
	if d["by"] != "carol@example.com" || fmt.Sprint(d["deciders"]) != "[ann carol]" {
		t.Errorf("decision by %v, deciders %v; want carol's (as carol@example.com) completing it, ann's and carol's deciding it, named by person", d["by"], d["deciders"])
	}
	byCall := map[string]string{}
	for _, dc := range d["decided_calls"].([]any) {
		dc := dc.(map[string]any)
		byCall[dc["call_id"].(string)] = fmt.Sprint(dc["action"], dc["by"])
	}
	if byCall["toolu_a"] != "edit[ann]" || byCall["toolu_b"] != "approve[carol]" {
		t.Errorf("decided_calls %v, want the write edited by ann and the delete approved by carol", byCall)
	}
	if got := fmt.Sprint(d["decision"].(map[string]any)["calls"]); got != `[map[action:edit call_id:toolu_a input:map[path:pages/a.md text:AA
]] map[action:approve call_id:toolu_b]]` {
		t.Errorf("the decision the votes came to: %s, want the write edited as ann edited it and the delete approved", got)
	}
	if votes, _ := done["votes"].([]any); len(votes) != 2 || fmt.Sprint(votes[1].(map[string]any)["by"], " ", votes[1].(map[string]any)["person"]) != "carol@example.com carol" {
		t.Errorf("votes %v, want carol's by her link's address, counted for the person carol", done["votes"])
	}
	ran := map[string]int{}
	decisions := 0
	for _, e := range eventsOf(t, s, c, "frank", id) {
		data, _ := e["data"].(map[string]any)
		switch e["type"] {
		case runs.EventToolExecuted:
			ran[data["call_id"].(string)]++
			if data["call_id"] == "toolu_a" && (data["action"] != "edit" || fmt.Sprint(data["edited_input"]) != "map[path:pages/a.md text:AA\n]" ||
				fmt.Sprint(data["original_input"]) != "map[path:pages/a.md text:A\n]") {
				t.Errorf("the write's tool_executed event %v, want it run as edited, with the original and the edit", data)
			}
		case runs.EventVote:
			if e["actor"] == "ann" && fmt.Sprint(data["calls"]) != "[map[action:edit call_id:toolu_a input:map[path:pages/a.md text:AA\n]]]" {
				t.Errorf("ann's vote event %v, want her edit of the write", data)
			}
		case runs.EventDecision:
			decisions++
			if got := fmt.Sprint(data["decided_calls"]); !strings.Contains(got, "map[action:edit by:[ann] call_id:toolu_a tool:write_document]") ||
				!strings.Contains(got, "map[action:approve by:[carol] call_id:toolu_b tool:delete_document]") {
				t.Errorf("the decision event's decided_calls %s, want the write edited by ann and the delete approved by carol, named by person", got)
			}
			if e["actor"] != "carol@example.com" || fmt.Sprint(data["deciders"]) != "[ann carol]" {
				t.Errorf("the decision event's actor %v and deciders %v, want carol as she authenticated, and ann and carol by person", e["actor"], data["deciders"])
			}
		}
	}
	if ran["toolu_a"] != 1 || ran["toolu_b"] != 1 || decisions != 1 {
		t.Errorf("executed %v, %d decision events; want each call once, one decision", ran, decisions)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "a.md")); err != nil || string(b) != "AA\n" {
		t.Errorf("pages/a.md = %q, %v; want AA, as ann edited it, written", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "content", "pages", "pricing.md")); !os.IsNotExist(err) {
		t.Errorf("pages/pricing.md: %v, want it deleted", err)
	}
}

func TestSplitDecision(t *testing.T) { runSplitDecision(t) }

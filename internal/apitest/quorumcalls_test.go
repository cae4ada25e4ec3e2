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

const threeDirectory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}
 ],
 "groups": [{"name": "three", "members": ["ann", "bob", "carol"]}]
}`

const twoOfThreePolicy = `{"version": 1, "rules": [
  {"id": "two-of-three", "description": "writes need two of the three", "tools": ["write_document"],
   "outcome": "require_approval", "approvers": ["group:three"], "required_approvals": 2}
 ]}`

// twoWrites is one turn with two held writes, A and B, then the end.
const twoWrites = `{"turns":[
 {"content":[{"type":"text","text":"Two writes."},
             {"type":"tool_use","id":"toolu_a","name":"write_document","input":{"path":"pages/a.md","text":"A\n"}},
             {"type":"tool_use","id":"toolu_b","name":"write_document","input":{"path":"pages/b.md","text":"B\n"}}],
  "usage":{"input_tokens":100,"output_tokens":20}},
 {"content":[{"type":"text","text":"Done."}],"usage":{"input_tokens":150,"output_tokens":12}}
]}`

// runQuorumPerCallVotes: 2 of 3 over a turn with two held writes. Ann
// approves A and denies B; bob approves (the whole turn: A, and B, which
// ann's denial has denied already); the run resumes once, runs A once and
// tells the model B was denied with ann's reason; the events say so.
func runQuorumPerCallVotes(t *testing.T, opts ...func(*apitest.Options)) {
	o := apitest.Options{Script: twoWrites, Principals: []string{"frank", "ann", "bob", "carol"}, Governance: governance(t, threeDirectory, twoOfThreePolicy)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"write a and b","approvers":["group:three"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "frank", id)
	if run["votes_needed"] != float64(2) {
		t.Fatalf("votes_needed %v, want 2", run["votes_needed"])
	}
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	decide := func(who, body string) (int, map[string]any) {
		status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, `{"turn_digest":"`+digest+`",`+body+`}`)
		return status, out
	}

	// A per-call vote decides every held call the voter may decide that
	// is still open.
	status, out := decide("bob", `"calls":[{"call_id":"toolu_a","action":"approve"}]`)
	if status != 422 || !strings.Contains(errMessage(out), `call "toolu_b" (write_document) needs a decision`) {
		t.Fatalf("bob's vote on A alone: %d %v, want 422 naming toolu_b", status, out)
	}

	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"approve"},{"call_id":"toolu_b","action":"deny","message":"keep b as it is"}]`)
	if status != 202 || out["status"] != "WAITING_FOR_APPROVAL" {
		t.Fatalf("ann's vote: %d %v, want 202 and still waiting", status, out)
	}
	if out["votes_needed"] != float64(1) {
		t.Errorf("votes_needed after ann's vote %v, want 1 (A still needs one; B is denied)", out["votes_needed"])
	}
	progress := map[string]map[string]any{}
	for _, pc := range out["pending"].(map[string]any)["calls"].([]any) {
		pc := pc.(map[string]any)
		progress[pc["id"].(string)] = pc["approval"].(map[string]any)
	}
	if a := progress["toolu_a"]; a["approvals"] != float64(1) || a["still_needed"] != float64(1) || a["denied_by"] != nil {
		t.Errorf("A's approval %v, want 1 approval, 1 still needed, not denied", a)
	}
	if b := progress["toolu_b"]; b["approvals"] != float64(0) || b["still_needed"] != float64(0) || b["denied_by"] != "ann" {
		t.Errorf("B's approval %v, want denied by ann, nothing still needed", b)
	}
	_, inbox, _ := call(t, s, c, "GET", "/approvals", "carol", "", "")
	if list := inbox["approvals"].([]any); len(list) != 1 || list[0].(map[string]any)["votes_missing"] != float64(1) {
		t.Errorf("carol's inbox %v, want the run with 1 vote missing", inbox)
	}

	status, out = decide("ann", `"action":"approve"`)
	if status != 409 {
		t.Fatalf("ann again: %d %v, want 409", status, out)
	}
	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"approve"}]`)
	if status != 409 || !strings.Contains(errMessage(out), "already voted") {
		t.Fatalf("ann again, per call and incomplete: %d %v, want 409 (a person votes once)", status, out)
	}
	status, out = decide("ann", `"calls":[{"call_id":"toolu_a","action":"edit","input":{}}]`)
	if status != 409 || !strings.Contains(errMessage(out), "already voted") {
		t.Fatalf("ann again, with an edit: %d %v, want 409 (a person votes once, whatever the vote holds)", status, out)
	}
	status, out = decide("bob", `"action":"approve"`)
	if status != 202 || out["status"] == "WAITING_FOR_APPROVAL" {
		t.Fatalf("bob's vote: %d %v, want 202 and the run moving on", status, out)
	}
	status, _ = decide("carol", `"action":"deny"`)
	if status != 409 {
		t.Errorf("carol after the turn was decided: %d, want 409", status)
	}

	done := waitAs(t, s, c, "frank", id, "COMPLETED")
	if d := done["decision"].(map[string]any); d["by"] != "bob" {
		t.Errorf("decided by %v, want bob (the vote that completed the turn)", d["by"])
	}
	var votes []map[string]any
	var decision map[string]any
	writes, denials := map[string]int{}, map[string]string{}
	for _, e := range eventsOf(t, s, c, "frank", id) {
		data, _ := e["data"].(map[string]any)
		switch e["type"] {
		case runs.EventVote:
			votes = append(votes, data)
		case runs.EventDecision:
			if decision != nil {
				t.Error("two decision events: want exactly one transition")
			}
			decision = data["decision"].(map[string]any)
		case runs.EventToolExecuted:
			if data["tool"] == "write_document" {
				writes[data["call_id"].(string)]++
			}
		case runs.EventToolDenied:
			denials[data["call_id"].(string)], _ = data["detail"].(string)
		}
	}
	if len(votes) != 2 || votes[0]["person"] != "person:ann" || votes[1]["person"] != "person:bob" {
		t.Fatalf("vote events %v, want ann's then bob's", votes)
	}
	annCalls, _ := votes[0]["calls"].([]any)
	if len(annCalls) != 2 || annCalls[1].(map[string]any)["action"] != "deny" || annCalls[1].(map[string]any)["message"] != "keep b as it is" {
		t.Errorf("ann's vote event calls %v, want approve A, deny B with her reason", annCalls)
	}
	calls, _ := decision["calls"].([]any)
	if decision["action"] != nil || len(calls) != 2 ||
		calls[0].(map[string]any)["call_id"] != "toolu_a" || calls[0].(map[string]any)["action"] != "approve" ||
		calls[1].(map[string]any)["call_id"] != "toolu_b" || calls[1].(map[string]any)["action"] != "deny" ||
		calls[1].(map[string]any)["message"] != "keep b as it is" {
		t.Errorf("decision event %v, want approve toolu_a, deny toolu_b with ann's message", decision)
	}
	if writes["toolu_a"] != 1 || writes["toolu_b"] != 0 {
		t.Errorf("write_document executed %v, want toolu_a once and toolu_b never", writes)
	}
	if _, ok := denials["toolu_b"]; !ok {
		t.Errorf("tool_denied events %v, want one for toolu_b", denials)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "a.md")); err != nil || string(b) != "A\n" {
		t.Errorf("pages/a.md = %q, %v; want A written", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "content", "pages", "b.md")); !os.IsNotExist(err) {
		t.Errorf("pages/b.md: %v, want it never written", err)
	}
}

func TestQuorumPerCallVotes(t *testing.T) { runQuorumPerCallVotes(t) }

// TestQuorumPerCallVotesThroughLinks: under a quorum the approval page
// offers per-call choices for the calls this voter may decide (carol's
// directory entry lets her approve writes only, so the delete is others'),
// shows each call's progress, refuses a choice for a call that is not the
// voter's, and the page after a vote says what is still needed.
func TestQuorumPerCallVotesThroughLinks(t *testing.T) {
	directory := strings.Replace(threeDirectory, `"aliases": ["carol@example.com", "carol"]}`, `"aliases": ["carol@example.com", "carol"], "tools": ["write_document"]}`, 1)
	policy := strings.Replace(twoOfThreePolicy, `"tools": ["write_document"]`, `"tools": ["write_document", "delete_document"]`, 1)
	script := strings.Replace(twoWrites, `{"type":"tool_use","id":"toolu_b","name":"write_document","input":{"path":"pages/b.md","text":"B\n"}}`,
		`{"type":"tool_use","id":"toolu_b","name":"delete_document","input":{"path":"pages/pricing.md"}}`, 1)
	s := start(t, apitest.Options{Script: script, Principals: []string{"frank", "ann", "bob", "carol"}, Governance: governance(t, directory, policy)})
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"write a, delete pricing","approvers":["group:three"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "frank", id)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	browser := &apitest.Caller{URL: s.URL, HTTP: c}

	annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
	_, page := get(t, s, c, "GET", s.URL+annLink, "")
	if strings.Contains(page, "stops every call of this turn") || !strings.Contains(page, "denies the calls you may decide") {
		t.Error("ann's page under a quorum does not say that Deny all denies her calls only")
	}
	for _, want := range []string{`name="call.toolu_a"`, `name="call.toolu_b"`, "Submit per-call decisions", "Votes: 0 of 2 approvals"} {
		if !strings.Contains(page, want) {
			t.Errorf("ann's page does not show %q", want)
		}
	}
	voted := browser.Call(t, "POST", annLink, formCT, form("digest", digest, "action", "per_call", "call.toolu_a", "approve", "call.toolu_b", "deny", "reason.toolu_b", "keep the page"))
	if voted.Status != 200 || !strings.Contains(string(voted.Body), "Your vote was recorded") || !strings.Contains(string(voted.Body), "1 more approval") {
		t.Fatalf("ann's per-call vote by link: %d, want her vote recorded and 1 more approval needed:\n%s", voted.Status, voted.Body)
	}

	// Carol may decide the write only: no choices on the page (one call
	// is hers), the delete is others', and a choice for it is refused.
	carolLink := linkPath(t, s.WaitLinks(t, "carol@example.com", 1)[0])
	_, page = get(t, s, c, "GET", s.URL+carolLink, "")
	for _, want := range []string{"other approvers decide it", "(1 of 2)", "Votes: denied by ann", "Votes: 1 of 2 approvals"} {
		if !strings.Contains(page, want) {
			t.Errorf("carol's page does not show %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `name="call.toolu_b"`) {
		t.Error("carol's page offers a choice for the delete she may not decide")
	}
	refused := browser.Call(t, "POST", carolLink, formCT, form("digest", digest, "action", "per_call", "call.toolu_a", "approve", "call.toolu_b", "approve"))
	if refused.Status != 403 || !strings.Contains(string(refused.Body), "not yours to decide") {
		t.Fatalf("carol's choice for the delete: %d, want 403:\n%s", refused.Status, refused.Body)
	}
	if _, again, _ := call(t, s, c, "GET", "/runs/"+id, "frank", "", ""); again["status"] != "WAITING_FOR_APPROVAL" || len(again["votes"].([]any)) != 1 {
		t.Fatalf("after the refused vote: %v, want still waiting with ann's vote only", again)
	}
	ok := browser.Call(t, "POST", carolLink, formCT, form("digest", digest, "action", "approve"))
	if ok.Status != 200 {
		t.Fatalf("carol's approval: %d\n%s", ok.Status, ok.Body)
	}
	done := waitAs(t, s, c, "frank", id, "COMPLETED")
	calls := done["decision"].(map[string]any)["decision"].(map[string]any)["calls"].([]any)
	if len(calls) != 2 || calls[0].(map[string]any)["action"] != "approve" || calls[1].(map[string]any)["action"] != "deny" {
		t.Errorf("decision %v, want approve toolu_a, deny toolu_b", calls)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "pricing.md")); err != nil || string(b) != apitest.Pricing {
		t.Errorf("pages/pricing.md = %q, %v; want it kept (the delete was denied)", b, err)
	}
}

// runQuorumCallsDecidedApart: two held calls with their own approvers
// and quorums, a write two of the writers approve (ann, bob, carol) and a
// delete all three deleters approve (ann, dave, erin). Over HTTP:
//   - the mail says each call needs its own number of approvals, and what
//     each still needs;
//   - once ann and bob approved the write, carol (a writer only) has
//     nothing left to decide: the run leaves her inbox in the vote's own
//     write (NewDecision.StillAsked, passed by the API) while it stays in
//     dave's and erin's, whose entries count the two persons who approved
//     (approvals) and the approvals the delete still needs (votes_missing);
//   - carol's link says there is nothing left for her (409) and what the
//     other call still needs, and offers no form;
//   - GET /runs/{id} shows who approved each call so far and, once the
//     turn is decided, whose votes decided it, call by call, while
//     decision.by stays the voter whose vote completed it.
func runQuorumCallsDecidedApart(t *testing.T, opts ...func(*apitest.Options)) {
	const directory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]},
  {"id": "erin",  "aliases": ["erin@example.com", "erin"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}
 ],
 "groups": [{"name": "writers", "members": ["ann", "bob", "carol"]}, {"name": "deleters", "members": ["ann", "dave", "erin"]}]
}`
	const policy = `{"version": 1, "rules": [
  {"id": "writes", "tools": ["write_document"], "outcome": "require_approval", "approvers": ["group:writers"], "required_approvals": 2},
  {"id": "deletes", "tools": ["delete_document"], "outcome": "require_approval", "approvers": ["group:deleters"], "required_approvals": 3}
 ]}`
	script := strings.Replace(twoWrites, `{"type":"tool_use","id":"toolu_b","name":"write_document","input":{"path":"pages/b.md","text":"B\n"}}`,
		`{"type":"tool_use","id":"toolu_b","name":"delete_document","input":{"path":"pages/pricing.md"}}`, 1)
	o := apitest.Options{Script: script, Principals: []string{"frank", "ann", "bob", "carol", "dave", "erin"}, Governance: governance(t, directory, policy)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"write a, delete pricing","approvers":["group:writers"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "frank", id)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	carolLink := linkPath(t, s.WaitLinks(t, "carol@example.com", 1)[0])
	s.WaitLinks(t, "dave@example.com", 1)
	mail := strings.NewReplacer("=\r\n", "", "=\n", "").Replace(s.Mail()) // quoted-printable's soft line breaks
	for _, want := range []string{"each call needs its own number of approvals from distinct persons, up to 3",
		"Needed:     2 more approvals of write_document and 3 more of delete_document"} {
		if !strings.Contains(mail, want) {
			t.Errorf("the approval mail does not say %q:\n%s", want, mail)
		}
	}

	decide := func(who, body string) map[string]any {
		t.Helper()
		status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", who, jsonCT, `{"turn_digest":"`+digest+`",`+body+`}`)
		if status != 202 {
			t.Fatalf("%s's vote: %d %v", who, status, out)
		}
		return out
	}
	decide("ann", `"action":"approve"`)
	out := decide("bob", `"calls":[{"call_id":"toolu_a","action":"approve"}]`)
	if out["status"] != "WAITING_FOR_APPROVAL" || out["votes_needed"] != float64(2) {
		t.Fatalf("after ann's and bob's votes: %v, votes_needed %v; want waiting for the delete's 2 more", out["status"], out["votes_needed"])
	}
	approvedBy := map[string]any{}
	for _, pc := range out["pending"].(map[string]any)["calls"].([]any) {
		pc := pc.(map[string]any)
		approvedBy[pc["id"].(string)] = pc["approval"].(map[string]any)["approved_by"]
	}
	if fmt.Sprint(approvedBy["toolu_a"]) != "[ann bob]" || fmt.Sprint(approvedBy["toolu_b"]) != "[ann]" {
		t.Errorf("approved_by %v, want the write approved by ann and bob, the delete by ann", approvedBy)
	}

	for who, listed := range map[string]bool{"ann": false, "bob": false, "carol": false, "dave": true, "erin": true} {
		_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
		list := inbox["approvals"].([]any)
		if !listed {
			if len(list) != 0 {
				t.Errorf("%s's inbox after the write was approved: %v, want empty (nothing left for %s to decide)", who, list, who)
			}
			continue
		}
		if len(list) != 1 {
			t.Errorf("%s's inbox: %v, want the run", who, list)
			continue
		}
		e := list[0].(map[string]any)
		if e["approvals"] != float64(2) || e["votes_missing"] != float64(2) || e["votes_needed"] != float64(3) {
			t.Errorf("%s's entry %v, want 2 persons approved, 2 approvals missing of 3", who, e)
		}
	}

	status, page := get(t, s, c, "GET", s.URL+carolLink, "")
	if status != 409 || strings.Contains(page, "<form") ||
		!strings.Contains(page, "Every call you may decide was already approved or denied by the other approvers") ||
		!strings.Contains(page, "(2 more approvals of delete_document)") {
		t.Errorf("carol's link with nothing left for her: %d, want 409 saying so and what the delete still needs, no form:\n%s", status, page)
	}
	if status, page := get(t, s, c, "HEAD", s.URL+carolLink, ""); status != 409 || page != "" {
		t.Errorf("HEAD of carol's link: %d %q, want 409 without a body", status, page)
	}

	decide("dave", `"action":"approve"`)
	decide("erin", `"action":"approve"`)
	done := waitAs(t, s, c, "frank", id, "COMPLETED")
	d := done["decision"].(map[string]any)
	if d["by"] != "erin" || fmt.Sprint(d["deciders"]) != "[ann bob dave erin]" {
		t.Errorf("decision by %v, deciders %v; want by erin (the vote that completed it), deciders ann, bob, dave, erin", d["by"], d["deciders"])
	}
	if got := fmt.Sprint(d["decided_calls"]); got != "[map[action:approve by:[ann bob] call_id:toolu_a tool:write_document] map[action:approve by:[ann dave erin] call_id:toolu_b tool:delete_document]]" {
		t.Errorf("decided_calls %s, want the write by ann and bob, the delete by ann, dave and erin", got)
	}
	for _, e := range eventsOf(t, s, c, "frank", id) {
		if e["type"] == runs.EventDecision {
			data := e["data"].(map[string]any)
			if e["actor"] != "erin" || fmt.Sprint(data["deciders"]) != "[ann bob dave erin]" || fmt.Sprint(data["decided_calls"]) != fmt.Sprint(d["decided_calls"]) {
				t.Errorf("decision event %v, want erin's, naming the deciders as the run does", e)
			}
		}
	}
}

func TestQuorumCallsDecidedApart(t *testing.T) { runQuorumCallsDecidedApart(t) }

package apitest_test

import (
	"html"
	"net/url"
	"strings"
	"testing"
)

// TestAnUnknownToolsCallIsNotSaidToRun: a per-call deny of the call of a
// tool the run does not have (it needs no approval and can never run) is
// refused through the API and through the approval link's form with the
// same reason, which says the call cannot run, never that it "runs
// without one"; GET /runs/{id} and the page say why it cannot run.
func TestAnUnknownToolsCallIsNotSaidToRun(t *testing.T) {
	sc := script(
		toolUse("w1", "write_document", `{"path":"pages/x.md","text":"x\n"}`),
		toolUse("u1", "no_such_tool", `{"q":1}`))
	s, c := policyServer(t, sc, testDirectory, testPolicy)
	_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"p","approvers":["ann"]}`)
	id := run["id"].(string)
	run = waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
	pending := run["pending"].(map[string]any)
	digest := pending["turn_digest"].(string)
	calls := pending["calls"].([]any)
	if len(calls) != 2 {
		t.Fatalf("pending calls %v, want w1 and u1", calls)
	}
	if got, _ := calls[1].(map[string]any)["rejected"].(string); got != `unknown tool "no_such_tool"` {
		t.Errorf("u1's rejected = %q, want why it cannot run", got)
	}
	if got, _ := calls[0].(map[string]any)["rejected"].(string); got != "" {
		t.Errorf("w1's rejected = %q, want none", got)
	}

	const want = `call "u1" (no_such_tool) needs no approval and cannot run (unknown tool "no_such_tool"), so it cannot be denied`
	status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT,
		`{"turn_digest":"`+digest+`","calls":[{"call_id":"w1","action":"approve"},{"call_id":"u1","action":"deny","message":"no"}]}`)
	if msg := errMessage(out); status != 422 || !strings.Contains(msg, want) || strings.Contains(msg, "runs without") {
		t.Fatalf("API: got %d %q, want 422 saying %s", status, msg, want)
	}

	links := s.WaitLinks(t, "ann@example.com", 1)
	u, err := url.Parse(links[len(links)-1])
	if err != nil {
		t.Fatal(err)
	}
	r := s.As(t, "").Call(t, "GET", u.Path, "", "")
	page := html.UnescapeString(string(r.Body))
	if r.Status != 200 || !strings.Contains(page, "cannot run") || !strings.Contains(page, `unknown tool "no_such_tool"`) {
		t.Errorf("page: %d, want it to say u1 cannot run and why:\n%s", r.Status, page)
	}
	r = s.As(t, "").Call(t, "POST", u.Path, formCT, form("digest", digest, "action", "per_call", "call.w1", "approve", "call.u1", "deny"))
	page = html.UnescapeString(string(r.Body))
	if r.Status != 422 || !strings.Contains(page, want) || strings.Contains(page, "runs without") {
		t.Fatalf("form: got %d, want 422 saying %s:\n%s", r.Status, want, page)
	}
	waitAs(t, s, c, "bob", id, "WAITING_FOR_APPROVAL")
}

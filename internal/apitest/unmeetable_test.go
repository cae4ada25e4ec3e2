package apitest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
)

// readExample returns a shipped example file.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnmeetableQuorumEndToEnd: with the shipped directory and policy, the
// pricing rule needs 2 of finance (bob, carol) under four-eyes. When bob
// starts the run only carol may decide, so the quorum can never be met:
// the write is denied at once with the reason (no WAITING_FOR_APPROVAL,
// no link, no inbox entry, nothing written) and the model carries on.
// When ann starts it, bob and carol are exactly enough and the run waits.
func TestUnmeetableQuorumEndToEnd(t *testing.T) {
	directory, policy := readExample(t, "directory.json"), readExample(t, "policy.json")
	write := toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"Team: 12 EUR"}`)

	t.Run("bob starts it: denied with the reason, nobody asked", func(t *testing.T) {
		s, c := policyServer(t, script(write), directory, policy)
		_, run, _ := call(t, s, c, "POST", "/runs", "bob", jsonCT, `{"prompt":"Update the Team price to 12 EUR.","approvers":["group:ops"]}`)
		id := run["id"].(string)
		run = waitAs(t, s, c, "bob", id, "COMPLETED")
		var denied map[string]any
		for _, e := range eventsOf(t, s, c, "bob", id) {
			switch e["type"] {
			case runs.EventToolDenied:
				denied = e["data"].(map[string]any)
			case runs.EventSuspended, runs.EventNotified, runs.EventVote, runs.EventDecision:
				t.Errorf("got a %v event, want none: the quorum cannot be met, so nobody is asked", e["type"])
			}
		}
		if denied == nil {
			t.Fatal("no tool_denied event")
		}
		detail, _ := denied["detail"].(string)
		for _, want := range []string{`rule "pricing" needs 2 approvals`, "only 1 person may decide: carol", "four-eyes: bob started the run"} {
			if !strings.Contains(detail, want) {
				t.Errorf("tool_denied detail %q, want it to say %q", detail, want)
			}
		}
		if denied["rule"] != "pricing" || denied["call_id"] != "w1" {
			t.Errorf("tool_denied %v, want call w1 under rule pricing", denied)
		}
		if b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "pricing.md")); err != nil || string(b) != apitest.Pricing {
			t.Errorf("pages/pricing.md = %q, %v; want the seeded page, never written", b, err)
		}
		if mail := s.Mail(); mail != "" {
			t.Errorf("approval mail was sent: %q", mail)
		}
		for _, who := range []string{"ann", "bob", "carol"} {
			if n := len(s.Links(who + "@example.com")); n != 0 {
				t.Errorf("%s got %d approval links", who, n)
			}
			_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
			if list, _ := inbox["approvals"].([]any); len(list) != 0 {
				t.Errorf("%s's inbox: %v, want empty", who, inbox)
			}
		}
		if run["votes_needed"] != nil && run["votes_needed"] != float64(0) {
			t.Errorf("votes_needed %v on a run that never waited", run["votes_needed"])
		}
	})

	t.Run("ann starts it: bob and carol are exactly enough, the run waits", func(t *testing.T) {
		s, c := policyServer(t, script(write), directory, policy)
		_, run, _ := call(t, s, c, "POST", "/runs", "ann", jsonCT, `{"prompt":"Update the Team price to 12 EUR.","approvers":["group:ops"]}`)
		id := run["id"].(string)
		run = waitAs(t, s, c, "ann", id, "WAITING_FOR_APPROVAL")
		if run["votes_needed"] != float64(2) {
			t.Errorf("votes_needed %v, want 2", run["votes_needed"])
		}
		s.WaitLinks(t, "bob@example.com", 1)
		s.WaitLinks(t, "carol@example.com", 1)
	})
}

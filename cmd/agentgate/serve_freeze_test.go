package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeAFreezeStopsAHeldWrite is an operator's emergency freeze as it
// happens on the local server: a run's write is held for bob under the
// policy serve started with; serve is restarted with a freeze (a new first
// rule denying write_*), and bob approves the write he reviewed. The write
// never runs (the page is as it was), the run goes on (the read of the
// held turn runs, the model answers, the run completes), and the events
// tell it: a tool_denied event naming the freeze rule, marked denied at
// resume, with the rule the call was held under. Before, the approved
// write ran: the policy judged a turn only when the model made it.
func TestServeAFreezeStopsAHeldWrite(t *testing.T) {
	dir := t.TempDir()
	files := t.TempDir()
	seedDemoDocuments(t, dir)
	write := func(name, text string) string {
		path := filepath.Join(files, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return path
	}
	held := write("policy.json", `{"version": 1, "rules": [
  {"id": "page-writes", "tools": ["write_document"], "outcome": "require_approval", "description": "pages are public"}]}`)
	frozen := write("freeze.json", `{"version": 1, "rules": [
  {"id": "freeze", "tools": ["write_*"], "outcome": "deny", "message": "writes are frozen during the incident"},
  {"id": "page-writes", "tools": ["write_document"], "outcome": "require_approval", "description": "pages are public"}]}`)
	model := "scripted:" + writeScript(t, files, `{"turns":[{"content":[
   {"type":"tool_use","id":"r1","name":"read_document","input":{"path":"pages/about.md"}},
   {"type":"tool_use","id":"w1","name":"write_document","input":{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}}]},
	 {"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn"}]}`)
	pricing := filepath.Join(dir, "content", "pages", "pricing.md")
	before, err := os.ReadFile(pricing)
	require.NoError(t, err)

	serve := func(policy string) (url string, stop func()) {
		t.Helper()
		return startServe(t, []string{"--addr", "127.0.0.1:0", "--dir", dir, "--model", model, "--policy", policy,
			"--token", "alice=" + linkAliceToken, "--token", "bob=" + linkBobToken})
	}

	url, stop := serve(held)
	alice := &apiClient{t: t, base: url, token: linkAliceToken}
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "Raise the Team plan to 12 EUR", "approvers": []string{"bob"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	require.NotNil(t, run.Pending)
	stop()

	url, _ = serve(frozen)
	alice = &apiClient{t: t, base: url, token: linkAliceToken}
	bob := &apiClient{t: t, base: url, token: linkBobToken}
	bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	done := alice.waitStatus(run.ID, "COMPLETED")
	assert.Equal(t, "completed", done.Reason)

	after, err := os.ReadFile(pricing)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the approved write never ran")

	type stepData struct {
		CallID         string `json:"call_id"`
		Rule           string `json:"rule"`
		DeniedAtResume bool   `json:"denied_at_resume"`
		HeldRule       string `json:"held_rule"`
		Detail         string `json:"detail"`
	}
	var executed, denied []stepData
	for _, ev := range alice.events(run.ID) {
		var d stepData
		switch ev.Type {
		case "tool_executed":
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			executed = append(executed, d)
		case "tool_denied":
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			denied = append(denied, d)
		}
	}
	require.Len(t, executed, 1, "the read of the held turn ran")
	assert.Equal(t, "r1", executed[0].CallID)
	require.Len(t, denied, 1)
	assert.Equal(t, "w1", denied[0].CallID)
	assert.Equal(t, "freeze", denied[0].Rule)
	assert.True(t, denied[0].DeniedAtResume)
	assert.Equal(t, "page-writes", denied[0].HeldRule)
	assert.Equal(t, `denied at resume by policy rule "freeze" of the policy in force then (when the turn was held, rule "page-writes" judged it; the decision let it run): writes are frozen during the incident`, denied[0].Detail)
}

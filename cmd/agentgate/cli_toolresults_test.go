package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/client"
)

// clientToolCLIScript hands the caller's lookup over at once (a read), then
// finishes with what it was told.
const clientToolCLIScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"c1","name":"lookup","input":{"sku":"A"}},
             {"type":"tool_use","id":"c2","name":"lookup","input":{"sku":"B"}}]},
 {"content":[{"type":"text","text":"stock looked up"}]}]}`

// startCLIEnvScripted is startCLIEnv with a scripted model.
func startCLIEnvScripted(t *testing.T, script string) *cliEnv {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "script.json")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	return startCLIEnvWith(t, serveOptions{dir: dir, model: "scripted:" + file})
}

func TestCLIToolResults(t *testing.T) {
	e := startCLIEnvScripted(t, clientToolCLIScript)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tools := write("tools.json", `[{"name":"lookup","description":"stock","effect":"read","input_schema":{"type":"object","properties":{"sku":{"type":"string"}}}}]`)
	r := e.runJSON("alice", "runs", "start", "--prompt", "look up A and B", "--approver", "bob",
		"--client-tools", tools, "--tool-executor", "carol", "--tool-results-ttl", "10m", "--wait")
	if r.Status != client.StatusWaitingForToolResults || r.ToolResults == nil || len(r.ToolResults.Calls) != 2 {
		t.Fatalf("run %s is %s (%+v), want it waiting for tool results", r.ID, r.Status, r.ToolResults)
	}
	trID := r.ToolResults.ToolResultsID
	bare := write("bare.json", `[{"call_id":"c1","content":"3 of A"},{"call_id":"c2","content":"no B","is_error":true}]`)
	missing := write("missing.json", `[{"call_id":"c1","content":"3 of A"}]`)
	stale := write("stale.json", `{"tool_results_id":"other","results":[{"call_id":"c1","content":"x"},{"call_id":"c2","content":"y"}]}`)
	unknown := write("unknown.json", `[{"call_id":"c1","content":"x","colour":"red"}]`)
	tests := []struct {
		name      string
		who       string
		args      []string
		code      int
		out, serr string
	}{
		{"get shows the calls", "carol", []string{"runs", "get", r.ID}, 0, "tool-results id " + trID, ""},
		{"get shows an input", "alice", []string{"runs", "get", r.ID}, 0, `c2 lookup {"sku":"B"}`, ""},
		{"tool-calls as JSON", "carol", []string{"runs", "tool-calls", r.ID}, 0, `"sku": "B"`, ""},
		{"tool-calls of an unknown run", "carol", []string{"runs", "tool-calls", "nope"}, 1, "", "HTTP 404"},
		{"wait for it", "alice", []string{"runs", "wait", r.ID, "--status", "waiting_for_tool_results"}, 0, "WAITING_FOR_TOOL_RESULTS", ""},
		{"no file", "alice", []string{"runs", "tool-results", r.ID}, 2, "", "--results"},
		{"no id", "alice", []string{"runs", "tool-results", "--results", bare}, 2, "", "give the run id"},
		{"unknown field in the file", "alice", []string{"runs", "tool-results", r.ID, "--results", unknown}, 2, "", `--results: json: unknown field "colour"`},
		{"a result missing", "alice", []string{"runs", "tool-results", r.ID, "--results", missing}, 1, "", "HTTP 422 unprocessable"},
		{"a stale id", "alice", []string{"runs", "tool-results", r.ID, "--results", stale}, 1, "", "HTTP 409 conflict"},
		{"not a tool executor", "bob", []string{"runs", "tool-results", r.ID, "--results", bare}, 1, "", "HTTP 403 forbidden"},
		{"unauthenticated", "stranger", []string{"runs", "tool-results", r.ID, "--results", bare}, 1, "", "HTTP 401"},
		{"an unknown run", "alice", []string{"runs", "tool-results", "nope", "--results", bare}, 1, "", "HTTP 404"},
		{"submit", "carol", []string{"runs", "tool-results", r.ID, "--results", bare}, 0, "2 result(s) recorded", "answering the run's current hand-over " + trID},
		{"submit again", "carol", []string{"runs", "tool-results", r.ID, "--results", bare, "--tool-results-id", trID}, 1, "", "HTTP 409"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, serr := e.cli(tt.who, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(serr, tt.serr) {
				t.Errorf("agentgate %v: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q", tt.args, code, tt.code, out, serr, tt.out, tt.serr)
			}
		})
	}
	done := e.runJSON("alice", "runs", "wait", r.ID)
	if done.Status != client.StatusCompleted || done.Output == nil || done.Output.Text != "stock looked up" {
		t.Errorf("done: %+v", done)
	}
}

// TestCLIToolCallsWholeInputs: a client call whose input is far over the
// run row's summary is shown shortened by `runs get`, which says so and
// where the whole is; `runs tool-calls` prints it whole.
func TestCLIToolCallsWholeInputs(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 12<<10) // 192 KiB
	script, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"content": []any{map[string]any{"type": "tool_use", "id": "c1", "name": "lookup", "input": map[string]any{"sku": long}}}},
		map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := startCLIEnvScripted(t, string(script))
	tools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(tools, []byte(`[{"name":"lookup","description":"stock","effect":"read","input_schema":{"type":"object"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.runJSON("alice", "runs", "start", "--prompt", "look it up", "--approver", "bob", "--client-tools", tools, "--wait")
	if r.ToolResults == nil || len(r.ToolResults.Calls) != 1 || !r.ToolResults.Calls[0].InputTruncated {
		t.Fatalf("run %s is %s (%+v), want one shortened client call", r.ID, r.Status, r.ToolResults)
	}
	code, out, serr := e.cli("alice", "runs", "get", r.ID)
	want := len(`{"sku":""}`) + len(long)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("(shortened: %d bytes in all)", want)) || !strings.Contains(out, "agentgate runs tool-calls "+r.ID) {
		t.Errorf("runs get: exit %d\n%s%s", code, out, serr)
	}
	code, out, serr = e.cli("alice", "runs", "tool-calls", r.ID)
	var got struct {
		ToolResultsID string `json:"tool_results_id"`
		Calls         []struct {
			ID    string `json:"id"`
			Input struct{ SKU string }
		} `json:"calls"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("runs tool-calls: exit %d\n%.300s%s", code, out, serr)
	}
	if got.ToolResultsID != r.ToolResults.ToolResultsID || len(got.Calls) != 1 || got.Calls[0].Input.SKU != long {
		t.Errorf("runs tool-calls: %d call(s), id %q, input of %d bytes; want the whole %d", len(got.Calls), got.ToolResultsID, len(got.Calls[0].Input.SKU), len(long))
	}
}

// TestCLIMarksAnEditedHandedOverCall: a client call an approver edited
// before it was handed over is marked so by `runs get`, as `runs
// tool-calls` and --json mark it (edited).
func TestCLIMarksAnEditedHandedOverCall(t *testing.T) {
	e := startCLIEnvScripted(t, `{"turns":[
 {"content":[{"type":"tool_use","id":"c1","name":"order","input":{"sku":"A","qty":1}}]},
 {"content":[{"type":"text","text":"ordered"}]}]}`)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	edit := filepath.Join(dir, "edit.json")
	for p, body := range map[string]string{
		tools: `[{"name":"order","description":"order stock","effect":"write","input_schema":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}]`,
		edit:  `{"sku":"A","qty":2}`,
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := e.runJSON("alice", "runs", "start", "--prompt", "order A", "--approver", "bob",
		"--client-tools", tools, "--tool-executor", "carol", "--wait")
	if r.Status != client.StatusWaiting || r.Pending == nil {
		t.Fatalf("run %s is %s, want it waiting for approval", r.ID, r.Status)
	}
	if code, out, serr := e.cli("bob", "runs", "decide", r.ID, "--digest", r.Pending.TurnDigest, "--call", "c1=edit:@"+edit); code != 0 {
		t.Fatalf("decide: exit %d\n%s\n%s", code, out, serr)
	}
	e.runJSON("alice", "runs", "wait", r.ID, "--status", "waiting_for_tool_results")
	code, out, serr := e.cli("carol", "runs", "get", r.ID)
	if code != 0 || !strings.Contains(out, `c1 order {"qty":2,"sku":"A"} (input edited by an approver)`) {
		t.Errorf("runs get: exit %d\n%s\n%s", code, out, serr)
	}
}

package approvalpage_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const digest = "3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7"

// hostile is text a model could put into arguments, previews or ids.
const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`

// threeCalls is a turn with two writes needing approval and a read that
// runs without one.
func threeCalls() []runs.CallSummary {
	return []runs.CallSummary{
		{ID: "toolu_01", Tool: "write_document", Input: json.RawMessage(`{"path":"a.md","content":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}`),
			NeedsApproval: true, Effect: "write", Preview: "--- a.md\n+++ a.md\n-old\n+" + hostile},
		{ID: "toolu_02", Tool: "send_email", Input: json.RawMessage(`{"to":"team@example.com","subject":"Runbook & policy"}`),
			NeedsApproval: true, Effect: "write"},
		{ID: "toolu_03", Tool: "read_document", Input: json.RawMessage(`{"path":"b.md"}`), Effect: "read"},
	}
}

func confirmPage() approvalpage.ConfirmPage {
	return approvalpage.ConfirmPage{
		FormAction: "/prod/approvals/q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80",
		RunID:      "run_01HZX3",
		Initiator:  "arn:aws:iam::123456789012:user/bob",
		Purpose:    "Update the runbook " + hostile,
		Approver:   "alice@example.com",
		Calls:      threeCalls(),
		TurnDigest: digest,
		Deadline:   time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC),
	}
}

// golden compares got with testdata/name, rewriting the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept)\n--- got ---\n%s", name, got)
	}
}

// assertSafe fails when body carries hostile markup unescaped or any script.
func assertSafe(t *testing.T, body string) {
	t.Helper()
	lower := strings.ToLower(body)
	for _, bad := range []string{"<script", "<img", "javascript:", "<link", "<iframe", "<object", "<embed"} {
		if strings.Contains(lower, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if !strings.HasPrefix(body, "<!DOCTYPE html>") || !strings.Contains(body, `<meta name="viewport" content="width=device-width, initial-scale=1">`) {
		t.Error("page is not a complete HTML document with a mobile viewport")
	}
}

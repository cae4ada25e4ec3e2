package approval_test

import (
	"encoding/json"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/runs"
)

// sampleToken is a fixed, well-formed token for golden output.
const sampleToken = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80"

// sampleMessage returns a two-call message: a write needing approval with a
// hostile argument and a diff preview, and a read-only sibling.
func sampleMessage() approval.Message {
	return approval.Message{
		RunID:        "run_01HZX3",
		SuspensionID: "susp_2",
		Approver:     "alice@example.com",
		Initiator:    "arn:aws:iam::123456789012:user/bob",
		Purpose:      "Update the on-call runbook with the new escalation policy & notify the team.\nKeep the old section.",
		Calls: []runs.CallSummary{
			{
				ID:            "toolu_01",
				Tool:          "write_document",
				Input:         json.RawMessage(`{"path":"runbooks/oncall.md","content":"<script>alert('x')</script> & more"}`),
				NeedsApproval: true,
				Effect:        "write",
				Preview:       "--- a/runbooks/oncall.md\n+++ b/runbooks/oncall.md\n@@ -1,2 +1,2 @@\n-Page <ops>\n+Page <script>alert(1)</script>",
			},
			{
				ID:     "toolu_02",
				Tool:   "read_document",
				Input:  json.RawMessage(`{"path":"runbooks/escalation.md"}`),
				Effect: "read",
			},
		},
		Deadline: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC),
		Link:     approval.Link("https://gate.example.com/prod/", sampleToken),
	}
}

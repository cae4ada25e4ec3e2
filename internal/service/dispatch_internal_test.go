package service

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// BenchmarkInProcessJob measures what a job costs between the dispatcher
// that made it from the committed row and the worker that claims from it
// in the same process: NewJob, then snapshotRow.
func BenchmarkInProcessJob(b *testing.B) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	r := &runs.Run{
		ID: "01a2449c99702d3e744be018e0421125", Status: runs.StatusResuming, Version: 3,
		CreatedAt: now, UpdatedAt: now, Initiator: "alice", Approvers: []string{"bob"},
		Purpose: "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		Request: json.RawMessage(`{"prompt":"The Team plan now costs 12 EUR per user and month. Update the pricing page.","approvers":["bob"]}`),
		PendingCalls: []runs.CallSummary{{ID: "toolu_demo_write", Tool: "write_document", Effect: "write", NeedsApproval: true,
			Input:   json.RawMessage(`{"path":"pages/pricing.md","text":"# Pricing\n\n- Starter: free\n- Team: 12 EUR per user and month\n- Enterprise: ask us\n"}`),
			Preview: "--- a/pages/pricing.md\n+++ b/pages/pricing.md\n@@ -1,5 +1,5 @@\n # Pricing\n \n- Team: 10 EUR\n+- Team: 12 EUR\n"}},
	}
	runs.SealWriteID(r)
	b.ReportAllocs()
	for b.Loop() {
		j := NewJob(JobResume, r)
		if got, why := j.snapshotRow(now); got == nil {
			b.Fatalf("no row: %s", why)
		}
	}
}

package approval_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestMoreApprovals(t *testing.T) {
	open := func(id, tool string, needed, still int) approval.CallProgress {
		return approval.CallProgress{ID: id, Tool: tool, Needed: needed, Approvals: needed - still, StillNeeded: still}
	}
	tests := []struct {
		name string
		ps   []approval.CallProgress
		want string
	}{
		{"every call needs as many more", []approval.CallProgress{open("a", "write_document", 2, 2), open("b", "send_mail", 2, 2)}, "2 more approval(s) for each held call"},
		{"one call", []approval.CallProgress{open("a", "write_document", 3, 1)}, "1 more approval(s)"},
		{"calls differ", []approval.CallProgress{open("a", "write_document", 2, 1), open("b", "send_mail", 2, 2)},
			"1 more approval of write_document and 2 more of send_mail"},
		{"a call decided", []approval.CallProgress{open("a", "write_document", 2, 0), open("b", "send_mail", 2, 1)}, "1 more approval of send_mail"},
		{"a call denied", []approval.CallProgress{{ID: "a", Tool: "write_document", Needed: 2, DeniedBy: "ann"}, open("b", "send_mail", 3, 2)},
			"2 more approvals of send_mail"},
		{"three open", []approval.CallProgress{open("a", "x", 1, 1), open("b", "y", 2, 2), open("c", "z", 2, 2)}, "1 more approval of x, 2 more of y and 2 more of z"},
		{"a tool held twice", []approval.CallProgress{open("toolu_1", "write_document", 1, 1), open("toolu_2", "write_document", 2, 2)},
			"1 more approval of write_document (toolu_1) and 2 more of write_document (toolu_2)"},
		{"nothing open", []approval.CallProgress{open("a", "x", 2, 0)}, ""},
		{"no calls", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := approval.MoreApprovals(tt.ps); got != tt.want {
				t.Errorf("MoreApprovals = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	r := &runs.Run{VotesNeeded: 2, PendingCalls: []runs.CallSummary{
		{ID: "a", Tool: "write_document", NeedsApproval: true, Approval: &loop.ApprovalRule{RequiredApprovals: 2}},
		{ID: "r", Tool: "read_document"},
		{ID: "b", Tool: "send_mail", NeedsApproval: true, Approval: &loop.ApprovalRule{RequiredApprovals: 1}},
	}, Votes: []runs.Vote{{By: "ann", Person: "person:ann", Choices: "a-d", Reasons: []string{"no"}}}}
	got := approval.Progress(r)
	want := []approval.CallProgress{
		{ID: "a", Tool: "write_document", Needed: 2, Approvals: 1, StillNeeded: 1},
		{ID: "b", Tool: "send_mail", Needed: 1, DeniedBy: "ann"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Progress = %+v, want %+v", got, want)
	}
	if approval.SameNeeds(got) {
		t.Error("SameNeeds of calls needing 2 and 1: true")
	}
	if p := approval.Progress(&runs.Run{VotesNeeded: 1, PendingCalls: r.PendingCalls}); p != nil {
		t.Errorf("Progress of a turn one approval decides = %+v, want nil", p)
	}
}

package loop_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// TestValidateVote: a vote approves or denies, whole turn or per call,
// and need not decide every held call (the voter decides theirs). Under a
// quorum it is never an edit or a remember (the quorum's reason); where
// each call needs one approval from its own approvers, a per-call vote may
// edit a call, checked as a decision's edit is (the tool's schema, the
// policy rule the call was held for, only a call held for approval), and
// is never a remember (the per-call mode's reason).
func TestValidateVote(t *testing.T) {
	calls := []loop.PendingCall{
		{ID: "a", Name: "write_doc", NeedsApproval: true, Effect: loop.EffectWrite, Rule: "default"},
		{ID: "b", Name: "write_doc", NeedsApproval: true, Effect: loop.EffectWrite, Rule: "default"},
		{ID: "r", Name: "read_doc", Effect: loop.EffectRead},
	}
	tools := testTools(t, &execLog{}, nil)
	edit := func(id, input string) loop.Decision {
		return loop.Decision{TurnDigest: "d1", Calls: []loop.CallDecision{{CallID: id, Action: loop.ActionEdit, Input: []byte(input)}}}
	}
	const digest = "d1"
	tests := []struct {
		name string
		d    loop.Decision
		want error // nil: valid
		says string
		// needed is the turn's votes_needed (0: 2, a quorum).
		needed int
	}{
		{"whole turn", loop.Decision{TurnDigest: digest, Action: loop.ActionDeny, Message: "no"}, nil, "", 0},
		{"per call, one of the held calls", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}}}, nil, "", 0},
		{"per call, approve and deny", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}, {CallID: "b", Action: loop.ActionDeny, Message: "keep"}}}, nil, "", 0},
		{"an edit", edit("a", `{"path":"x","text":"y"}`),
			loop.ErrInvalidDecision, "an edit would change what the other approvers approved", 0},
		{"remember", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove, Remember: loop.RememberRun}}},
			loop.ErrInvalidDecision, "remember is not possible in a vote of a turn that needs approvals from more than one person", 0},
		{"an edit, per-call votes", edit("a", `{"path":"x","text":"y"}`), nil, "", 1},
		{"an edit and an approval, per-call votes", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{
			{CallID: "a", Action: loop.ActionEdit, Input: []byte(`{"path":"x","text":"y"}`)}, {CallID: "b", Action: loop.ActionApprove}}}, nil, "", 1},
		{"an edit the schema refuses, per-call votes", edit("a", `{"path":"x"}`), loop.ErrInvalidDecision, "edited input", 1},
		{"an edit into a denied path, per-call votes", edit("a", `{"path":"prod/x","text":"y"}`),
			loop.ErrInvalidDecision, `refused by policy rule "no-prod"`, 1},
		{"an edit under another rule, per-call votes", edit("a", `{"path":"pricing","text":"y"}`),
			loop.ErrInvalidDecision, `falls under policy rule "pricing"`, 1},
		{"an edit of a read, per-call votes", edit("r", `{"path":"x"}`), loop.ErrInvalidDecision, "needs no approval", 1},
		{"an edit of another turn, per-call votes", loop.Decision{TurnDigest: "d0", Calls: edit("a", `{"path":"x","text":"y"}`).Calls}, loop.ErrDigestMismatch, "", 1},
		{"remember, per-call votes", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove, Remember: loop.RememberRun}}},
			loop.ErrInvalidDecision, "remember is not possible in a vote of a turn whose calls are each decided by their own approvers", 1},
		{"a denial of a read", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "r", Action: loop.ActionDeny}}},
			loop.ErrInvalidDecision, "needs no approval", 0},
		{"an unknown call", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "z", Action: loop.ActionApprove}}},
			loop.ErrInvalidDecision, "not pending", 0},
		{"another turn", loop.Decision{TurnDigest: "d0", Action: loop.ActionApprove}, loop.ErrDigestMismatch, "", 0},
		{"both forms", loop.Decision{TurnDigest: digest, Action: loop.ActionApprove, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}}},
			loop.ErrInvalidDecision, "not both", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needed := tt.needed
			if needed == 0 {
				needed = 2
			}
			err := loop.ValidateVote(t.Context(), tools, byPath, calls, digest, tt.d, needed)
			if needed == 1 && strings.Contains(fmt.Sprint(err), "other approvers approved") {
				t.Fatalf("got %v: the quorum's reason, in the per-call mode", err)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want a valid vote", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.says)
			}
		})
	}
}

package loop_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// TestValidateVote: a vote under a quorum approves or denies, whole turn
// or per call, need not decide every held call (the voter decides theirs),
// and is never an edit or a remember; the refusal of an edit or a
// remember gives the quorum's reason under a quorum, and the per-call
// mode's where each call needs one approval from its own approvers.
func TestValidateVote(t *testing.T) {
	calls := []loop.PendingCall{
		{ID: "a", Name: "write_document", NeedsApproval: true, Effect: loop.EffectWrite},
		{ID: "b", Name: "write_document", NeedsApproval: true, Effect: loop.EffectWrite},
		{ID: "r", Name: "read_document", Effect: loop.EffectRead},
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
		{"an edit", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionEdit, Input: []byte(`{"path":"x"}`)}}},
			loop.ErrInvalidDecision, "an edit would change what the other approvers approved", 0},
		{"remember", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove, Remember: loop.RememberRun}}},
			loop.ErrInvalidDecision, "remember is not possible in a vote of a turn that needs approvals from more than one person", 0},
		{"an edit, per-call votes", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionEdit, Input: []byte(`{"path":"x"}`)}}},
			loop.ErrInvalidDecision, "each call of this turn is decided by its own approvers, one approval each, and a vote on a call cannot edit it", 1},
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
			err := loop.ValidateVote(calls, digest, tt.d, needed)
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

package loop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// TestValidateVote: a vote under a quorum approves or denies, whole turn
// or per call, need not decide every held call (the voter decides theirs),
// and is never an edit or a remember.
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
	}{
		{"whole turn", loop.Decision{TurnDigest: digest, Action: loop.ActionDeny, Message: "no"}, nil, ""},
		{"per call, one of the held calls", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}}}, nil, ""},
		{"per call, approve and deny", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}, {CallID: "b", Action: loop.ActionDeny, Message: "keep"}}}, nil, ""},
		{"an edit", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionEdit, Input: []byte(`{"path":"x"}`)}}},
			loop.ErrInvalidDecision, "an edit would change what the other approvers approved"},
		{"remember", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove, Remember: loop.RememberRun}}},
			loop.ErrInvalidDecision, "remember is not possible in a vote"},
		{"a denial of a read", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "r", Action: loop.ActionDeny}}},
			loop.ErrInvalidDecision, "needs no approval"},
		{"an unknown call", loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "z", Action: loop.ActionApprove}}},
			loop.ErrInvalidDecision, "not pending"},
		{"another turn", loop.Decision{TurnDigest: "d0", Action: loop.ActionApprove}, loop.ErrDigestMismatch, ""},
		{"both forms", loop.Decision{TurnDigest: digest, Action: loop.ActionApprove, Calls: []loop.CallDecision{{CallID: "a", Action: loop.ActionApprove}}},
			loop.ErrInvalidDecision, "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := loop.ValidateVote(calls, digest, tt.d)
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

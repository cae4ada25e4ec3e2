package runs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

// TestDecidersFitTheEvent: a decision event names who decided each call
// when that fits maxDecidersSize; the most calls a turn holds, each
// approved by the most persons a rule asks for, with the longest names,
// would not: the event then keeps the deciders without the calls, says
// so, and stays under MaxEventDataSize.
func TestDecidersFitTheEvent(t *testing.T) {
	quorum := func(calls, voters, nameLen int) *Run {
		r := &Run{VotesNeeded: voters, TurnDigest: "d"}
		for i := range calls {
			r.PendingCalls = append(r.PendingCalls, CallSummary{ID: fmt.Sprintf("call-%d", i), Tool: "write_document", NeedsApproval: true,
				Approval: &loop.ApprovalRule{RequiredApprovals: voters}})
		}
		for i := range voters {
			name := fmt.Sprintf("p%02d@", i) + strings.Repeat("x", nameLen)
			r.Votes = append(r.Votes, Vote{By: name, Person: name, Whole: true, Choices: strings.Repeat("a", calls)})
		}
		return r
	}

	small := withDeciders(DecisionEventData{}, quorum(2, 2, 10), nil)
	if len(small.Deciders) != 2 || len(small.DecidedCalls) != 2 || small.DecidersCut {
		t.Errorf("two calls, two voters: deciders %v, calls %v, cut %v; want both voters and both calls, nothing cut", small.Deciders, small.DecidedCalls, small.DecidersCut)
	}
	for _, dc := range small.DecidedCalls {
		if dc.Action != loop.ActionApprove || len(dc.By) != 2 || dc.Tool != "write_document" {
			t.Errorf("decided call %+v, want approved by both", dc)
		}
	}

	big := withDeciders(DecisionEventData{}, quorum(MaxPendingCalls, 20, 300), nil)
	if big.DecidedCalls != nil || !big.DecidersCut || len(big.Deciders) != 20 {
		t.Errorf("the largest quorum: %d deciders, %d calls, cut %v; want the 20 deciders without the calls, cut", len(big.Deciders), len(big.DecidedCalls), big.DecidersCut)
	}
	b, err := json.Marshal(big)
	if err != nil || len(b) > MaxEventDataSize {
		t.Errorf("the event data is %d bytes (%v), over %d", len(b), err, MaxEventDataSize)
	}
}

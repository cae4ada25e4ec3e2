package approval

import (
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// CallProgress is one held call's vote progress when votes decide, as
// approvers are told it (the mail, the page, the CLI).
type CallProgress struct {
	ID   string
	Tool string
	// Needed is how many distinct persons must approve the call,
	// Approvals how many have, StillNeeded how many more it needs (0 once
	// approved or denied) and DeniedBy who denied it ("": nobody).
	Needed      int
	Approvals   int
	StillNeeded int
	DeniedBy    string
}

// Progress returns the vote progress of each held call of r that needs
// approval, in turn order; nil when one decision decides r's turn
// (runs.Run.Voting).
func Progress(r *runs.Run) []CallProgress {
	if !r.Voting() {
		return nil
	}
	tools := map[string]string{}
	for _, c := range r.PendingCalls {
		tools[c.ID] = c.Tool
	}
	var out []CallProgress
	for _, t := range r.Tally() {
		out = append(out, CallProgress{ID: t.CallID, Tool: tools[t.CallID], Needed: t.Needed, Approvals: len(t.ApprovedBy), StillNeeded: t.StillNeeded(), DeniedBy: t.DeniedBy})
	}
	return out
}

// SameNeeds reports whether every call of ps needs as many approvals
// (CallProgress.Needed); true when ps is empty.
func SameNeeds(ps []CallProgress) bool {
	for _, p := range ps {
		if p.Needed != ps[0].Needed {
			return false
		}
	}
	return true
}

// Untouched reports whether every call of ps is open and still needs n
// approvals: then n alone says all there is of their progress, and
// MoreApprovals would only repeat it.
func Untouched(ps []CallProgress, n int) bool {
	for _, p := range ps {
		if p.StillNeeded != n {
			return false
		}
	}
	return true
}

// MoreApprovals says what the calls of ps that are neither approved nor
// denied still need, as a phrase: "2 more approval(s)" (for each held
// call, when more than one) when every call of ps is open and each needs
// as many more; otherwise each open call's own,
// in turn order, by tool ("1 more approval of write_document and 2 more of
// send_mail"; a tool held more than once is named with the call's id).
// It is "" when no call is open. Names are as given: the caller makes
// them safe for where it shows them.
func MoreApprovals(ps []CallProgress) string {
	var open []CallProgress
	held := map[string]int{}
	for _, p := range ps {
		if p.StillNeeded > 0 {
			open = append(open, p)
			held[p.Tool]++
		}
	}
	if len(open) == 0 {
		return ""
	}
	same := len(open) == len(ps)
	for _, p := range open {
		same = same && p.StillNeeded == open[0].StillNeeded
	}
	switch {
	case same && len(open) == 1:
		return fmt.Sprintf("%d more approval(s)", open[0].StillNeeded)
	case same:
		// Each call counts its own: the same number for each is not
		// that many in all (their approvers may differ).
		return fmt.Sprintf("%d more approval(s) for each held call", open[0].StillNeeded)
	}
	parts := make([]string, len(open))
	for i, p := range open {
		name := p.Tool
		if held[p.Tool] > 1 || name == "" {
			name = strings.TrimSpace(p.Tool + " (" + p.ID + ")")
		}
		switch {
		case i > 0:
			parts[i] = fmt.Sprintf("%d more of %s", p.StillNeeded, name)
		case p.StillNeeded == 1:
			parts[i] = "1 more approval of " + name
		default:
			parts[i] = fmt.Sprintf("%d more approvals of %s", p.StillNeeded, name)
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

package runs

import (
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
)

// Requirements returns who may decide each call of calls that needs
// approval in run r: the approvers its policy rule names, or else the
// run's, resolved in dir, with four-eyes when the run or the rule asks for
// it. An approver list that no longer resolves (a group was removed, an
// alias became a service account) is an error.
func Requirements(dir *identity.Directory, r *Run, calls []CallSummary) ([]identity.Requirement, error) {
	var runList *identity.ApproverList
	var reqs []identity.Requirement
	for _, c := range calls {
		if !c.NeedsApproval {
			continue
		}
		list := runList
		fourEyes := r.FourEyes
		if c.Approval != nil {
			fourEyes = fourEyes || c.Approval.FourEyes
		}
		if c.Approval != nil && len(c.Approval.Approvers) > 0 {
			l, err := dir.ResolveApprovers("rule "+c.Rule+" approvers", c.Approval.Approvers)
			if err != nil {
				return nil, err
			}
			list = l
		} else if list == nil {
			l, err := dir.ResolveApprovers("approvers", r.Approvers)
			if err != nil {
				return nil, err
			}
			runList, list = l, l
		}
		reqs = append(reqs, identity.Requirement{Tool: c.Tool, Approvers: list, FourEyes: fourEyes})
	}
	return reqs, nil
}

// VotesNeeded is how many distinct persons must approve the held turn of
// calls: the most any call that needs approval asks for, at least 1.
func VotesNeeded(calls []CallSummary) int {
	n := 1
	for _, c := range calls {
		n = max(n, c.RequiredApprovals())
	}
	return n
}

// MayDecide reports whether decider may decide run r's held calls; nil
// means yes, otherwise the error is an *identity.Refusal (403 to the
// caller, with a message safe to show). It is the one check used by the
// API and the approval links, and it fails closed: a decider or initiator
// that is not a valid principal, a run with no call awaiting approval, or
// an approver list that no longer resolves all refuse.
func MayDecide(dir *identity.Directory, r *Run, decider string) error {
	if r == nil {
		return refuse("the decision cannot be authorized: the run is unknown")
	}
	who, err := identity.Parse(decider)
	if err != nil {
		return refuse("the decision cannot be authorized: the decider is not a valid principal")
	}
	init, err := identity.Parse(r.Initiator)
	if err != nil {
		return refuse("the decision cannot be authorized: the run's initiator is not a valid principal")
	}
	reqs, err := Requirements(dir, r, r.PendingCalls)
	if err != nil {
		return refuse("the decision cannot be authorized: the run's approvers no longer resolve (" + err.Error() + ")")
	}
	return dir.MayDecide(who, init, reqs...)
}

// Eligible returns who may decide every call of calls in run r (the
// recipients of approval links): nil when nobody can, including when the
// initiator is not a valid principal or the approvers no longer resolve.
func Eligible(dir *identity.Directory, r *Run, calls []CallSummary) []identity.Eligible {
	init, err := identity.Parse(r.Initiator)
	if err != nil {
		return nil
	}
	reqs, err := Requirements(dir, r, calls)
	if err != nil || len(reqs) == 0 {
		return nil
	}
	return dir.Eligible(init, reqs...)
}

// MayRead reports whether who may see run r: its initiator's person, one
// of its tool executors, a person its approvers name (directly or through
// a group), or one the approvers of a policy rule name for one of its held
// calls, compared canonically.
func MayRead(dir *identity.Directory, r *Run, who string) bool {
	p, err := identity.Parse(who)
	if err != nil {
		return false
	}
	s := dir.Lookup(p)
	if isToolExecutor(dir, r, s) {
		return true
	}
	lists := [][]string{r.Approvers}
	for _, c := range r.PendingCalls {
		if c.Approval != nil && len(c.Approval.Approvers) > 0 {
			lists = append(lists, c.Approval.Approvers)
		}
	}
	for _, entries := range lists {
		list, err := dir.ResolveApprovers("approvers", entries)
		if err != nil {
			continue
		}
		for _, e := range dir.Eligible(identity.Principal{}, identity.Requirement{Approvers: list}) {
			if e.Subject.Same(s) {
				return true
			}
		}
	}
	return false
}

func refuse(msg string) error {
	return &identity.Refusal{Reason: identity.ReasonInvalid, Message: msg}
}

// InboxApprovers returns the approver entries of r whose inbox lists its
// suspensions: every group entry, and every principal entry except, under
// four-eyes, the initiator's person (by any alias).
func InboxApprovers(dir *identity.Directory, r *Run) []string {
	out := []string{}
	init, initErr := identity.Parse(r.Initiator)
	for _, a := range r.Approvers {
		if identity.IsGroupEntry(a) {
			out = append(out, a)
			continue
		}
		p, err := identity.Parse(a)
		if err != nil {
			continue
		}
		if r.FourEyes && (initErr != nil || dir.Lookup(p).Same(dir.Lookup(init))) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// VoteTally says, for approvers, who approved the current suspension so
// far and who else may still vote (everyone who may decide it and has not
// voted), when it needs more than one approval; both nil otherwise.
func VoteTally(dir *identity.Directory, r *Run) (voted, still []string) {
	if r.VotesNeeded <= 1 {
		return nil, nil
	}
	done := map[string]bool{}
	for _, v := range r.Votes {
		done[v.Person] = true
		if v.Action == loop.ActionApprove {
			voted = append(voted, v.By)
		}
	}
	for _, e := range Eligible(dir, r, r.PendingCalls) {
		if !done[e.Subject.Key()] {
			still = append(still, e.Subject.String())
		}
	}
	return voted, still
}

package runs

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/identity"
)

// Requirements returns who may decide each call of calls that needs
// approval in run r: the approvers its policy rule names, or else the
// run's, resolved in dir, with four-eyes when the run or the rule asks for
// it. An approver list that no longer resolves (a group was removed, an
// alias became a service account) is an error; entries that became one
// person since the list was checked are that person once
// (identity.Directory.ResolveStoredApprovers).
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
			l, err := dir.ResolveStoredApprovers("rule "+c.Rule+" approvers", c.Approval.Approvers)
			if err != nil {
				return nil, err
			}
			list = l
		} else if list == nil {
			l, err := dir.ResolveStoredApprovers("approvers", r.Approvers)
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
// caller, with a message safe to show). One decision decides every held
// call, so the decider must be able to decide each of them; when votes
// decide r's turn (r.Voting: a quorum, or calls no one person may decide
// together) a vote is per call, and a decider who may decide at least one
// held call may vote (on those: VoteChoices); one who may decide none is
// refused for what keeps them from a call they are named on (four-eyes,
// the tool gate) before "not an approver". It is the one check used by
// the API and the approval links, and it fails closed: a decider or
// initiator that is not a valid principal, a run with no call awaiting
// approval, or an approver list that no longer resolves all refuse.
func MayDecide(dir *identity.Directory, r *Run, decider string) error {
	if r != nil && r.Voting() {
		ids, refused := DecidableCalls(dir, r, decider)
		if len(ids) > 0 {
			return nil
		}
		// The refusal of a call the decider is named on (four-eyes, the
		// tool gate) says more than "not an approver" of another.
		var first error
		for _, c := range r.PendingCalls {
			err := refused[c.ID]
			var ref *identity.Refusal
			if err != nil && errors.As(err, &ref) && ref.Reason != identity.ReasonNotApprover {
				return err
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		return refuse("the decision cannot be authorized: the run has no call awaiting approval")
	}
	return mayDecideAll(dir, r, decider)
}

// mayDecideAll is MayDecide for one decision on every held call.
func mayDecideAll(dir *identity.Directory, r *Run, decider string) error {
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
	if err := dir.MayDecide(who, init, reqs...); err != nil {
		return err
	}
	if s := dir.Lookup(who); fourEyesIn(reqs) && r.initiatorCovers(dir, s) {
		// The directory in force links the decider to the initiator as
		// they were at the start: an alias moved or dropped since.
		return &identity.Refusal{Reason: identity.ReasonFourEyes, Message: fmt.Sprintf("four-eyes: %s is linked by the directory to %s, who started this run, and cannot decide it; another person must", s, r.Initiator)}
	}
	return nil
}

// fourEyesIn reports whether any of reqs is under four-eyes.
func fourEyesIn(reqs []identity.Requirement) bool {
	return slices.ContainsFunc(reqs, func(q identity.Requirement) bool { return q.FourEyes })
}

// eligible is dir.Eligible for reqs of run r, without anyone four-eyes
// keeps out under the directory in force (Run.initiatorCovers).
func eligible(dir *identity.Directory, r *Run, init identity.Principal, reqs []identity.Requirement) []identity.Eligible {
	out := dir.Eligible(init, reqs...)
	if fourEyesIn(reqs) {
		out = slices.DeleteFunc(out, func(e identity.Eligible) bool { return r.initiatorCovers(dir, e.Subject) })
	}
	return out
}

// Deciders returns who is asked about the held calls of calls in run r
// (approval links, inbox entries): when one decision decides them, those
// who may decide every call (Eligible); when votes decide them
// (HoldsVotes), a vote is per call, and everyone who may decide at least
// one of them, each once, taking the calls in turn order round robin.
func Deciders(dir *identity.Directory, r *Run, calls []CallSummary) []identity.Eligible {
	if !HoldsVotes(dir, r, calls) {
		return Eligible(dir, r, calls)
	}
	return decidersPerCall(dir, r, calls)
}

// HoldsVotes reports whether a turn held with calls in run r is decided
// by votes, call by call (Run.Voting; Suspension.PerCallVotes when each
// call needs one approval): when a call needs more than one approval (a
// quorum), or when more than one call needs approval and no one person
// may decide them all (their approvers, the tool gate and four-eyes leave
// nobody in common), so that each is decided by its own approvers instead
// of the turn waiting for a decision nobody may make. Otherwise one
// decision, by a person who may decide every call, decides the turn (and
// may edit a call). Who may decide each call is the same either way.
func HoldsVotes(dir *identity.Directory, r *Run, calls []CallSummary) bool {
	if VotesNeeded(calls) > 1 {
		return true
	}
	return split(calls) && len(Eligible(dir, r, calls)) == 0
}

// split reports whether more than one of calls needs approval.
func split(calls []CallSummary) bool {
	n := 0
	for _, c := range calls {
		if c.NeedsApproval {
			n++
		}
	}
	return n > 1
}

// decidersPerCall returns everyone who may decide one of calls, each
// once, round robin over the calls (each call's first decider, then each
// call's second, ...), so that a list cut short (a suspension lists at
// most MaxApprovers) still reaches the deciders of every call, not only
// the many of the first.
func decidersPerCall(dir *identity.Directory, r *Run, calls []CallSummary) []identity.Eligible {
	var per [][]identity.Eligible
	for _, c := range calls {
		if c.NeedsApproval {
			per = append(per, Eligible(dir, r, []CallSummary{c}))
		}
	}
	var out []identity.Eligible
	seen := map[string]bool{}
	for i, more := 0, true; more; i++ {
		more = false
		for _, list := range per {
			if i >= len(list) {
				continue
			}
			more = true
			if k := list[i].Subject.Key(); !seen[k] {
				seen[k] = true
				out = append(out, list[i])
			}
		}
	}
	return out
}

// Eligible returns who may decide every call of calls in run r (the
// recipients of approval links when one decision decides them): nil when
// nobody can, including when the initiator is not a valid principal or
// the approvers no longer resolve.
func Eligible(dir *identity.Directory, r *Run, calls []CallSummary) []identity.Eligible {
	init, err := identity.Parse(r.Initiator)
	if err != nil {
		return nil
	}
	reqs, err := Requirements(dir, r, calls)
	if err != nil || len(reqs) == 0 {
		return nil
	}
	return eligible(dir, r, init, reqs)
}

// MayRead reports whether who may see run r: its initiator's person, one
// of its tool executors, a person its approvers name (directly or through
// a group), or one the approvers of a policy rule name for a call of any
// turn it held, now or before (Run.RuleApprovers; the held calls for rows
// written before that was kept), compared canonically.
func MayRead(dir *identity.Directory, r *Run, who string) bool {
	return mayAccess(dir, r, who, true)
}

// MayCancel reports whether who may cancel run r: as MayRead, but of the
// policy rules' approvers only those of the turn it holds now (a person
// asked about an earlier turn keeps reading the run, not stopping it).
func MayCancel(dir *identity.Directory, r *Run, who string) bool {
	return mayAccess(dir, r, who, false)
}

func mayAccess(dir *identity.Directory, r *Run, who string, past bool) bool {
	p, err := identity.Parse(who)
	if err != nil {
		return false
	}
	s := dir.Lookup(p)
	if isToolExecutor(dir, r, s) {
		return true
	}
	entries := slices.Clone(r.Approvers)
	if past {
		entries = append(entries, r.RuleApprovers...)
	}
	for _, c := range r.PendingCalls {
		if c.Approval != nil {
			entries = append(entries, c.Approval.Approvers...)
		}
	}
	// Each entry on its own: entries of different rules may name one
	// person by two aliases, be more than a list may hold, or name a
	// group the directory has lost since, none of which may cost the
	// others their access.
	for _, entry := range entries {
		list, err := dir.ResolveApprovers("approvers", []string{entry})
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

// RuleApprovers returns prev with the approver entries of calls' policy
// rules that it lacks appended, in order.
func RuleApprovers(prev []string, calls []CallSummary) []string {
	out := slices.Clone(prev)
	for _, c := range calls {
		if c.Approval == nil {
			continue
		}
		for _, a := range c.Approval.Approvers {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
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
		if r.FourEyes && (initErr != nil || dir.Lookup(p).Same(dir.Lookup(init)) || r.initiatorCovers(dir, dir.Lookup(p))) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// VoteTally says, for approvers, who approved the current suspension so
// far (Vote.Name: persons) and who else may still vote (everyone who may decide an open call
// and has not voted), when votes decide it (Run.Voting); both nil
// otherwise.
func VoteTally(dir *identity.Directory, r *Run) (voted, still []string) {
	if !r.Voting() {
		return nil, nil
	}
	done := VotedKeys(dir, r)
	for _, v := range r.Votes {
		for _, ch := range v.CallChoices(r.PendingCalls) {
			if r.approves(ch) {
				voted = append(voted, v.Name()) // approved at least one call (an edit approves it edited)
				break
			}
		}
	}
	for _, e := range OpenDeciders(dir, r) {
		if !done[e.Subject.Key()] {
			still = append(still, e.Subject.String())
		}
	}
	return voted, still
}

// maxNamedDeciders bounds how many eligible deciders an unmeetable
// approval's denial names.
const maxNamedDeciders = 10

// UnmeetableApprovals returns, keyed by call id, the denial of each call of
// calls (a planned turn of run r) whose approval can never be given: fewer
// distinct persons may decide it (its approvers, the tool gate, four-eyes
// leaving out the initiator) than the approvals it needs. Such a turn
// would otherwise wait in WAITING_FOR_APPROVAL until its deadline with
// nobody able to complete the vote. Each call is checked on its own, against
// the persons who may decide it: a vote is per call, so a turn whose calls
// have different approvers waits for each call's own. A call whose
// approvers no longer resolve, or a run whose initiator is not a valid
// principal, has nobody who may decide. Calls that need no approval are
// never in the result. Nil means every held call can be approved.
func UnmeetableApprovals(dir *identity.Directory, r *Run, calls []CallSummary) map[string]string {
	var out map[string]string
	for _, c := range calls {
		if !c.NeedsApproval {
			continue
		}
		if msg, _ := approvalShortfall(dir, r, c, c.RequiredApprovals(), 0, nil); msg != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[c.ID] = fmt.Sprintf("approval cannot be given: %s; no one was asked and the call was not run", msg)
		}
	}
	return out
}

// CheckOpenApprovals checks, against dir (the directory in force now),
// that each held call of waiting run r that is neither approved nor denied
// yet can still get the approvals it still needs: the rule the planned
// turn was checked by (UnmeetableApprovals), on the terms the call was
// held with, less the approvals it has and the persons who have voted on
// the suspension (a person votes once). Lost holds, by call id, why a
// call's approval can no longer be given, when that is certain: fewer
// persons who have not voted may decide it (its approvers as dir resolves
// them, the tool gate, four-eyes) than it still needs, or its approvers
// name a group dir does not have. Unsure holds the calls whose check could
// not be made (an initiator or an approver entry this build cannot read):
// never a reason to end a run. Both are nil for a run that does not wait
// and for a nil dir (no directory: nobody can tell a group removed from
// one never configured).
func CheckOpenApprovals(dir *identity.Directory, r *Run) (lost, unsure map[string]string) {
	if dir == nil || r == nil || r.Status != StatusWaiting {
		return nil, nil
	}
	voted := VotedKeys(dir, r)
	byID := map[string]CallSummary{}
	for _, c := range r.PendingCalls {
		byID[c.ID] = c
	}
	for _, t := range r.TallyIn(dir) {
		c, ok := byID[t.CallID]
		if !ok || t.Decided() {
			continue
		}
		msg, certain := approvalShortfall(dir, r, c, t.Needed, len(t.ApprovedBy), voted)
		switch {
		case msg == "":
		case certain:
			if lost == nil {
				lost = map[string]string{}
			}
			lost[c.ID] = "approval can no longer be given: " + msg
		default:
			if unsure == nil {
				unsure = map[string]string{}
			}
			unsure[c.ID] = msg
		}
	}
	return lost, unsure
}

// approvalShortfall says why held call c of run r cannot get the need
// approvals it asks for, having have of them already from persons among
// voted (the persons, Subject.Key, who voted on the suspension; none may
// vote again): "" when enough persons who have not voted may decide it.
// certain is false when the shortfall comes from something this build
// cannot read (the initiator, an approver entry) rather than from what the
// directory says.
func approvalShortfall(dir *identity.Directory, r *Run, c CallSummary, need, have int, voted map[string]bool) (msg string, certain bool) {
	fourEyes := r.FourEyes || c.Approval != nil && c.Approval.FourEyes
	what := fmt.Sprintf("the call needs %s from distinct persons", approvals(need))
	if c.Rule != "" {
		what = fmt.Sprintf("rule %s needs %s from distinct persons", strconv.Quote(c.Rule), approvals(need))
	}
	if have > 0 {
		what += fmt.Sprintf(" and has %d", have)
	}
	init, err := identity.Parse(r.Initiator)
	if err != nil {
		return what + ", and nobody may decide: the run's initiator is not a valid principal", false
	}
	reqs, err := Requirements(dir, r, []CallSummary{c})
	if err != nil {
		return what + ", and nobody may decide: its approvers no longer resolve (" + err.Error() + ")", errors.Is(err, identity.ErrNoSuchGroup)
	}
	var left []identity.Eligible
	for _, e := range eligible(dir, r, init, reqs) {
		if !voted[e.Subject.Key()] {
			left = append(left, e)
		}
	}
	if len(left) >= need-have {
		return "", false
	}
	names := make([]string, 0, min(len(left), maxNamedDeciders))
	for _, e := range left[:min(len(left), maxNamedDeciders)] {
		names = append(names, deciderName(e.Subject))
	}
	persons, person, nobody := "persons", "person", "nobody may decide"
	if len(voted) > 0 {
		persons, person, nobody = "persons who have not voted", "person who has not voted", "nobody who has not voted may decide"
	}
	who := nobody
	switch {
	case len(left) == 1:
		who = fmt.Sprintf("only 1 %s may decide: %s", person, names[0])
	case len(left) > 1:
		who = fmt.Sprintf("only %d %s may decide: %s", len(left), persons, strings.Join(names, ", "))
		if len(left) > len(names) {
			who += ", …"
		}
	}
	if fourEyes {
		who += fmt.Sprintf(" (four-eyes: %s started the run and never decides it)", deciderName(dir.Lookup(init)))
	}
	return what + ", but " + who, true
}

// deciderName names a subject in a denial: a directory person by id,
// anyone else by canonical principal.
func deciderName(s identity.Subject) string {
	if s.Person != nil {
		return s.Person.ID
	}
	return s.Principal.String()
}

func approvals(n int) string {
	if n == 1 {
		return "1 approval"
	}
	return fmt.Sprintf("%d approvals", n)
}

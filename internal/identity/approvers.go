package identity

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidApprovers marks the errors of RunApprovers and RunToolExecutors:
// an approver (or tool executor) list a run names that does not resolve.
// The rest of the
// message names the entry and is written for the API caller (422); the
// handler maps the mark to the API's error (as runs.FromLoop does for the
// loop's validators), anything unmarked stays internal.
var ErrInvalidApprovers = errors.New("invalid approvers")

// ErrNoSuchGroup marks the error of an approver list that names a group
// the directory does not have (test with errors.Is): a fact about the
// directory, unlike an entry this build cannot read.
var ErrNoSuchGroup = errors.New("no such group in the directory")

// MaxApproverEntries bounds an approver list (runs and rules).
const MaxApproverEntries = 20

// ApproverList is a resolved list of approver entries: principals and
// "group:<name>" groups. Build it with RunApprovers or ResolveApprovers.
type ApproverList struct {
	entries []approverEntry
}

type approverEntry struct {
	text    string
	group   *Group  // set for group entries
	subject Subject // set for principal entries
}

// Entries returns the entries as written.
func (l *ApproverList) Entries() []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.text
	}
	return out
}

// Len returns the number of entries.
func (l *ApproverList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.entries)
}

// RunApprovers resolves the approvers a run names. On a deployment whose
// directory sets group_approvers_only, every entry must be a group. The
// error names the entry (approvers[1] "x": ...) and is meant for the API
// caller (422).
func (d *Directory) RunApprovers(entries []string) (*ApproverList, error) {
	return markInvalid(d.resolve("approvers", entries, resolveRules{groupsOnly: d.GroupApproversOnly()}))
}

// RunToolExecutors checks the tool executors a run names as RunApprovers
// checks its approvers (each group exists, each principal parses and is no
// role session, and no group or person is named twice, a person by any of
// their aliases), except that a service account is accepted (a service may
// submit results; it never decides) and group_approvers_only does not
// apply (an executor is no check on the initiator, who may submit the
// results anyway). The error is marked as RunApprovers' is.
func (d *Directory) RunToolExecutors(entries []string) error {
	_, err := markInvalid(d.resolve("tool_executors", entries, resolveRules{serviceAccounts: true}))
	return err
}

// ResolveApprovers resolves an approver list without the group-only rule:
// for the lists of deployment policy rules (the deployment chose them) and
// for a stored run's list at decision time (group_approvers_only governs
// what a new run may name; turning it on does not strand waiting runs).
// field names the list in errors. A list that no longer resolves (a group
// was removed, an alias became a service account) is an error, and callers
// refuse the decision.
func (d *Directory) ResolveApprovers(field string, entries []string) (*ApproverList, error) {
	return d.resolve(field, entries, resolveRules{})
}

// ResolveStoredApprovers resolves the approver list a waiting run stored
// (its own, or a held call's rule's) against the directory in force, as
// ResolveApprovers does, except that entries that have become one person
// since the list was checked (a directory that added an entry for two of
// its principals) are that person once: the list names the same persons,
// and persons are what decisions count. A group listed twice, or an entry
// that no longer resolves, is still an error.
func (d *Directory) ResolveStoredApprovers(field string, entries []string) (*ApproverList, error) {
	return d.resolve(field, entries, resolveRules{mergeSamePerson: true})
}

// markInvalid wraps resolve's error in ErrInvalidApprovers.
func markInvalid(l *ApproverList, err error) (*ApproverList, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidApprovers, err)
	}
	return l, nil
}

// resolveRules are what a list may hold beyond principals who may decide
// and existing groups.
type resolveRules struct {
	// groupsOnly refuses every entry but groups (group_approvers_only).
	groupsOnly bool
	// serviceAccounts accepts service accounts (tool executors).
	serviceAccounts bool
	// mergeSamePerson keeps the first of entries that are one person
	// instead of refusing the list (ResolveStoredApprovers).
	mergeSamePerson bool
}

func (d *Directory) resolve(field string, entries []string, rules resolveRules) (*ApproverList, error) {
	if len(entries) > MaxApproverEntries {
		return nil, fmt.Errorf("%s: %d entries, at most %d allowed", field, len(entries), MaxApproverEntries)
	}
	l := &ApproverList{}
	seen := map[string]int{}
	for i, text := range entries {
		where := fmt.Sprintf("%s[%d] %q", field, i, text)
		var e approverEntry
		if name, ok := strings.CutPrefix(text, GroupPrefix); ok {
			g, found := d.Group(name)
			if !found {
				return nil, fmt.Errorf("%s: %w", where, ErrNoSuchGroup)
			}
			e = approverEntry{text: text, group: g}
			if j, dup := seen["group:"+name]; dup {
				return nil, fmt.Errorf("%s: listed twice (also %s[%d])", where, field, j)
			}
			seen["group:"+name] = i
		} else {
			if rules.groupsOnly {
				return nil, fmt.Errorf("%s: this deployment requires approvers to be groups (group:<name>), so an initiator cannot choose their own approver", where)
			}
			p, err := Parse(text)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if p.IsSession() {
				return nil, fmt.Errorf("%s: every session of a role is the same principal; name the role ARN instead", where)
			}
			s := d.Lookup(p)
			if s.IsServiceAccount() && !rules.serviceAccounts {
				return nil, fmt.Errorf("%s: is service account %q; service accounts never decide", where, s.Service.ID)
			}
			e = approverEntry{text: p.String(), subject: s}
			if j, dup := seen[s.Key()]; dup {
				if rules.mergeSamePerson {
					continue
				}
				return nil, fmt.Errorf("%s: the same person as %s[%d]", where, field, j)
			}
			seen[s.Key()] = i
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

// Requirement is who may decide one pending call: its tool, its approvers
// (the matched rule's or the run's) and whether four-eyes applies.
type Requirement struct {
	Tool      string
	Approvers *ApproverList
	FourEyes  bool
}

// Reason says why a decision was refused.
type Reason string

// The reasons MayDecide refuses.
const (
	ReasonInvalid        Reason = "invalid"         // no decider, initiator, requirement or tool: fail closed
	ReasonServiceAccount Reason = "service_account" // service accounts never decide
	ReasonNotApprover    Reason = "not_approver"    // not named, directly or through a group
	ReasonToolGate       Reason = "tool_gate"       // an approver, but not for this tool
	ReasonFourEyes       Reason = "four_eyes"       // the initiator's person, by some alias
)

// ReasonNotToolExecutor is why a submission of client-tool results is
// refused (runs.MaySubmitResults): the submitter is neither the run's
// initiator nor one of its tool executors. Only logs carry it; no stored
// event does.
const ReasonNotToolExecutor Reason = "not_tool_executor"

// Refusal is the error MayDecide returns; it maps to 403. Message is safe
// to show to the decider.
type Refusal struct {
	Reason  Reason
	Tool    string
	Message string
}

// Error implements error.
func (r *Refusal) Error() string { return r.Message }

// MayDecide reports whether decider may decide every call described by reqs
// of a run started by initiator; nil means yes. It fails closed: a zero
// principal, no requirement, an empty tool or a nil approver list refuse.
// The refusal is the first call's that refuses: a decider its approvers do
// not name is ReasonNotApprover, one the tool gate stops ReasonToolGate,
// and only the initiator who would otherwise be eligible ReasonFourEyes.
func (d *Directory) MayDecide(decider, initiator Principal, reqs ...Requirement) error {
	if decider.IsZero() || initiator.IsZero() || len(reqs) == 0 {
		return &Refusal{Reason: ReasonInvalid, Message: "the decision cannot be authorized: the decider, the initiator or the calls are unknown"}
	}
	who := d.Lookup(decider)
	if who.IsServiceAccount() {
		return &Refusal{Reason: ReasonServiceAccount, Message: fmt.Sprintf("%s is a service account; service accounts never decide", who)}
	}
	init := d.Lookup(initiator)
	for _, r := range reqs {
		if r.Tool == "" || r.Approvers == nil {
			return &Refusal{Reason: ReasonInvalid, Message: "the decision cannot be authorized: a call has no tool or no approvers"}
		}
		named, permitted := r.Approvers.covers(who, r.Tool)
		switch {
		case !named:
			return &Refusal{Reason: ReasonNotApprover, Tool: r.Tool, Message: fmt.Sprintf("%s is not an approver of this call of %s", who, r.Tool)}
		case !permitted:
			return &Refusal{Reason: ReasonToolGate, Tool: r.Tool, Message: fmt.Sprintf("%s may not approve calls of %s (the directory limits their approvals to other tools)", who, r.Tool)}
		case r.FourEyes && who.Same(init):
			// Four-eyes only where the initiator would otherwise be
			// eligible: one who is no approver is told that instead.
			return &Refusal{Reason: ReasonFourEyes, Tool: r.Tool, Message: fmt.Sprintf("four-eyes: %s started this run and cannot decide it; another person must", who)}
		}
	}
	return nil
}

// covers reports whether the list names the subject (directly or through a
// group) and whether one of those entries lets it approve the tool.
func (l *ApproverList) covers(s Subject, tool string) (named, permitted bool) {
	if s.Key() == "" || s.IsServiceAccount() {
		return false, false
	}
	for _, e := range l.entries {
		switch {
		case e.group != nil:
			if s.Person == nil || !e.group.Has(s.Person) {
				continue
			}
			named = true
			if e.group.permits(tool) && s.Person.mayApprove(tool) {
				return true, true
			}
		case e.subject.Same(s):
			named = true
			if s.Person == nil || s.Person.mayApprove(tool) {
				return true, true
			}
		}
	}
	return named, false
}

// Eligible is one subject that may decide a set of calls.
type Eligible struct {
	Subject Subject
	// Mailbox is where approval mail goes ("" when the subject decides
	// through the API only).
	Mailbox string
}

// Eligible returns the distinct persons (or bare principals) who may decide
// every call of reqs, in the order the lists name them: the recipients of
// approval links, and the pool a quorum is drawn from. A requirement with
// an empty Tool skips the tool gate (for counting before any call exists).
func (d *Directory) Eligible(initiator Principal, reqs ...Requirement) []Eligible {
	if len(reqs) == 0 {
		return nil
	}
	init := d.Lookup(initiator)
	seen := map[string]bool{}
	var out []Eligible
	consider := func(s Subject) {
		k := s.Key()
		if k == "" || seen[k] || s.IsServiceAccount() {
			return
		}
		seen[k] = true
		for _, r := range reqs {
			if r.Approvers == nil || r.FourEyes && (initiator.IsZero() || s.Same(init)) {
				return
			}
			named, permitted := r.Approvers.covers(s, r.Tool)
			if !named || r.Tool != "" && !permitted {
				return
			}
		}
		e := Eligible{Subject: s}
		if s.Person != nil {
			e.Mailbox, _ = s.Person.Mailbox()
		} else {
			e.Mailbox, _ = s.Principal.Mailbox()
		}
		out = append(out, e)
	}
	for _, r := range reqs {
		if r.Approvers == nil {
			continue
		}
		for _, e := range r.Approvers.entries {
			if e.group != nil {
				for _, m := range e.group.Members {
					consider(personSubject(m))
				}
				continue
			}
			consider(e.subject)
		}
	}
	return out
}

// personSubject names a person by their first alias.
func personSubject(p *Person) Subject {
	s := Subject{Person: p}
	if len(p.Aliases) > 0 {
		s.Principal = p.Aliases[0]
	}
	return s
}

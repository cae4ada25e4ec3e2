package runs

import (
	"strings"

	"github.com/agentgate/agentgate/internal/identity"
)

// MaySubmitResults reports whether who may submit the results of run r's
// handed-over client calls: its initiator's person, a principal the run
// names in ToolExecutors (service accounts included: executing a caller's
// tools is what they are for), compared canonically through dir, or a
// person who is, in dir as it is now, a member of a group the run names
// there ("group:<name>"; membership is read at submission, as an
// approver's is when they decide). On success it returns the
// ToolExecutors entry that lets who submit, "" for the initiator. Otherwise
// the error is an *identity.Refusal with a message safe to show (403). It
// fails closed: a submitter that is not a valid principal is refused, and
// an initiator or executor entry that cannot be read, or a group the
// directory no longer has, grants nothing.
func MaySubmitResults(dir *identity.Directory, r *Run, who string) (string, error) {
	if r == nil {
		return "", refuse("the tool results cannot be authorized: the run is unknown")
	}
	p, err := identity.Parse(who)
	if err != nil {
		return "", refuse("the tool results cannot be authorized: the submitter is not a valid principal")
	}
	s := dir.Lookup(p)
	if isInitiator(dir, r, s) {
		return "", nil
	}
	if entry, ok := executorEntry(dir, r, s); ok {
		return entry, nil
	}
	// One message whatever the run names: a refused caller learns nothing
	// of its executors (whether it names groups, say).
	msg := who + " is neither the initiator nor a tool executor of run " + r.ID + ", nor now a member of a group it names as tool executors"
	return "", &identity.Refusal{Reason: identity.ReasonNotToolExecutor, Message: msg}
}

// isToolExecutor reports whether s is r's initiator or one of its tool
// executors (directly or as a member of a group r names).
func isToolExecutor(dir *identity.Directory, r *Run, s identity.Subject) bool {
	if isInitiator(dir, r, s) {
		return true
	}
	_, ok := executorEntry(dir, r, s)
	return ok
}

// isInitiator reports whether s is r's initiator's person: the person of
// the principal r was started as, or the person the directory says was
// renamed from the one r was started by (former_ids: the renamed person
// keeps reading, cancelling and answering for their runs). A person who
// merely holds the id r's initiator had is not taken for them here: this
// grants access, where four-eyes (Run.initiatorCovers) takes the safe
// side the other way.
func isInitiator(dir *identity.Directory, r *Run, s identity.Subject) bool {
	if init, err := identity.Parse(r.Initiator); err == nil && s.Same(dir.Lookup(init)) {
		return true
	}
	p, ok := dir.RenamedFrom(r.InitiatorPerson)
	return ok && s.Person != nil && s.Person.ID == p.ID
}

// executorEntry returns the first of r's ToolExecutors entries that names
// s: a principal that is s (canonically, through dir), or a group of dir
// that has s's person as a member now.
func executorEntry(dir *identity.Directory, r *Run, s identity.Subject) (string, bool) {
	for _, e := range r.ToolExecutors {
		if name, ok := strings.CutPrefix(e, identity.GroupPrefix); ok {
			// Groups hold persons only: a bare principal or a service
			// account is never a member.
			if g, found := dir.Group(name); found && s.Person != nil && g.Has(s.Person) {
				return e, true
			}
			continue
		}
		if p, err := identity.Parse(e); err == nil && s.Same(dir.Lookup(p)) {
			return e, true
		}
	}
	return "", false
}

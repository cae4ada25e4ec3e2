package runs

import (
	"github.com/agentgate/agentgate/internal/identity"
)

// MaySubmitResults reports whether who may submit the results of run r's
// handed-over client calls: its initiator's person or a principal the run
// names in ToolExecutors (service accounts included: executing a caller's
// tools is what they are for), compared canonically through dir. nil means
// yes; otherwise the error is an *identity.Refusal with a message safe to
// show (403). It fails closed: a submitter that is not a valid principal
// is refused, and an initiator or executor entry that cannot be read
// grants nothing.
func MaySubmitResults(dir *identity.Directory, r *Run, who string) error {
	if r == nil {
		return refuse("the tool results cannot be authorized: the run is unknown")
	}
	p, err := identity.Parse(who)
	if err != nil {
		return refuse("the tool results cannot be authorized: the submitter is not a valid principal")
	}
	if isToolExecutor(dir, r, dir.Lookup(p)) {
		return nil
	}
	return &identity.Refusal{Reason: identity.ReasonNotApprover, Message: who + " is neither the initiator nor a tool executor of run " + r.ID}
}

// isToolExecutor reports whether s is r's initiator or one of its tool
// executors.
func isToolExecutor(dir *identity.Directory, r *Run, s identity.Subject) bool {
	if init, err := identity.Parse(r.Initiator); err == nil && s.Same(dir.Lookup(init)) {
		return true
	}
	for _, e := range r.ToolExecutors {
		if identity.IsGroupEntry(e) {
			continue // refused when the run is created; never a grant
		}
		if p, err := identity.Parse(e); err == nil && s.Same(dir.Lookup(p)) {
			return true
		}
	}
	return false
}

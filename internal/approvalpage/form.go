package approvalpage

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// The fields of the confirmation form.
const (
	// FieldDigest carries the turn digest the page was rendered for.
	FieldDigest = "digest"
	// FieldAction is the pressed button: ActionApprove, ActionDeny or
	// ActionPerCall.
	FieldAction = "action"
	// FieldMessage is the optional reason given with a whole-turn denial.
	FieldMessage = "message"
	// CallFieldPrefix + call id is a per-call choice, "approve" or "deny".
	CallFieldPrefix = "call."
	// ReasonFieldPrefix + call id is the optional reason for denying that call.
	ReasonFieldPrefix = "reason."
)

// The values of FieldAction.
const (
	ActionApprove = string(loop.ActionApprove)
	ActionDeny    = string(loop.ActionDeny)
	ActionPerCall = "per_call"
)

// MaxReasonLength is the most characters a denial reason may have.
const MaxReasonLength = 2000

// ParseDecision turns the posted confirmation form into a decision on the
// turn whose pending calls are pending. The digest is taken from the form
// unchecked (the caller's conditional transition compares it with the
// suspension's); approve and deny decide the whole turn, per_call gives one
// CallDecision per call that needs approval, and one per call that needs
// none but was marked approve (as the API takes a per-call approve of it).
//
// Edits are not possible through the page: changing a call's arguments
// needs an authenticated caller and schema validation, so edits go through
// POST /runs/{id}/decision only (where one decision decides the turn, and
// where each held call needs one approval from its own approvers), and
// "edit" is refused here.
//
// Every error is a *runs.Error whose message can be shown to the approver:
// runs.EBadRequest for an unknown or repeated field, runs.EInvalid for a
// missing field, a malformed
// digest, a bad action, an unknown call id, or a reason over
// MaxReasonLength characters.
func ParseDecision(form url.Values, pending []runs.CallSummary) (loop.Decision, error) {
	return parseForm(form, pending, nil, false)
}

// ParseVote is ParseDecision for a vote of a turn that needs more than one
// approval, by a voter who may decide the held calls mine (runs.
// DecidableCalls): per_call gives one CallDecision per call of mine, and a
// choice or a reason posted for another held call is refused
// (runs.EForbidden, naming it), as the API refuses it. Approve and deny
// are whole-turn votes, on the calls of mine. Quorum says the turn needs
// approvals from more than one person (runs.Run.MostApprovalsNeeded above
// one), where the API refuses edits too, and the refusal of an edit says so.
func ParseVote(form url.Values, pending []runs.CallSummary, mine []string, quorum bool) (loop.Decision, error) {
	set := make(map[string]bool, len(mine))
	for _, id := range mine {
		set[id] = true
	}
	return parseForm(form, pending, set, quorum)
}

// parseForm parses the form; mine, when not nil, are the held calls the
// voter may decide; quorum, that the turn needs approvals from more than
// one person.
func parseForm(form url.Values, pending []runs.CallSummary, mine map[string]bool, quorum bool) (loop.Decision, error) {
	byID := make(map[string]runs.CallSummary, len(pending))
	for _, c := range pending {
		byID[c.ID] = c
	}
	notMine := func(c runs.CallSummary) bool { return mine != nil && c.NeedsApproval && !mine[c.ID] }

	// Check every field first, in a fixed order, so the same form always
	// gets the same error.
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(form[k]) > 1 {
			return loop.Decision{}, malformed("field %.80q was sent more than once", k)
		}
		v := form[k][0]
		switch {
		case k == FieldDigest || k == FieldAction:
		case k == FieldMessage:
			if _, err := reason(v, "the reason"); err != nil {
				return loop.Decision{}, err
			}
		case strings.HasPrefix(k, CallFieldPrefix):
			id := strings.TrimPrefix(k, CallFieldPrefix)
			c, ok := byID[id]
			if !ok {
				return loop.Decision{}, invalid("unknown call id %.80q", id)
			}
			if notMine(c) {
				return loop.Decision{}, runs.Errorf(runs.EForbidden, "call %.80q (%.80s) is not yours to decide: other approvers vote on it", id, c.Tool)
			}
			switch v {
			case ActionApprove, ActionDeny:
			case string(loop.ActionEdit):
				return loop.Decision{}, invalid("call %.80q: %s", id, noEdits(quorum))
			default:
				return loop.Decision{}, invalid("call %.80q: choose approve or deny, not %.40q", id, v)
			}
			if err := decidable(c, loop.Action(v)); err != nil {
				return loop.Decision{}, err
			}
		case strings.HasPrefix(k, ReasonFieldPrefix):
			// A call's reason goes with denying it.
			id := strings.TrimPrefix(k, ReasonFieldPrefix)
			c, ok := byID[id]
			if !ok {
				return loop.Decision{}, invalid("unknown call id %.80q", id)
			}
			if notMine(c) {
				return loop.Decision{}, runs.Errorf(runs.EForbidden, "call %.80q (%.80s) is not yours to decide: other approvers vote on it", id, c.Tool)
			}
			if err := decidable(c, loop.ActionDeny); err != nil {
				return loop.Decision{}, err
			}
			if _, err := reason(v, fmt.Sprintf("the reason for call %.80q", id)); err != nil {
				return loop.Decision{}, err
			}
		default:
			return loop.Decision{}, malformed("unknown field %.80q", k)
		}
	}

	digest := form.Get(FieldDigest)
	if digest == "" {
		return loop.Decision{}, invalid("the form has no turn digest")
	}
	if !isDigest(digest) {
		return loop.Decision{}, invalid("the turn digest is malformed")
	}
	d := loop.Decision{TurnDigest: digest}

	action := form.Get(FieldAction)
	if action == ActionApprove || action == ActionDeny {
		// A call marked otherwise than the whole turn's button (the form's
		// radio buttons do not stop Approve all or Deny all): which one
		// the approver meant is not for us to guess.
		for _, c := range pending {
			if choice := form.Get(CallFieldPrefix + c.ID); choice != "" && choice != action {
				return loop.Decision{}, invalid("call %.80q is marked %s but the whole turn was sent as %s: press \"Submit per-call decisions\" to decide call by call, or reload the page to start over", c.ID, choice, action)
			}
			// Nor is a reason typed for one call dropped: it goes with a
			// per-call decision.
			if r, _ := reason(form.Get(ReasonFieldPrefix+c.ID), ""); r != "" {
				return loop.Decision{}, invalid("a reason was typed for call %.80q but the whole turn was sent as %s, which would drop it: press \"Submit per-call decisions\" to decide call by call, or type the reason in the turn's reason field", c.ID, action)
			}
		}
	}
	switch action {
	case "":
		return loop.Decision{}, invalid("the form has no action: press a button (Approve or Deny, or on a turn of several calls Approve all, Deny all or Submit per-call decisions)")
	case ActionApprove:
		// A note typed before pressing Approve goes with the approval, as
		// the API's message does.
		d.Action = loop.ActionApprove
		d.Message, _ = reason(form.Get(FieldMessage), "the reason")
	case ActionDeny:
		d.Action = loop.ActionDeny
		d.Message, _ = reason(form.Get(FieldMessage), "the reason")
	case ActionPerCall:
		if m, _ := reason(form.Get(FieldMessage), ""); m != "" {
			// The text above the buttons goes with Approve all (a note) or
			// Deny all (the reason); per call, each denied call has its own
			// reason (the API refuses both at once).
			return loop.Decision{}, invalid("the text in the field above the buttons goes with \"Approve all\" (a note) or \"Deny all\" (the reason); with per-call decisions give each denied call its own reason, and leave that field empty")
		}
		held := 0
		for _, c := range pending {
			choice := form.Get(CallFieldPrefix + c.ID)
			if !c.NeedsApproval {
				// The page offers no choice here; an approve posted
				// anyway changes nothing, and goes with the decision as
				// the API's per-call approve of such a call does.
				if choice != "" {
					d.Calls = append(d.Calls, loop.CallDecision{CallID: c.ID, Action: loop.Action(choice)})
				}
				continue
			}
			if notMine(c) {
				continue // refused above if a choice was posted
			}
			held++
			if choice == "" {
				return loop.Decision{}, invalid("choose approve or deny for call %.80q (%.80s)", c.ID, c.Tool)
			}
			cd := loop.CallDecision{CallID: c.ID, Action: loop.Action(choice)}
			if cd.Action == loop.ActionDeny {
				cd.Message, _ = reason(form.Get(ReasonFieldPrefix+c.ID), "")
			}
			d.Calls = append(d.Calls, cd)
		}
		if held == 0 {
			return loop.Decision{}, invalid("no call of this turn needs approval")
		}
	case string(loop.ActionEdit):
		return loop.Decision{}, invalid("%s", noEdits(quorum))
	default:
		return loop.Decision{}, invalid("unknown action %.40q: use approve, deny or per_call", action)
	}
	return d, nil
}

// noEdits says why an edit posted to the page is refused: the page takes
// none (an edit needs an authenticated caller and schema validation), and
// under a quorum the API takes none either.
func noEdits(quorum bool) string {
	if quorum {
		return "this turn needs approvals from more than one person, so no one can edit its calls, here or through the API (an edit would change what the others approve): deny the call and say in the reason what to write instead"
	}
	return "edits are only possible through the API (POST /runs/{id}/decision, or agentgate runs decide --call ID=edit:@file.json)"
}

// decidable checks that call c may be chosen action one by one, by the
// rule the API applies to a per-call decision (loop.CheckCallDecision): a
// call that needs no approval may be approved (it changes nothing) but not
// denied; a call a deny rule refused is not decided at all.
func decidable(c runs.CallSummary, action loop.Action) error {
	err := loop.CheckCallDecision(c.PendingCall(), action)
	switch {
	case err == nil:
		return nil
	case c.Denied != "":
		return invalid("%s", err)
	}
	return invalid("%s; only calls held for approval are decided one by one (Deny, or Deny all on a turn of several calls, stops every call of the turn)", err)
}

// reason normalizes a posted reason (line ends to LF, surrounding space
// trimmed) and checks it is valid UTF-8 of at most MaxReasonLength
// characters.
func reason(v, what string) (string, error) {
	v = strings.TrimSpace(strings.ReplaceAll(v, "\r\n", "\n"))
	if !utf8.ValidString(v) {
		return "", invalid("%s is not valid UTF-8 text", what)
	}
	if n := utf8.RuneCountInString(v); n > MaxReasonLength {
		return "", invalid("%s has %d characters; at most %d are allowed", what, n, MaxReasonLength)
	}
	return v, nil
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) error {
	return runs.Errorf(runs.EInvalid, format, args...)
}

// malformed is a form that is not one the page sends (a field it does not
// have, or one sent twice): 400, as a malformed API body is.
func malformed(format string, args ...any) error {
	return runs.Errorf(runs.EBadRequest, format, args...)
}

package runs

import (
	"context"
	"slices"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
)

// DeciderRevision is what a quorum check changes, against the directory in
// force, in who is asked to decide the held turn of a waiting run
// (PlanDeciders finds it; Store.ReviseDeciders writes it). A hold asks
// those who may decide as the directory stood then; the check keeps that
// in step with the directory a redeploy or a restart put in force since.
type DeciderRevision struct {
	// PerCallVotes switches a turn held for one decision to votes, call by
	// call (Run.PerCallVotes), as a hold would have held it under the
	// directory in force: no one person may decide every held call any
	// more, while each call keeps deciders of its own (HoldsVotes).
	PerCallVotes bool
	// Ask are the persons asked now who were not: each gets an inbox
	// entry and, with a mailbox, an approval link (Tokens).
	Ask []identity.Eligible
	// Tokens are the approval-link tokens issued to those of Ask who have
	// a mailbox (only their hashes), stored with the revision before any
	// link is mailed.
	Tokens []TokenGrant
	// Drop are inbox keys (Run.InboxKeys) of those who may decide no held
	// call still open: their entries go, and the run remembers them
	// (Run.InboxDropped).
	Drop []string
	// Restore are keys of Run.InboxDropped who may decide again: their
	// entries come back (their links still work).
	Restore []string
}

// IsZero reports whether rev changes nothing.
func (rev DeciderRevision) IsZero() bool {
	return !rev.PerCallVotes && len(rev.Ask) == 0 && len(rev.Tokens) == 0 && len(rev.Drop) == 0 && len(rev.Restore) == 0
}

// PerCallVotesReason is why a quorum check switched a turn held for one
// decision to votes, call by call, as the event that records it says.
const PerCallVotesReason = "nobody may decide every held call under the directory in force, and each call still has approvers who may decide it: each call is now decided by its own approvers, one approval each, as a turn held under this directory would be"

// PlanDeciders returns what a quorum check changes, against dir (the
// directory in force), in who is asked to decide waiting run r's held
// turn. The caller has checked every held call (CheckOpenApprovals: none
// was left unsure); ask says none was found lost.
//
// With ask, a turn held for one decision that no one person may decide
// any more, while each call keeps deciders of its own, switches to votes,
// call by call (PerCallVotes: HoldsVotes, the very rule a hold applies, on
// the directory in force), and those who may decide now (OpenDeciders of
// the row as it would be, less those who voted, among the first
// MaxApprovers of them as a hold lists them) and were not asked are asked
// (Ask). Whether or not: the inbox entries of those who may decide no held
// call still open (or voted) go (Drop), and those a check dropped before
// who may decide again are listed again (Restore), at most MaxApprovers in
// all. A turn decided by votes is never switched back to one decision: the
// votes cast on it stay as they are, and a person who may decide every
// held call decides every call still open with one whole-turn vote. A nil
// dir, or a run that does not wait, changes nothing. An inbox key of a
// group (an entry a release before inbox keys wrote) is left alone.
func PlanDeciders(dir *identity.Directory, r *Run, ask bool) DeciderRevision {
	var rev DeciderRevision
	if dir == nil || r == nil || r.Status != StatusWaiting {
		return rev
	}
	view := r
	if ask && !r.Voting() && HoldsVotes(dir, r, r.PendingCalls) {
		rev.PerCallVotes = true
		view = r.Clone()
		view.PerCallVotes = true
	}
	voted := VotedKeys(dir, r)
	open := OpenDeciders(dir, view)
	may := map[string]bool{}
	for _, e := range open {
		if k := e.Subject.Key(); !voted[k] {
			may[k] = true
		}
	}
	listed := map[string]bool{}
	for _, k := range r.InboxKeys {
		if may[k] || identity.IsGroupEntry(k) {
			listed[k] = true
			continue
		}
		rev.Drop = append(rev.Drop, k)
	}
	for _, k := range r.InboxDropped {
		if may[k] && !listed[k] && len(listed) < MaxApprovers {
			rev.Restore = append(rev.Restore, k)
			listed[k] = true
		}
	}
	if !ask {
		return rev
	}
	for _, e := range open[:min(len(open), MaxApprovers)] {
		k := e.Subject.Key()
		if voted[k] || listed[k] || slices.Contains(r.InboxDropped, k) || len(listed) >= MaxApprovers {
			continue
		}
		rev.Ask = append(rev.Ask, e)
		listed[k] = true
	}
	return rev
}

// DecidersEventData is the data of a deciders_changed event: what a quorum check
// changed in who is asked to decide the held turn (the event's actor is
// purge).
type DecidersEventData struct {
	SuspensionID string `json:"suspension_id"`
	// PerCallVotes says the turn, held for one decision, is decided by
	// votes, call by call, from now on; Reason says why.
	PerCallVotes bool   `json:"per_call_votes,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Asked are those asked now who were not (inbox keys: person:<id> for
	// a directory person), Links how many of them were given a link.
	Asked []string `json:"asked,omitempty"`
	Links int      `json:"links,omitempty"`
	// Dropped are those the run left the inbox of (they may decide no held
	// call still open); Restored those it is back in (their links work
	// again).
	Dropped  []string `json:"dropped,omitempty"`
	Restored []string `json:"restored,omitempty"`
}

// ReviseDeciders moves the next quorum check of WAITING_FOR_APPROVAL run
// cur, as the sweep read it, to at and records what the check found
// (found: Run.QuorumLost), as ScheduleQuorumCheck does, and writes rev (PlanDeciders) in the same
// write: the switch to per-call votes, the inbox entries of those asked
// and restored, the deletion of those dropped, and the tokens of the links
// of those asked (hashes only), with a deciders_changed event (actor purge) saying
// what changed and why. When the revision gives links and the row has no
// reminder yet, the reminder is set at 80% of the approval window (when
// that is still ahead), as a hold that mails links sets it. One write,
// conditional on cur's version: a decision or a vote that lands first wins
// (the revision is refused, and the run, still due, is checked again on
// the row it left). A zero rev is ScheduleQuorumCheck: a write of the row
// alone. Codes: EInvalid (a switch of a row that votes decide already, or
// that holds fewer than two calls for approval; an inbox key asked that is
// listed already, dropped that is not listed, restored that was not
// dropped; more than MaxApprovers listed; tokens without anyone asked; a
// call found lost that cur does not hold for approval),
// ENotFound, EConflict.
func (s *Store) ReviseDeciders(ctx context.Context, cur *Run, at time.Time, found QuorumFinding, rev DeciderRevision) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusWaiting {
		return nil, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
	}
	next := cur.Clone()
	next.QuorumCheckAt = time.Time{}
	if at = ms(at); at.Before(cur.ApprovalDeadline) {
		next.QuorumCheckAt = at
	}
	marks, err := lostMarks(cur, found)
	if err != nil {
		return nil, err
	}
	next.QuorumLost = marks
	if rev.IsZero() {
		return s.commit(ctx, cur, next, Write{})
	}
	if rev.PerCallVotes {
		switch {
		case cur.Voting():
			return nil, Errorf(EInvalid, "run %s: the held turn is decided by votes already", cur.ID)
		case !split(cur.PendingCalls):
			return nil, Errorf(EInvalid, "run %s: one held call is decided by one decision", cur.ID)
		}
		next.PerCallVotes = true
	}
	w, data, err := reviseInbox(cur, next, rev)
	if err != nil {
		return nil, err
	}
	if rev.PerCallVotes {
		data.PerCallVotes, data.Reason = true, PerCallVotesReason
	}
	if err := checkGrants(rev.Tokens); err != nil {
		return nil, err
	}
	if len(rev.Tokens) > 0 && len(rev.Ask) == 0 {
		return nil, Errorf(EInvalid, "approval tokens are issued to those asked, and nobody is")
	}
	now := s.now()
	for _, g := range rev.Tokens {
		w.NewTokens = append(w.NewTokens, ApprovalToken{Hash: g.Hash, RunID: cur.ID, SuspensionID: cur.SuspensionID, Approver: g.Approver, Person: g.Person, ExpiresAt: cur.ApprovalDeadline})
	}
	if data.Links = len(rev.Tokens); data.Links > 0 {
		// Links are mailed now: a reminder follows, as after a hold that
		// mailed links (the hold may have had none to mail).
		if next.RemindAt.IsZero() && !next.ReminderSent && !cur.SuspendedAt.IsZero() {
			if remind := ms(cur.SuspendedAt.Add(cur.ApprovalDeadline.Sub(cur.SuspendedAt) * 8 / 10)); remind.After(now) {
				next.RemindAt = remind
			}
		}
		if next.Notification == NotificationPending {
			// Approvers are told now: a mail that fails is recorded against
			// this state (RecordNotification), never under the number a
			// hold kept for its own first mail.
			next.Notification = NotificationSent
		}
	}
	w.Events = []Event{{Type: EventDecidersChanged, Actor: "purge", Data: mustJSON(data)}}
	return s.commit(ctx, cur, next, w)
}

// reviseInbox applies rev's inbox changes to next (cur's copy) and
// returns the write's inbox items and the event data that names them.
func reviseInbox(cur, next *Run, rev DeciderRevision) (Write, DecidersEventData, error) {
	w := Write{}
	data := DecidersEventData{SuspensionID: cur.SuspensionID}
	var added []string
	for _, k := range rev.Drop {
		if !slices.Contains(next.InboxKeys, k) {
			return w, data, Errorf(EInvalid, "inbox key %q dropped, which the run does not list", k)
		}
		next.InboxKeys = slices.DeleteFunc(next.InboxKeys, func(x string) bool { return x == k })
		w.DropInbox = append(w.DropInbox, InboxKey{Approver: k, RunID: cur.ID, SuspendedAt: cur.SuspendedAt})
		if !slices.Contains(next.InboxDropped, k) {
			next.InboxDropped = append(next.InboxDropped, k)
		}
		data.Dropped = append(data.Dropped, k)
	}
	for _, k := range rev.Restore {
		if !slices.Contains(cur.InboxDropped, k) || slices.Contains(next.InboxKeys, k) || slices.Contains(rev.Drop, k) {
			return w, data, Errorf(EInvalid, "inbox key %q restored, which a check did not drop", k)
		}
		next.InboxDropped = slices.DeleteFunc(next.InboxDropped, func(x string) bool { return x == k })
		next.InboxKeys = append(next.InboxKeys, k)
		added = append(added, k)
		data.Restored = append(data.Restored, k)
	}
	for _, e := range rev.Ask {
		k := e.Subject.Key()
		if k == "" || len(k) > identity.MaxPrincipalLen+16 {
			return w, data, Errorf(EInvalid, "inbox keys must be 1 to %d bytes", identity.MaxPrincipalLen+16)
		}
		if slices.Contains(next.InboxKeys, k) || slices.Contains(rev.Drop, k) {
			return w, data, Errorf(EInvalid, "inbox key %q asked, which the run lists already", k)
		}
		next.InboxDropped = slices.DeleteFunc(next.InboxDropped, func(x string) bool { return x == k })
		next.InboxKeys = append(next.InboxKeys, k)
		added = append(added, k)
		data.Asked = append(data.Asked, k)
	}
	if len(next.InboxKeys) > MaxApprovers {
		return w, data, Errorf(EInvalid, "%d inbox keys, at most %d allowed", len(next.InboxKeys), MaxApprovers)
	}
	if n := len(next.InboxDropped); n > MaxApprovers {
		// The earliest go: one of them found able again is asked anew.
		next.InboxDropped = slices.Delete(next.InboxDropped, 0, n-MaxApprovers)
	}
	if len(next.InboxDropped) == 0 {
		next.InboxDropped = nil
	}
	for _, e := range inboxEntries(next) {
		if slices.Contains(added, e.Approver) {
			w.NewInbox = append(w.NewInbox, e)
		}
	}
	return w, data, nil
}

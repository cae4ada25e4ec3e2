package runs

import (
	"context"
	"time"
)

// Renotify records that the approvers of the current suspension were told
// again — a reminder, or a retry of a failed first notification — with the
// fresh approval tokens the new mails carry, in one write: the tokens, the
// notified (or reminded) event and the row. The earlier tokens stay valid
// until the deadline. Like RecordNotification it retries when only the
// version moved. Codes: EInvalid, ENotFound, EConflict (no longer waiting
// on that suspension), EGone (the window closed).
func (s *Store) Renotify(ctx context.Context, cur *Run, n Notice, tokens []TokenGrant) (*Run, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if err := n.about(cur); err != nil {
			return nil, Write{}, err
		}
		if err := checkGrants(tokens); err != nil {
			return nil, Write{}, err
		}
		if !now.Before(cur.ApprovalDeadline) {
			return nil, Write{}, Errorf(EGone, "the approval window of run %s has closed", cur.ID)
		}
		next := cur.Clone()
		w := Write{}
		for _, g := range tokens {
			w.NewTokens = append(w.NewTokens, ApprovalToken{Hash: g.Hash, RunID: cur.ID, SuspensionID: cur.SuspensionID, Approver: g.Approver, ExpiresAt: cur.ApprovalDeadline})
		}
		next.Notification = n.State
		typ := EventNotified
		if n.Reminder {
			typ = EventReminded
		}
		// Either way this was the sweep's one extra notification of the
		// suspension: the run is next due at its deadline.
		next.ReminderSent = true
		w.Events = []Event{{Type: typ, Actor: "purge", Data: cloneRaw(n.Data)}}
		return next, w, nil
	}, func(fresh *Run) bool { return n.about(fresh) == nil })
}

package runs

import (
	"context"
	"slices"
	"time"
)

// Renotify records that the approvers of the current suspension were told
// again — a reminder, or a retry of a failed first notification, or, with
// n.Retry, a retry of the failed mail of those mailboxes (Run.MailRetry) —
// or, with n.Recovered, for the first time by the sweep, with the fresh
// approval tokens the new mails carry, in one write: the tokens, the
// notified (or reminded) event and the row. The earlier tokens stay valid
// until the deadline. Like RecordNotification it retries when only the
// version moved. Codes: EInvalid, ENotFound, EConflict (no longer waiting
// on that suspension; with n.Recovered, its first notification is on
// record), EGone (the window closed).
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
			w.NewTokens = append(w.NewTokens, ApprovalToken{Hash: g.Hash, RunID: cur.ID, SuspensionID: cur.SuspensionID, Approver: g.Approver, Person: g.Person, ExpiresAt: cur.ApprovalDeadline})
		}
		if n.Recovered {
			// The first notification its worker did not record: on the
			// row as the worker's would be, under the number the
			// suspension kept for it. The write is conditional on the
			// row read here (its version): a worker's record that lands
			// first takes the number and the state, and this is refused
			// on the fresh row, before any mail is sent.
			if cur.FirstNoticeDue().IsZero() {
				return nil, Write{}, Errorf(EConflict, "the first notification of run %s's suspension %s is on record", cur.ID, cur.SuspensionID)
			}
			next.Notification, next.NoticeSeq = n.State, 0
			w.Events = []Event{{Seq: cur.NoticeSeq, Type: EventNotified, Actor: "purge", Data: cloneRaw(n.Data)}}
			return next, w, nil
		}
		if len(n.Retry) > 0 {
			// A retry of some mailboxes' mail (Run.MailRetry): they leave
			// the list (others a later write added stay), and the
			// suspension's notification and reminder are as they were.
			retried := func(m string) bool { return slices.Contains(n.Retry, m) }
			next.MailRetry = slices.DeleteFunc(next.MailRetry, retried)
			if next.MailRetryReminders = slices.DeleteFunc(next.MailRetryReminders, retried); len(next.MailRetryReminders) == 0 {
				next.MailRetryReminders = nil
			}
			if len(next.MailRetry) == 0 {
				next.MailRetry, next.MailRetryAt = nil, time.Time{}
			}
			w.Events = []Event{{Type: EventNotified, Actor: "purge", Data: cloneRaw(n.Data)}}
			return next, w, nil
		}
		// A reminder or a retry of the first notification mails everyone
		// not yet voted: those whose mail is to be retried among them.
		next.MailRetry, next.MailRetryAt, next.MailRetryReminders = nil, time.Time{}, nil
		next.Notification = n.State
		typ := EventNotified
		if n.Reminder {
			typ = EventReminded
		}
		// A reminder is the sweep's last notification of the suspension:
		// the run is next due at its deadline. A retry of a failed first
		// notification keeps the reminder at 80% of the window when that
		// is still ahead (SuspendedAt is when the window opened).
		next.ReminderSent = true
		if !n.Reminder && !cur.SuspendedAt.IsZero() {
			if at := ms(cur.SuspendedAt.Add(cur.ApprovalDeadline.Sub(cur.SuspendedAt) * 8 / 10)); at.After(now) {
				next.RemindAt, next.ReminderSent = at, false
			}
		}
		w.Events = []Event{{Type: typ, Actor: "purge", Data: cloneRaw(n.Data)}}
		return next, w, nil
	}, func(fresh *Run) bool { return n.about(fresh) == nil })
}

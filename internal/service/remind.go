package service

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// Remind tells the e-mail approvers of a waiting run once more, with fresh
// links: a reminder once 80% of the approval window has passed, or a retry
// when the first notification failed. The sweep calls it once per
// suspension (the run's RemindAt). A reminder whose mail to some approvers
// fails has those mailed once more MailRetryDelay later (RetryMail).
func (w *Worker) Remind(ctx context.Context, r *runs.Run) error {
	if w.Notifier == nil || w.NewToken == nil {
		return nil
	}
	reminder := !retriesFirstMail(r)
	links, grants, err := w.issueLinks(w.unvoted(r)) // reminders go only to those who have not voted
	if err != nil {
		return err
	}
	var none string
	if len(links) == 0 {
		// Recorded all the same, so the sweep does not come back for it.
		none = "no approver who has not voted has a mailbox"
	}
	data, _ := json.Marshal(struct {
		SuspensionID string `json:"suspension_id"`
		Channel      string `json:"channel"`
		Reminder     bool   `json:"reminder"`
		// Retry marks the retry of a failed first mail, as RetryMail's
		// notified event is marked.
		Retry   bool   `json:"retry,omitempty"`
		Links   int    `json:"links"`
		NotSent string `json:"not_sent,omitempty"`
	}{r.SuspensionID, "email", reminder, !reminder, len(links), none})
	// Tokens first, so every link mailed works the moment it arrives.
	cur, err := w.Store.Renotify(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Reminder: reminder, Data: data}, grants)
	if err != nil {
		return err
	}
	failed := w.mailLinks(ctx, w.log().With("run_id", r.ID), cur, links, reminder)
	if len(failed) == 0 {
		return nil
	}
	fdata, _ := json.Marshal(struct {
		SuspensionID string   `json:"suspension_id"`
		Channel      string   `json:"channel"`
		Failed       []string `json:"failed"`
	}{r.SuspensionID, "email", failed})
	notice := runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationFailed, Actor: "purge", Data: fdata}
	if reminder {
		// Nothing mails everyone again after the reminder: those whose
		// reminder failed are mailed once more, alone, by the sweep
		// (RetryMail). A failed retry of the first notification is
		// followed by the reminder instead.
		notice.Retry, notice.RetryAt, notice.RetryReminder = failed, w.now().Add(MailRetryDelay), true
	}
	_, err = w.Store.RecordNotification(ctx, cur, notice)
	if runs.ErrorCode(err) == runs.EConflict {
		// The run moved on while the mail went out (a decision, a cancel):
		// the reminder's links are on record (Renotify wrote them before
		// any was mailed), and there is nothing left to retry.
		w.log().WarnContext(ctx, "failed reminder mail not recorded: the run no longer waits on the suspension", "run_id", r.ID, "suspension_id", r.SuspensionID, "failed", len(failed))
		return nil
	}
	return err
}

// unvoted returns those of waiting run r's listed deciders who may still
// vote (under a quorum, on a call not yet approved or denied) and have not.
func (w *Worker) unvoted(r *runs.Run) []identity.Eligible {
	voted := runs.VotedKeys(w.Directory, r)
	var out []identity.Eligible
	for _, e := range listed(runs.OpenDeciders(w.Directory, r)) {
		if !voted[e.Subject.Key()] {
			out = append(out, e)
		}
	}
	return out
}

// RecoverFirstMail sends the first approval mail of waiting run r's
// suspension, which its worker was to send right after the suspension's
// write and of which it recorded nothing within runs.FirstNoticeGrace
// (runs.Run.FirstNoticeDue: it died in between, or its record was lost),
// to every approver who may still vote and has not, each with a fresh
// link. The sweep calls it when the run is due for it. The mail is
// recorded as the suspension's first notification (a notified event by
// purge with "recovered": true, under the number the suspension kept for
// it, with the tokens) before any link is mailed, in a write conditional
// on the row: a worker's record that lands first wins, and then nothing is
// mailed (EConflict). A mail that fails is recorded as the worker records
// one (the notification failed; the sweep sends it again MailRetryDelay
// later, RetryAt). A worker whose mail went out and whose record did not
// land (its reply lost, or it died right after the send) leaves its
// approvers a second mail: a duplicate rather than none. Without a
// notifier or a token source the notification is recorded all the same,
// with no link, so that the sweep does not come back for it.
func (w *Worker) RecoverFirstMail(ctx context.Context, r *runs.Run) error {
	var links []approvalLink
	var grants []runs.TokenGrant
	if w.Notifier != nil {
		var err error
		if links, grants, err = w.issueLinks(w.unvoted(r)); err != nil {
			return err
		}
	}
	var none string
	if len(links) == 0 {
		none = "no approver who has not voted has a mailbox, or this process sends no mail"
	}
	data, _ := json.Marshal(struct {
		SuspensionID string `json:"suspension_id"`
		Channel      string `json:"channel"`
		// Recovered marks the first mail sent by the sweep, its
		// worker's record missing.
		Recovered bool   `json:"recovered"`
		Links     int    `json:"links"`
		NotSent   string `json:"not_sent,omitempty"`
	}{r.SuspensionID, "email", true, len(links), none})
	cur, err := w.Store.Renotify(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Recovered: true, Data: data}, grants)
	if err != nil {
		return err
	}
	log := w.log().With("run_id", r.ID)
	log.WarnContext(ctx, "first approval mail sent by the sweep: the worker that held the turn recorded none", "suspension_id", r.SuspensionID, "links", len(links), "suspended_at", r.SuspendedAt)
	failed := w.mailLinks(ctx, log, cur, links, false)
	if len(failed) == 0 {
		return nil
	}
	fdata, _ := json.Marshal(struct {
		SuspensionID string   `json:"suspension_id"`
		Channel      string   `json:"channel"`
		Failed       []string `json:"failed"`
	}{r.SuspensionID, "email", failed})
	_, err = w.Store.RecordNotification(ctx, cur, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationFailed, Actor: "purge", Data: fdata, RetryAt: w.now().Add(MailRetryDelay)})
	if runs.ErrorCode(err) == runs.EConflict {
		log.WarnContext(ctx, "failed approval mail not recorded: the run no longer waits on the suspension", "suspension_id", r.SuspensionID, "failed", len(failed))
		return nil
	}
	return err
}

// retriesFirstMail reports whether Remind, for waiting run r, retries the
// suspension's first approval mail, which failed, rather than sending the
// reminder: a notified event with "retry": true, counted by the sweep as
// mail retried, not as reminded.
func retriesFirstMail(r *runs.Run) bool {
	return r.Notification == runs.NotificationFailed
}

// RetryMail mails once more, each with a fresh link, the approvers of
// waiting run r whose approval mail failed where nothing else would mail
// them again (runs.Run.MailRetry: a link a quorum check mailed to one it
// asked, a reminder): those of them who may still vote and have not. No
// one else is mailed; those whose failed mail was the reminder get it as
// the reminder (runs.Run.MailRetryReminders), the others as a first mail. The retry is recorded
// (a notified event with "retry": true, the tokens, the mailboxes taken
// off the list) before any mail goes out; a mail that fails again is
// recorded and not retried. The sweep calls it when the run's
// MailRetryAt comes; it returns the run as last written.
func (w *Worker) RetryMail(ctx context.Context, r *runs.Run) (*runs.Run, error) {
	retry := slices.Clone(r.MailRetry)
	var links []approvalLink
	var grants []runs.TokenGrant
	if w.Notifier != nil && w.NewToken != nil {
		voted := runs.VotedKeys(w.Directory, r)
		var owed []identity.Eligible
		for _, e := range listed(runs.OpenDeciders(w.Directory, r)) {
			if !voted[e.Subject.Key()] && e.Mailbox != "" && slices.Contains(retry, e.Mailbox) {
				owed = append(owed, e)
			}
		}
		var err error
		if links, grants, err = w.issueLinks(owed); err != nil {
			return nil, err
		}
	}
	var none string
	if len(links) == 0 {
		// Taken off the list all the same, so the sweep does not come
		// back for it.
		none = "none of them may still vote, or this process sends no mail"
	}
	data, _ := json.Marshal(struct {
		SuspensionID string `json:"suspension_id"`
		Channel      string `json:"channel"`
		Retry        bool   `json:"retry"`
		Links        int    `json:"links"`
		NotSent      string `json:"not_sent,omitempty"`
	}{r.SuspensionID, "email", true, len(links), none})
	cur, err := w.Store.Renotify(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Retry: retry, Data: data}, grants)
	if err != nil {
		return nil, err
	}
	log := w.log().With("run_id", r.ID)
	// Those whose failed mail was the reminder get it as the reminder.
	var reminders, others []approvalLink
	for _, l := range links {
		if slices.Contains(r.MailRetryReminders, l.approver) {
			reminders = append(reminders, l)
		} else {
			others = append(others, l)
		}
	}
	failed := append(w.mailLinks(ctx, log, cur, reminders, true), w.mailLinks(ctx, log, cur, others, false)...)
	if len(failed) == 0 {
		return cur, nil
	}
	fdata, _ := json.Marshal(struct {
		SuspensionID string   `json:"suspension_id"`
		Channel      string   `json:"channel"`
		Failed       []string `json:"failed"`
	}{r.SuspensionID, "email", failed})
	// Retry without RetryAt: recorded, not retried again.
	recorded, err := w.Store.RecordNotification(ctx, cur, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationFailed, Actor: "purge", Data: fdata, Retry: failed})
	if runs.ErrorCode(err) == runs.EConflict {
		log.WarnContext(ctx, "failed retry of approval mail not recorded: the run no longer waits on the suspension", "suspension_id", r.SuspensionID, "failed", len(failed))
		return cur, nil
	}
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

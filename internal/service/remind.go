package service

import (
	"context"
	"encoding/json"
	"log/slog"
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
	links, grants, err := w.issueLinksToUnvoted(r, nil) // reminders go only to those who have not voted
	if err != nil {
		return err
	}
	cur, err := w.recordMailToSend(ctx, r, runs.Notice{Reminder: reminder}, sweepMailData{Reminder: &reminder, Retry: !reminder},
		links, grants, "no approver who has not voted has a mailbox")
	if err != nil {
		return err
	}
	log := w.log().With("run_id", r.ID)
	failed := w.mailLinks(ctx, log, cur, links, reminder)
	if len(failed) == 0 {
		return nil
	}
	var notice runs.Notice
	if reminder {
		// Nothing mails everyone again after the reminder: those whose
		// reminder failed are mailed once more, alone, by the sweep
		// (RetryMail). A failed retry of the first notification is
		// followed by the reminder instead.
		notice.Retry, notice.RetryAt, notice.RetryReminder = failed, w.now().Add(MailRetryDelay), true
	}
	// Not recorded when the run moved on while the mail went out (a
	// decision, a cancel): the reminder's links are on record
	// (recordMailToSend wrote them before any was mailed), and there is
	// nothing left to retry.
	_, err = w.recordFailedMail(ctx, log, cur, failed, notice, "failed reminder mail not recorded: the run no longer waits on the suspension")
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

// issueLinksToUnvoted issues a fresh link to each of waiting run r's
// listed deciders who may still vote and has not (unvoted) and has a
// mailbox, and, with owed non-nil, only to those whose mailbox owed
// accepts. It returns the links with the grants to store (issueLinks);
// none where this process sends no mail (no Notifier or no token source).
func (w *Worker) issueLinksToUnvoted(r *runs.Run, owed func(mailbox string) bool) ([]approvalLink, []runs.TokenGrant, error) {
	if w.Notifier == nil {
		return nil, nil, nil
	}
	to := w.unvoted(r)
	if owed != nil {
		to = slices.DeleteFunc(to, func(e identity.Eligible) bool { return !owed(e.Mailbox) })
	}
	return w.issueLinks(to)
}

// sweepMailData is the data of the notified event that records approval
// mail the sweep sends for a waiting run's suspension (recordMailToSend).
type sweepMailData struct {
	SuspensionID string `json:"suspension_id"`
	Channel      string `json:"channel"`
	// Reminder is set by Remind alone: true for the reminder, false for
	// the retry of a failed first mail (then Retry is true).
	Reminder *bool `json:"reminder,omitempty"`
	// Recovered marks the first mail sent by the sweep, its worker's
	// record missing (RecoverFirstMail).
	Recovered bool `json:"recovered,omitempty"`
	// Retry marks the retry of failed mail: of the first mail (Remind),
	// or of some approvers' mail (RetryMail).
	Retry   bool   `json:"retry,omitempty"`
	Links   int    `json:"links"`
	NotSent string `json:"not_sent,omitempty"`
}

// recordMailToSend records the approval mail the sweep is about to send
// with links for waiting run r's suspension: notice (which mail it is:
// Reminder, Recovered or Retry), as sent, with data (its flags; the
// suspension, the channel and the number of links are filled in here) as
// its notified event and the links' grants, in one write conditional on
// r's row (runs.Store.Renotify). The tokens are written before any link is
// mailed, so every link works the moment it arrives. With no link the
// mail is recorded all the same, with notSent saying why none goes out, so
// that the sweep does not come back for it. It returns the run as written.
func (w *Worker) recordMailToSend(ctx context.Context, r *runs.Run, notice runs.Notice, data sweepMailData,
	links []approvalLink, grants []runs.TokenGrant, notSent string) (*runs.Run, error) {
	data.SuspensionID, data.Channel, data.Links = r.SuspensionID, "email", len(links)
	if len(links) == 0 {
		data.NotSent = notSent
	}
	notice.SuspensionID, notice.State = r.SuspensionID, runs.NotificationSent
	notice.Data, _ = json.Marshal(data)
	return w.Store.Renotify(ctx, r, notice, grants)
}

// failedMailData is the data of the notified event that records the
// approvers of the given suspension whose approval mail failed.
func failedMailData(suspensionID string, failed []string) json.RawMessage {
	data, _ := json.Marshal(struct {
		SuspensionID string   `json:"suspension_id"`
		Channel      string   `json:"channel"`
		Failed       []string `json:"failed"`
	}{suspensionID, "email", failed})
	return data
}

// recordFailedMail records that the sweep's approval mail to the approvers
// failed (not empty) did not go out, on waiting run cur as the mail's
// record left it (recordMailToSend): notice, whose Retry, RetryAt and
// RetryReminder say what the sweep does about them (the rest is filled in
// here), with a notified event by purge naming them. The write is
// conditional on the row: when the run no longer waits on the suspension
// (EConflict) nothing is recorded, which is logged as notRecorded and is no
// error, and cur is returned; otherwise the run as written.
func (w *Worker) recordFailedMail(ctx context.Context, log *slog.Logger, cur *runs.Run, failed []string, notice runs.Notice, notRecorded string) (*runs.Run, error) {
	notice.SuspensionID, notice.State, notice.Actor = cur.SuspensionID, runs.NotificationFailed, "purge"
	notice.Data = failedMailData(cur.SuspensionID, failed)
	recorded, err := w.Store.RecordNotification(ctx, cur, notice)
	if runs.ErrorCode(err) == runs.EConflict {
		log.WarnContext(ctx, notRecorded, "suspension_id", cur.SuspensionID, "failed", len(failed))
		return cur, nil
	}
	if err != nil {
		return nil, err
	}
	return recorded, nil
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
	links, grants, err := w.issueLinksToUnvoted(r, nil)
	if err != nil {
		return err
	}
	cur, err := w.recordMailToSend(ctx, r, runs.Notice{Recovered: true}, sweepMailData{Recovered: true},
		links, grants, "no approver who has not voted has a mailbox, or this process sends no mail")
	if err != nil {
		return err
	}
	log := w.log().With("run_id", r.ID)
	log.WarnContext(ctx, "first approval mail sent by the sweep: the worker that held the turn recorded none", "suspension_id", r.SuspensionID, "links", len(links), "suspended_at", r.SuspendedAt)
	failed := w.mailLinks(ctx, log, cur, links, false)
	if len(failed) == 0 {
		return nil
	}
	_, err = w.recordFailedMail(ctx, log, cur, failed, runs.Notice{RetryAt: w.now().Add(MailRetryDelay)},
		"failed approval mail not recorded: the run no longer waits on the suspension")
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
	links, grants, err := w.issueLinksToUnvoted(r, func(mailbox string) bool { return slices.Contains(retry, mailbox) })
	if err != nil {
		return nil, err
	}
	// With no link, taken off the list all the same.
	cur, err := w.recordMailToSend(ctx, r, runs.Notice{Retry: retry}, sweepMailData{Retry: true},
		links, grants, "none of them may still vote, or this process sends no mail")
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
	// Retry without RetryAt: recorded, not retried again.
	return w.recordFailedMail(ctx, log, cur, failed, runs.Notice{Retry: failed},
		"failed retry of approval mail not recorded: the run no longer waits on the suspension")
}

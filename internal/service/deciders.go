package service

import (
	"context"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// ReviseDeciders writes rev, what a quorum check changes in who is asked
// to decide waiting run r (runs.PlanDeciders), with the next check at at
// and what the check found (runs.Store.ReviseDeciders), and
// gives those it asks what a hold gives them: an approval link to each who
// has a mailbox, its token stored (hashed) in the same write, so that the
// link works the moment it arrives, and mailed once that write is durable,
// as the first mail of a suspension (the mail of the row as revised: under
// per-call votes, the calls the reader may not decide are marked). A mail
// that fails is recorded (a notified event naming the mailbox) and the
// sweep mails that mailbox, and no other, again MailRetryDelay later
// (RetryMail), also when the run's reminder has gone out. Without a Notifier (or token source) those asked get inbox
// entries only.
func (w *Worker) ReviseDeciders(ctx context.Context, r *runs.Run, at time.Time, found runs.QuorumFinding, rev runs.DeciderRevision) (*runs.Run, error) {
	var links []approvalLink
	if w.Notifier != nil {
		var err error
		if links, rev.Tokens, err = w.issueLinks(rev.Ask); err != nil {
			return nil, err
		}
	}
	next, err := w.Store.ReviseDeciders(ctx, r, at, found, rev)
	if err != nil || len(links) == 0 {
		return next, err
	}
	log := w.log().With("run_id", r.ID)
	failed := w.mailLinks(ctx, log, next, links, false)
	if len(failed) == 0 {
		return next, nil
	}
	// Those whose mail failed, and only they, are mailed again by the
	// sweep (RetryMail), before or after the run's reminder.
	recorded, err := w.Store.RecordNotification(ctx, next, runs.Notice{SuspensionID: next.SuspensionID, State: runs.NotificationFailed, Actor: "purge",
		Data:  failedMailData(next.SuspensionID, failed),
		Retry: failed, RetryAt: w.now().Add(MailRetryDelay)})
	if err != nil {
		// The revision is durable; only the retry is lost (the reminder at
		// 80% of the window still comes, if it has not yet), or the run
		// moved on meanwhile.
		log.WarnContext(ctx, "failed approval mail of those a quorum check asked not recorded", "suspension_id", next.SuspensionID, "failed", len(failed), "err", err)
		return next, nil
	}
	return recorded, nil
}

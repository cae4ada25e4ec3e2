package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// approvalLink is an approval link issued to one e-mail approver: the raw
// token goes into the mail only; its hash is stored (runs.TokenGrant).
type approvalLink struct{ approver, raw string }

// listed is the part of eligible a suspension lists in the inbox and mails
// links to, first and in reminders: at most runs.MaxApprovers persons; the
// rest decide through the API.
func listed(eligible []identity.Eligible) []identity.Eligible {
	if len(eligible) > runs.MaxApprovers {
		return eligible[:runs.MaxApprovers]
	}
	return eligible
}

// issueLinks issues a fresh link to every person of eligible who has a
// mailbox, and returns the links with the grants to store. The grants are
// written (with the suspension, or by Renotify) before any link is mailed,
// so a link works the moment it arrives. Without a token source (NewToken)
// nobody gets a link.
func (w *Worker) issueLinks(eligible []identity.Eligible) ([]approvalLink, []runs.TokenGrant, error) {
	if w.NewToken == nil {
		return nil, nil, nil
	}
	var links []approvalLink
	var grants []runs.TokenGrant
	for _, e := range eligible {
		if e.Mailbox == "" {
			continue
		}
		raw, hash, err := w.NewToken()
		if err != nil {
			return nil, nil, fmt.Errorf("approval token: %w", err)
		}
		links = append(links, approvalLink{e.Mailbox, raw})
		grants = append(grants, runs.TokenGrant{Hash: hash, Approver: e.Mailbox, Person: e.Subject.Key()})
	}
	return links, grants, nil
}

// mailLinks tells each link's approver about r (a reminder, or the first
// mail of the suspension) and returns the approvers whose mail failed.
// Telling approvers is best effort: the caller records the outcome.
func (w *Worker) mailLinks(ctx context.Context, log *slog.Logger, r *runs.Run, links []approvalLink, reminder bool) []string {
	failed, _ := w.mailLinksUntil(ctx, log, r, links, reminder, time.Time{})
	return failed
}

// mailLinksUntil is mailLinks that, with a non-zero until, starts no mail
// at or after until by the worker's clock and stops waiting for one then
// (its context ends), and returns as well the approvers not mailed for
// that reason (among failed: a mail stopped may or may not have gone out).
func (w *Worker) mailLinksUntil(ctx context.Context, log *slog.Logger, r *runs.Run, links []approvalLink, reminder bool, until time.Time) (failed, late []string) {
	for i, l := range links {
		mctx, cancel := ctx, context.CancelFunc(func() {})
		if !until.IsZero() {
			left := until.Sub(w.now())
			if left <= 0 {
				for _, rest := range links[i:] {
					late = append(late, rest.approver)
				}
				return append(failed, late...), late
			}
			mctx, cancel = context.WithTimeout(ctx, left)
		}
		n := Notification{Run: r, Approver: l.approver, RawToken: l.raw, Purpose: r.Purpose, Reminder: reminder}
		err := w.Notifier.Notify(mctx, n)
		stopped := mctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			log.WarnContext(ctx, "approval mail failed", "err", err)
			failed = append(failed, l.approver)
			if stopped {
				late = append(late, l.approver)
			}
		}
	}
	return failed, late
}

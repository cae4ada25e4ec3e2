package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/internal/runs"
)

// Remind tells the e-mail approvers of a waiting run once more, with fresh
// links: a reminder once 80% of the approval window has passed, or a retry
// when the first notification failed. The sweep calls it once per
// suspension (the run's RemindAt).
func (w *Worker) Remind(ctx context.Context, r *runs.Run) error {
	if w.Notifier == nil || w.NewToken == nil {
		return nil
	}
	reminder := r.Notification != runs.NotificationFailed
	type link struct{ approver, raw string }
	var links []link
	var grants []runs.TokenGrant
	voted := map[string]bool{}
	for _, v := range r.Votes {
		voted[v.Person] = true
	}
	for _, e := range runs.Eligible(w.Directory, r, r.PendingCalls) {
		if e.Mailbox == "" || voted[e.Subject.Key()] {
			continue // reminders go only to those who have not voted
		}
		raw, hash, err := w.NewToken()
		if err != nil {
			return fmt.Errorf("approval token: %w", err)
		}
		grants = append(grants, runs.TokenGrant{Hash: hash, Approver: e.Mailbox})
		links = append(links, link{e.Mailbox, raw})
	}
	data, _ := json.Marshal(struct {
		Channel  string `json:"channel"`
		Reminder bool   `json:"reminder"`
		Links    int    `json:"links"`
	}{"email", reminder, len(links)})
	// Tokens first, so every link mailed works the moment it arrives.
	cur, err := w.Store.Renotify(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Reminder: reminder, Data: data}, grants)
	if err != nil {
		return err
	}
	var failed []string
	for _, l := range links {
		if err := w.Notifier.Notify(ctx, Notification{Run: cur, Approver: l.approver, RawToken: l.raw, Purpose: cur.Purpose, Reminder: reminder}); err != nil {
			w.log().WarnContext(ctx, "approval mail failed", "run_id", r.ID, "err", err)
			failed = append(failed, l.approver)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	fdata, _ := json.Marshal(struct {
		Channel string   `json:"channel"`
		Failed  []string `json:"failed"`
	}{"email", failed})
	_, err = w.Store.RecordNotification(ctx, cur, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationFailed, Data: fdata})
	return err
}

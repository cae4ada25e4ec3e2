package service

import (
	"context"
	"encoding/json"

	"github.com/agentgate/agentgate/internal/identity"
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
	voted := runs.VotedKeys(w.Directory, r)
	var unvoted []identity.Eligible
	// Those who may still vote: under a quorum, on a call not yet approved
	// or denied.
	for _, e := range listed(runs.OpenDeciders(w.Directory, r)) {
		if !voted[e.Subject.Key()] {
			unvoted = append(unvoted, e) // reminders go only to those who have not voted
		}
	}
	links, grants, err := w.issueLinks(unvoted)
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
		Links        int    `json:"links"`
		NotSent      string `json:"not_sent,omitempty"`
	}{r.SuspensionID, "email", reminder, len(links), none})
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
	_, err = w.Store.RecordNotification(ctx, cur, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationFailed, Actor: "purge", Data: fdata})
	if runs.ErrorCode(err) == runs.EConflict {
		// The run moved on while the mail went out (a decision, a cancel):
		// the reminder's links are on record (Renotify wrote them before
		// any was mailed), and there is nothing left to retry.
		w.log().WarnContext(ctx, "failed reminder mail not recorded: the run no longer waits on the suspension", "run_id", r.ID, "suspension_id", r.SuspensionID, "failed", len(failed))
		return nil
	}
	return err
}

package service

import (
	"context"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// MailNotifier sends one approval mail per e-mail approver through m, with
// links under baseURL ({baseURL}/approvals/{token}) and, under a quorum, the
// votes so far as dir names the voters; a nil m gives a nil Notifier
// (approvers use the API only).
func MailNotifier(m approval.Mailer, baseURL string, dir *identity.Directory) Notifier {
	if m == nil {
		return nil
	}
	return NotifierFunc(func(ctx context.Context, n Notification) error {
		voted, still := runs.VoteTally(dir, n.Run)
		return m.Send(ctx, approval.Message{
			VotesNeeded: n.Run.VotesNeeded, Voting: n.Run.Voting(), Voted: voted, StillNeeded: still, Progress: approval.Progress(n.Run),
			RunID:        n.Run.ID,
			SuspensionID: n.Run.SuspensionID,
			Approver:     n.Approver,
			Initiator:    n.Run.Initiator,
			Purpose:      n.Purpose,
			Calls:        n.Run.PendingCalls,
			Deadline:     n.Run.ApprovalDeadline,
			Link:         approval.Link(baseURL, n.RawToken),
			Reminder:     n.Reminder,
		})
	})
}

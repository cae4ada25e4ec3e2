package service

import (
	"context"
	"slices"

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
			Others:       othersCalls(dir, n.Run, n.Approver),
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

// othersCalls returns, where votes decide r's turn, the held calls approver
// may not decide (other approvers decide them); nil otherwise.
func othersCalls(dir *identity.Directory, r *runs.Run, approver string) []string {
	if !r.Voting() {
		return nil
	}
	mine, _ := runs.DecidableCalls(dir, r, approver)
	var out []string
	for _, c := range r.PendingCalls {
		if c.NeedsApproval && !slices.Contains(mine, c.ID) {
			out = append(out, c.ID)
		}
	}
	return out
}

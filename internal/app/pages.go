package app

import (
	"net/url"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// pages adapts internal/approvalpage to the API's ApprovalPages.
type pages struct{}

var _ httpapi.ApprovalPages = pages{}

// Confirm renders the decision page. The form posts to the page's own URL,
// so it works behind any API Gateway stage prefix.
func (pages) Confirm(r *runs.Run, t *runs.ApprovalToken, purpose, _ string) (int, string) {
	return approvalpage.Confirm(approvalpage.ConfirmPage{
		RunID: r.ID, Initiator: r.Initiator, Purpose: purpose, Approver: t.Approver,
		Calls: r.PendingCalls, TurnDigest: r.TurnDigest, Deadline: r.ApprovalDeadline,
	})
}

func (pages) Decided(r *runs.Run, d loop.Decision) (int, string) {
	return approvalpage.Decided(approvalpage.DecidedPage{RunID: r.ID, Decision: d, Calls: r.PendingCalls})
}

func (pages) AlreadyDecided(r *runs.Run) (int, string) {
	by, via, at := r.DecidedBy, r.DecidedVia, r.DecidedAt
	if by == "" && r.Status == runs.StatusCancelled {
		by, via, at = "a cancellation", "api", r.UpdatedAt
	}
	return approvalpage.AlreadyDecided(by, via, at)
}

func (pages) NotFound() (int, string)                      { return approvalpage.NotFound() }
func (pages) Expired() (int, string)                       { return approvalpage.Expired() }
func (pages) Problem(status int, msg string) (int, string) { return approvalpage.Problem(status, msg) }
func (pages) Headers() map[string]string                   { return approvalpage.Headers() }

func (pages) HeldText(r *runs.Run, t httpapi.HeldText) (int, string) {
	return approvalpage.Text(approvalpage.TextPage{
		RunID: r.ID, CallID: t.Call.ID, Tool: t.Call.Tool, Part: t.Part,
		Size: t.Size, Offset: t.Offset, Text: t.Text, NextOffset: t.NextOffset,
	})
}

func (pages) ParseDecision(form url.Values, pending []runs.CallSummary) (loop.Decision, error) {
	return approvalpage.ParseDecision(form, pending)
}

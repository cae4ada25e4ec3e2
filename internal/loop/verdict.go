package loop

import "context"

// Verdict is what a runner's Policy says about one call of a turn. The
// whole turn is judged before any call runs: a turn holding a call whose
// verdict is VerdictRequireApproval suspends, and nothing of it runs until
// a decision arrives.
type Verdict struct {
	// Action is VerdictAllow, VerdictRequireApproval or VerdictDeny.
	Action VerdictAction
	// Rule names the policy rule that decided (recorded on the pending
	// call, in events and shown to approvers).
	Rule string
	// Message is the denial told to the model (VerdictDeny).
	Message string
	// Approval says who must approve and how (VerdictRequireApproval; nil:
	// the run's approvers, one approval).
	Approval *ApprovalRule
	// ApprovedBy, with VerdictAllow, names who approved the call in advance
	// (an approver's remember: "run"); recorded as approved_by_rule.
	ApprovedBy string
	// Description, with VerdictAllow or VerdictDeny, is what the rule is
	// for, shown to approvers of a turn the call is part of
	// (PendingCall.RuleDescription); a held call's is Approval.Description.
	Description string
}

// VerdictAction is a Policy's answer for one call.
type VerdictAction string

// The verdict actions.
const (
	// VerdictAllow runs the call without asking anyone.
	VerdictAllow VerdictAction = "allow"
	// VerdictRequireApproval holds the turn until a human decides.
	VerdictRequireApproval VerdictAction = "require_approval"
	// VerdictDeny never runs the call: it gets a denial result carrying the
	// rule's message, and no human is asked.
	VerdictDeny VerdictAction = "deny"
)

// ApprovalRule is who must approve a call and how, as the policy rule
// that required the approval says. The loop only carries it (in the
// pending call, through the suspended state) to whoever checks decisions.
type ApprovalRule struct {
	// Approvers replace the run's approvers for this call (principals or
	// "group:<name>"); empty: the run's.
	Approvers []string `json:"approvers,omitempty"`
	// RequiredApprovals is how many distinct persons must approve (0 or 1: one).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// FourEyes: the run's initiator never decides this call.
	FourEyes bool `json:"four_eyes,omitempty"`
	// AlwaysAsk: an approver cannot approve the tool for the rest of the run.
	AlwaysAsk bool `json:"always_ask,omitempty"`
	// Description says what the rule is for, for approvers.
	Description string `json:"description,omitempty"`
}

// PolicyQuery is what a runner's Policy is asked about one call.
type PolicyQuery struct {
	// Call is the planned call; NeedsApproval holds the tool's own trigger
	// (approval marker, write effect, argument policy).
	Call PendingCall
	// Definition is the call's tool.
	Definition Definition
	// RememberedBy names who approved this tool for the rest of the run
	// (Options.Remembered), "" when nobody did. The Policy decides whether
	// that approval covers the call (VerdictAllow with ApprovedBy).
	RememberedBy string
}

// Policy decides each call of a turn once the tool's own trigger is known.
type Policy func(ctx context.Context, q PolicyQuery) Verdict

// RememberRun is the CallDecision.Remember value that approves the call's
// tool for the rest of the run.
const RememberRun = "run"

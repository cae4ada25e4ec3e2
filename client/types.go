package client

import (
	"encoding/json"
	"time"
)

// Status is where a run stands.
type Status string

// The statuses of a run. COMPLETED, FAILED, CANCELLED and EXPIRED are
// terminal.
const (
	StatusQueued    Status = "QUEUED"
	StatusRunning   Status = "RUNNING"
	StatusWaiting   Status = "WAITING_FOR_APPROVAL"
	StatusResuming  Status = "RESUMING"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
	StatusExpired   Status = "EXPIRED"
	// StatusWaitingForToolResults: the run waits for the caller to execute
	// its client tools and submit the results (Run.ToolResults,
	// Client.SubmitToolResults).
	StatusWaitingForToolResults Status = "WAITING_FOR_TOOL_RESULTS"
)

// Terminal reports whether s ends the run.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// Effect is a tool's declared effect.
type Effect string

// The effects.
const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
)

// Action is what a decision does with a turn or a call.
type Action string

// The actions; edit is per call only.
const (
	Approve Action = "approve"
	Deny    Action = "deny"
	Edit    Action = "edit"
)

// Block is one content block of a message: text uses Text; tool_use uses
// ID, Name and Input; tool_result uses ToolUseID, Content and IsError.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Message is one message of an opening conversation.
type Message struct {
	// Role is "user" or "assistant".
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// ClientTool is a tool the caller executes itself: the model calls it like
// any tool, behind the same approval gate, and its approved calls are
// handed to the caller (Run.ToolResults).
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Effect      Effect          `json:"effect"`
	// RequiresApproval asks for approval even for a read.
	RequiresApproval bool `json:"requires_approval,omitempty"`
}

// StartRunRequest is the body of POST /runs. Give Prompt or Messages, not
// both, and at least one approver.
type StartRunRequest struct {
	Prompt   string    `json:"prompt,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	System   string    `json:"system,omitempty"`
	// Model must be one of the deployment's allowed models; empty: the
	// configured model.
	Model string `json:"model,omitempty"`
	// AllowedTools limits the tools the model may call; nil: all of them.
	// A non-nil empty slice is sent as [] and refused by the API (422),
	// not dropped: it does not mean "all".
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Approvers may decide the run: e-mail addresses get approval links,
	// other principals (IAM ARNs, local names) decide through the API.
	Approvers []string `json:"approvers"`
	// ApprovalTTLSeconds is the approval window (60 s to 7 days; 0: the
	// deployment's default).
	ApprovalTTLSeconds int64 `json:"approval_ttl_seconds,omitempty"`
	MaxIterations      int   `json:"max_iterations,omitempty"`
	MaxTokens          int64 `json:"max_tokens,omitempty"`
	MaxOutputTokens    int   `json:"max_output_tokens,omitempty"`
	// DenialEndsRun ends the run when any call is denied.
	DenialEndsRun bool `json:"denial_ends_run,omitempty"`
	// FourEyes forbids the initiator to decide, even when listed. An
	// explicit false where the deployment policy requires four-eyes is 422.
	FourEyes *bool             `json:"four_eyes,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`

	// ClientTools are tools the caller executes; ToolResultsTTLSeconds is
	// how long it has to submit their results (10 s to 7 days; 0: 1 h);
	// ToolExecutors may submit them besides the initiator: principals, or
	// "group:<name>" for the members of a directory group at the time of
	// the submission.
	ClientTools           []ClientTool `json:"client_tools,omitempty"`
	ToolResultsTTLSeconds int64        `json:"tool_results_ttl_seconds,omitempty"`
	ToolExecutors         []string     `json:"tool_executors,omitempty"`
	// WebhookURL and WebhookEvents ask for signed webhooks (see the
	// README's "Webhooks"); a deployment without a signing secret, or a
	// refused target, answers 422. WebhookEvents nil means every event
	// type; a non-nil empty slice is sent as [] and refused (422).
	WebhookURL    string   `json:"webhook_url,omitempty"`
	WebhookEvents []string `json:"webhook_events,omitempty"`
	// RequiredApprovals is how many distinct persons must approve each call
	// that needs approval; it may only tighten the deployment policy.
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// RequireApproval lists tool patterns whose calls need approval in
	// this run even where the deployment policy allows them.
	RequireApproval []string `json:"require_approval,omitempty"`
}

// Bool returns a pointer to b (for StartRunRequest.FourEyes).
func Bool(b bool) *bool { return &b }

// ApprovalRule is who must approve a call and how, as its policy rule says.
type ApprovalRule struct {
	// Approvers replace the run's for this call (principals or group:<name>).
	Approvers []string `json:"approvers,omitempty"`
	// RequiredApprovals is how many distinct persons must approve.
	RequiredApprovals int  `json:"required_approvals,omitempty"`
	FourEyes          bool `json:"four_eyes,omitempty"`
	// AlwaysAsk: the tool cannot be approved for the rest of the run.
	AlwaysAsk   bool   `json:"always_ask,omitempty"`
	Description string `json:"description,omitempty"`
	// Approvals, ApprovedBy, StillNeeded and DeniedBy are the call's vote
	// progress while votes decide its turn (Run.Voting; nil and ""
	// otherwise): how many distinct persons approved it so far and who,
	// the approvals it still needs (0 once approved or denied), who
	// denied it.
	Approvals   *int     `json:"approvals,omitempty"`
	ApprovedBy  []string `json:"approved_by,omitempty"`
	StillNeeded *int     `json:"still_needed,omitempty"`
	DeniedBy    string   `json:"denied_by,omitempty"`
}

// Counters are a run's running totals.
type Counters struct {
	Iterations   int64 `json:"iterations"`
	ModelCalls   int64 `json:"model_calls"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	ToolCalls    int64 `json:"tool_calls"`
}

// PendingCall is one tool call of the held turn.
type PendingCall struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Input is the call's JSON arguments; when InputTruncated, a shortened
	// copy (long strings cut, ending in "…") or nil.
	Input json.RawMessage `json:"input,omitempty"`
	// InputSize is the length in bytes of the whole input.
	InputSize int `json:"input_size,omitempty"`
	// InputTruncated says Input is not the whole input.
	InputTruncated bool `json:"input_truncated,omitempty"`
	// NeedsApproval is false for read-only siblings, which run on resume.
	NeedsApproval bool   `json:"needs_approval"`
	Effect        Effect `json:"effect,omitempty"`
	// Preview is a human-readable preview of a write (a unified diff for
	// the document tools); when PreviewTruncated, its beginning.
	Preview string `json:"preview,omitempty"`
	// PreviewSize is the length in bytes of the whole preview.
	PreviewSize int `json:"preview_size,omitempty"`
	// PreviewTruncated says Preview is not the whole preview.
	PreviewTruncated bool `json:"preview_truncated,omitempty"`
	// Rule is the policy rule that decided the call ("default": none matched).
	Rule string `json:"rule,omitempty"`
	// Approval is who must approve the call as its rule says (nil: the
	// run's approvers, one approval).
	Approval *ApprovalRule `json:"approval,omitempty"`
	// RuleDescription is what the rule that lets the call run without
	// approval, or denied it, is for; a held call's is Approval.Description.
	RuleDescription string `json:"rule_description,omitempty"`
	// Denied is the policy's denial: the call never runs.
	Denied string `json:"denied,omitempty"`
	// Rejected is why the call cannot run at all (an unknown tool, an
	// input its schema refuses): the model gets this error whatever the
	// decision (but for an edit that gives a held call a valid input).
	Rejected string `json:"rejected,omitempty"`
	// ApprovedBy names who approved the tool for the rest of the run.
	ApprovedBy string `json:"approved_by,omitempty"`
	// DefinitionUnverified is set when the tool's server could not be
	// asked for its definition as the turn was held: the call is shown on
	// the definition listed before, which may be stale.
	DefinitionUnverified *UnverifiedDefinition `json:"definition_unverified,omitempty"`
}

// UnverifiedDefinition says why a held call's tool definition could not
// be checked against its server when the turn was held, and when the
// definition shown was listed.
type UnverifiedDefinition struct {
	// Reason says in a few words why the listing failed ("the connection
	// was refused", "no answer in time", ...).
	Reason string `json:"reason"`
	// ListedAt is when the definition shown was listed (zero: unknown).
	ListedAt time.Time `json:"listed_at,omitzero"`
}

// HeldCallText is one page of the whole preview or input of a pending
// call, or of the input of a handed-over client call (GET
// /runs/{id}/calls/{call_id}).
type HeldCallText struct {
	RunID string `json:"run_id"`
	// SuspensionID and TurnDigest name the held turn of a pending call.
	SuspensionID string `json:"suspension_id,omitempty"`
	TurnDigest   string `json:"turn_digest,omitempty"`
	// ToolResultsID names the hand-over of a handed-over call.
	ToolResultsID string `json:"tool_results_id,omitempty"`
	CallID        string `json:"call_id"`
	Tool          string `json:"tool"`
	// Part is "preview" or "input".
	Part string `json:"part"`
	// Size is the whole part's length in bytes; Offset where Text begins.
	Size   int    `json:"size"`
	Offset int    `json:"offset"`
	Text   string `json:"text"`
	// NextOffset is where the next page begins; nil on the last page.
	NextOffset *int `json:"next_offset,omitempty"`
}

// Pending is what waits for approval.
type Pending struct {
	SuspensionID string `json:"suspension_id"`
	// TurnDigest binds a decision to exactly these calls.
	TurnDigest string        `json:"turn_digest"`
	Deadline   time.Time     `json:"deadline"`
	Calls      []PendingCall `json:"calls"`
}

// CallDecision decides one call held for approval (PendingCall.NeedsApproval).
// Deny or Edit of a call that needs none is refused (CodeUnprocessable);
// Approve of one, which runs anyway, is accepted.
type CallDecision struct {
	CallID string `json:"call_id"`
	Action Action `json:"action"`
	// Message is the reason of a denial (shown to the model).
	Message string `json:"message,omitempty"`
	// Input holds the edited arguments with Edit.
	Input json.RawMessage `json:"input,omitempty"`
	// Remember "run" (with Approve or Edit) approves later calls of the
	// tool in this run.
	Remember string `json:"remember,omitempty"`
}

// Decision is a decision on a held turn: Action for the whole turn, or one
// CallDecision per call that needs approval (the calls that need none are
// left out: they run, or get their policy denial; only a whole-turn Deny
// stops them).
type Decision struct {
	TurnDigest string         `json:"turn_digest"`
	Action     Action         `json:"action,omitempty"`
	Message    string         `json:"message,omitempty"`
	Calls      []CallDecision `json:"calls,omitempty"`
}

// ApproveTurn approves every call of the turn with the given digest.
func ApproveTurn(digest string) Decision { return Decision{TurnDigest: digest, Action: Approve} }

// DenyTurn denies every call of the turn with the given digest.
func DenyTurn(digest, message string) Decision {
	return Decision{TurnDigest: digest, Action: Deny, Message: message}
}

// RecordedDecision is a decision as recorded on the run. By, Via and At
// are the decider's; when votes decided it (a quorum, or calls no one
// person could decide together) those of the vote that completed the turn, while Deciders
// names everyone whose vote decided a held call and DecidedCalls who
// decided each.
type RecordedDecision struct {
	By string `json:"by"`
	// Via is "api" or "link".
	Via          string        `json:"via"`
	At           time.Time     `json:"at"`
	Decision     Decision      `json:"decision"`
	Deciders     []string      `json:"deciders,omitempty"`
	DecidedCalls []DecidedCall `json:"decided_calls,omitempty"`
}

// DecidedCall is who decided one held call by votes: the voters
// whose approvals approved it (Action approve; Edit when its one approval
// was an edit, which the decision runs with), or the one whose denial
// denied it (Action deny).
type DecidedCall struct {
	CallID string   `json:"call_id"`
	Tool   string   `json:"tool"`
	Action Action   `json:"action"`
	By     []string `json:"by"`
}

// Output is the final output of a settled run.
type Output struct {
	Text string `json:"text,omitempty"`
	// TextTruncated is set when Text was cut to fit the run's row;
	// TextSize is then the whole text's size in bytes.
	TextTruncated bool   `json:"text_truncated,omitempty"`
	TextSize      int    `json:"text_size,omitempty"`
	Reason        string `json:"reason"`
	Detail        string `json:"detail,omitempty"`
}

// RunLinks are the run's routes, relative to the API's base URL.
type RunLinks struct {
	Self        string `json:"self"`
	Events      string `json:"events"`
	Decision    string `json:"decision"`
	Cancel      string `json:"cancel"`
	ToolResults string `json:"tool_results,omitempty"`
}

// Vote is one person's vote on a suspension that votes decide (a quorum,
// or calls no one person may decide together: Run.Voting).
type Vote struct {
	// By is the voter as they authenticated; Person who the vote counted
	// for, as Deciders and DecidedCalls name voters: the directory
	// person's id, whichever alias they voted with (else the canonical
	// principal).
	By     string `json:"by"`
	Person string `json:"person,omitempty"`
	// Action and Message are a whole-turn vote's (none for a per-call vote).
	Action  Action `json:"action,omitempty"`
	Message string `json:"message,omitempty"`
	// Calls are the voter's choices, one per held call they may decide
	// (none on a vote recorded before votes were per call: its Action is
	// on every held call).
	Calls []VoteChoice `json:"calls,omitempty"`
	At    time.Time    `json:"at"`
	Via   string       `json:"via"`
}

// VoteChoice is one voter's choice on one held call: approve, deny with
// a message, or where each held call needs one approval from its own
// approvers, Edit with the edited Input (which approves the call with it).
type VoteChoice struct {
	CallID  string          `json:"call_id"`
	Action  Action          `json:"action"`
	Message string          `json:"message,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
}

// ClientCall is a client-tool call handed to the caller, with its final
// (possibly edited) input. A run shows a long input shortened
// (InputTruncated): Client.ClientCallInput returns the whole of it.
type ClientCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the final input; when InputTruncated, a shortened copy
	// (long strings cut, ending in "…") or nil.
	Input json.RawMessage `json:"input,omitempty"`
	// InputSize is the length in bytes of the whole input.
	InputSize int `json:"input_size,omitempty"`
	// InputTruncated says Input is not the whole input.
	InputTruncated bool `json:"input_truncated,omitempty"`
	// InputURL, when InputTruncated, is the API path of the whole input.
	InputURL string `json:"input_url,omitempty"`
	// Edited says an approver changed the input the model gave.
	Edited bool `json:"edited,omitempty"`
}

// PendingToolResults are the client calls the caller must execute (only
// while WAITING_FOR_TOOL_RESULTS), the id to submit their results for and
// the deadline.
type PendingToolResults struct {
	ToolResultsID string       `json:"tool_results_id"`
	Deadline      time.Time    `json:"deadline"`
	Calls         []ClientCall `json:"calls"`
}

// Run is an agent run.
type Run struct {
	ID                string            `json:"id"`
	Status            Status            `json:"status"`
	TerminationReason string            `json:"termination_reason,omitempty"`
	Version           int64             `json:"version"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
	Initiator         string            `json:"initiator"`
	Approvers         []string          `json:"approvers"`
	Counters          Counters          `json:"counters"`
	Pending           *Pending          `json:"pending,omitempty"`
	Decision          *RecordedDecision `json:"decision,omitempty"`
	Output            *Output           `json:"output,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	Links             RunLinks          `json:"links"`

	// Webhook is the run's webhook subscription (nil: none).
	Webhook *WebhookSubscription `json:"webhook,omitempty"`

	// ToolResults are the client calls to execute (only while
	// WAITING_FOR_TOOL_RESULTS).
	ToolResults *PendingToolResults `json:"tool_results,omitempty"`
	// Votes are the votes cast on the current suspension when votes
	// decide it; VotesNeeded is the approvals still missing. Voting, while
	// the run waits, says votes decide the held turn, call by call: under a
	// quorum, or when no one person may decide every held call (each call
	// is then decided by its own approvers, one approval each).
	Votes       []Vote `json:"votes,omitempty"`
	VotesNeeded *int   `json:"votes_needed,omitempty"`
	Voting      bool   `json:"voting,omitempty"`
}

// WebhookSubscription is where a run's caller is told about the run; the
// attempts are webhook_attempt events.
type WebhookSubscription struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
	// PendingDeliveries are neither delivered nor given up yet.
	PendingDeliveries int `json:"pending_deliveries"`
}

// Event is one step of a run's audit trail.
type Event struct {
	RunID string    `json:"run_id"`
	Seq   int64     `json:"seq"`
	Type  string    `json:"type"`
	At    time.Time `json:"at"`
	Actor string    `json:"actor,omitempty"`
	// Data depends on Type.
	Data json.RawMessage `json:"data,omitempty"`
}

// EventPage is one page of events; Next is the path of the next page, empty
// on the last.
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next,omitempty"`
}

// ToolResult is the result of one client-tool call.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolResults is the body of POST /runs/{id}/tool-results: exactly one
// result per handed-over call, for the run's current tool-results id.
type ToolResults struct {
	ToolResultsID string       `json:"tool_results_id"`
	Results       []ToolResult `json:"results"`
}

// PendingApproval is one entry of the caller's approval inbox: a run
// waiting for the caller's decision.
type PendingApproval struct {
	RunID        string    `json:"run_id"`
	SuspensionID string    `json:"suspension_id"`
	TurnDigest   string    `json:"turn_digest,omitempty"`
	Initiator    string    `json:"initiator"`
	Purpose      string    `json:"purpose"`
	Tools        []string  `json:"tools"`
	Deadline     time.Time `json:"deadline"`
	SuspendedAt  time.Time `json:"suspended_at"`
	// VotesNeeded is the suspension's quorum (the most approvals from
	// distinct persons any held call needs); VotesMissing the most any
	// held call not yet approved or denied still needs (Run.VotesNeeded
	// while the run waits). VotesMissing is 0 only from a server before
	// the field. Approvals is how many distinct persons approved a held
	// call so far (nil from a server before the field, or for an entry
	// written before it until the next vote).
	VotesNeeded  int  `json:"votes_needed"`
	VotesMissing int  `json:"votes_missing"`
	Approvals    *int `json:"approvals,omitempty"`
}

// ApprovalPage is one page of the inbox; NextCursor is empty on the last.
type ApprovalPage struct {
	Approvals  []PendingApproval `json:"approvals"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

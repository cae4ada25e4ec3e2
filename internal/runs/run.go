package runs

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
)

// Status is where a run stands in its life cycle.
type Status string

// The statuses of a run. COMPLETED, FAILED, CANCELLED and EXPIRED are
// terminal: no transition leaves them.
const (
	StatusQueued   Status = "QUEUED"
	StatusRunning  Status = "RUNNING"
	StatusWaiting  Status = "WAITING_FOR_APPROVAL"
	StatusResuming Status = "RESUMING"
	// StatusWaitingForToolResults: the run handed its approved client
	// calls to its caller and waits for their results.
	StatusWaitingForToolResults Status = "WAITING_FOR_TOOL_RESULTS"
	StatusCompleted             Status = "COMPLETED"
	StatusFailed                Status = "FAILED"
	StatusCancelled             Status = "CANCELLED"
	StatusExpired               Status = "EXPIRED"
)

// transitions lists, for each status, the statuses a run may move to.
var transitions = map[Status][]Status{
	StatusQueued:                {StatusRunning, StatusFailed, StatusCancelled},
	StatusRunning:               {StatusWaiting, StatusWaitingForToolResults, StatusResuming, StatusCompleted, StatusFailed, StatusCancelled},
	StatusWaiting:               {StatusResuming, StatusExpired, StatusCancelled},
	StatusResuming:              {StatusRunning, StatusFailed, StatusCancelled},
	StatusWaitingForToolResults: {StatusResuming, StatusExpired, StatusCancelled},
}

// Valid reports whether s is one of the nine statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusWaiting, StatusResuming, StatusWaitingForToolResults,
		StatusCompleted, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// Terminal reports whether s ends the run.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// CanTransition reports whether a run in status from may move to status to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Ways a decision can arrive, recorded in Run.DecidedVia.
const (
	ViaAPI  = "api"  // POST /runs/{id}/decision by an authenticated caller
	ViaLink = "link" // POST /approvals/{token} from an approval e-mail
)

// NotificationState tells whether approvers were told about the current
// suspension.
type NotificationState string

// The notification states of a waiting run.
const (
	NotificationPending NotificationState = "pending" // suspended, nobody told yet
	NotificationSent    NotificationState = "sent"    // approvers were told
	NotificationFailed  NotificationState = "failed"  // telling them failed; the API still works
)

// FirstNoticeGrace is how long after a suspension the worker that held
// the turn has to record its first notification (the approval mail it
// sends right after the suspension's write) before the sweep sends that
// mail itself (Run.FirstNoticeDue, Notice.Recovered): its worker died in
// between, or its record was lost. Two minutes is longer than a live
// worker takes to mail the at most MaxApprovers approvers a suspension
// lists, one send after another (well under a second each; seconds when
// the mail service throttles and a send is retried), which it may start
// only within this time by its own clock (so no worker starts a first mail
// after the sweep took it over); the sweep, every minute on AWS, then
// mails within about three minutes of a hold whose worker died, where the
// 80% reminder was the first mail before (19.2 hours into the default
// 24-hour window).
const FirstNoticeGrace = 2 * time.Minute

// CallSummary is the run row's copy of one loop.PendingCall of the held
// turn, with its preview: enough for the API, the approval page and the
// approval mail to show the call, and to validate a per-call decision,
// without loading the suspended state. It is bounded (SummarizeCalls): a
// long input or preview is shortened here and marked, and the whole of
// it stays in the suspended state (Store.PendingCallText).
type CallSummary struct {
	// ID is the tool_use id of the call.
	ID string `json:"id"`
	// Tool is the tool name (loop.PendingCall.Name).
	Tool string `json:"tool"`
	// Input is the call's JSON arguments; when InputTruncated, a shortened
	// copy (long strings cut, ending in "…") or absent when even that is too
	// large.
	Input json.RawMessage `json:"input,omitempty"`
	// InputSize is the length in bytes of the call's whole input (JSON).
	InputSize int `json:"input_size,omitempty"`
	// InputTruncated says Input is not the whole input.
	InputTruncated bool `json:"input_truncated,omitempty"`
	// NeedsApproval is false for read-only siblings that run on resume.
	NeedsApproval bool `json:"needs_approval"`
	// Effect is the tool's declared effect.
	Effect loop.Effect `json:"effect,omitempty"`
	// Preview is a human-readable preview of a write, if the tool gives one;
	// when PreviewTruncated, its beginning followed by a line saying so.
	Preview string `json:"preview,omitempty"`
	// PreviewSize is the length in bytes of the whole preview.
	PreviewSize int `json:"preview_size,omitempty"`
	// PreviewTruncated says Preview is not the whole preview.
	PreviewTruncated bool `json:"preview_truncated,omitempty"`
	// Rule names the policy rule that decided the call ("default" when no
	// rule matched), shown to approvers.
	Rule string `json:"rule,omitempty"`
	// Approval is who must approve the call and how, as its rule says (nil:
	// the run's approvers, one approval).
	Approval *loop.ApprovalRule `json:"approval,omitempty"`
	// RuleDescription is what the rule that lets the call run without
	// approval, or denied it, is for (loop.PendingCall.RuleDescription),
	// shown to approvers; a held call's is Approval.Description.
	RuleDescription string `json:"rule_description,omitempty"`
	// Denied is the policy's denial: the call never runs and needs no decision.
	Denied string `json:"denied,omitempty"`
	// Rejected is why the call cannot run at all (an unknown tool, an input
	// its schema refuses, an input that is not one I-JSON object:
	// loop.PendingCall.Rejected), cut to
	// SummaryRejectedBytes: whatever the decision it gets an error result
	// (but for an edit that gives a held call a valid input).
	Rejected string `json:"rejected,omitempty"`
	// ApprovedBy names who approved the call's tool for the rest of the run
	// (remember: "run"): it runs without a decision.
	ApprovedBy string `json:"approved_by,omitempty"`
	// DefinitionUnverified says that the call's tool could not be checked
	// against its source when the turn was held: approvers review the
	// definition this process listed before, at ListedAt
	// (loop.PendingCall.DefinitionUnverified).
	DefinitionUnverified *loop.UnverifiedDefinition `json:"definition_unverified,omitempty"`
}

// PendingCall returns the loop's view of the summarized call: what
// loop.ValidateDecision needs to check a decision on the held turn.
func (c CallSummary) PendingCall() loop.PendingCall {
	return loop.PendingCall{
		ID: c.ID, Name: c.Tool, Input: c.Input, NeedsApproval: c.NeedsApproval, Effect: c.Effect,
		Rule: c.Rule, Approval: cloneApproval(c.Approval), Denied: c.Denied, ApprovedBy: c.ApprovedBy,
		Rejected: c.Rejected, RuleDescription: c.RuleDescription,
	}
}

// RequiredApprovals is how many distinct persons must approve the call
// (at least 1 for a call that needs approval, 0 otherwise).
func (c CallSummary) RequiredApprovals() int {
	if !c.NeedsApproval {
		return 0
	}
	if c.Approval != nil && c.Approval.RequiredApprovals > 1 {
		return c.Approval.RequiredApprovals
	}
	return 1
}

func cloneApproval(a *loop.ApprovalRule) *loop.ApprovalRule {
	if a == nil {
		return nil
	}
	c := *a
	c.Approvers = slices.Clone(a.Approvers)
	return &c
}

// StateRef points at a suspended-state blob: its key in the StateStore, the
// SHA-256 (hex) of the uncompressed JSON, and its stored (compressed) size.
type StateRef struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// IsZero reports whether r points at nothing.
func (r StateRef) IsZero() bool { return r.Key == "" }

// Run is one AgentRun row. Store returns copies; changing one changes nothing
// until it is passed back to a Store method, which only reads its identity,
// status and version (and guards such as lease owner and suspension id).
type Run struct {
	ID string `json:"id"`
	// Status is the life-cycle status; Reason is set when Status is terminal.
	Status Status                 `json:"status"`
	Reason loop.TerminationReason `json:"reason,omitempty"`
	// Version increases by one with every write; each transition is
	// conditional on it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	Counters loop.Counters `json:"counters"`
	// Initiator is the authenticated caller who started the run.
	Initiator string `json:"initiator"`
	// InitiatorPerson and InitiatorKeys are who the initiator was in the
	// directory when the run started, kept as a vote keeps its voter
	// (Vote.Person, Vote.Keys): "person:<id>" ("" for a principal without
	// an entry) and that person's alias keys (at most MaxVoteKeys).
	// Four-eyes refuses anyone the directory in force links to them
	// (Run.initiatorVote), so that moving or dropping the alias the run
	// was started with does not let its initiator decide it; a person
	// renamed since is theirs when their entry lists the id among its
	// former ids (RecordedKey).
	InitiatorPerson string   `json:"initiator_person,omitempty"`
	InitiatorKeys   []string `json:"initiator_keys,omitempty"`
	// Approvers may decide the run's suspensions (and get approval links):
	// principals and "group:<name>" entries, as the run named them.
	Approvers []string `json:"approvers,omitempty"`
	// RuleApprovers are the approver entries policy rules named for the
	// calls of every turn the run held (RuleApprovers), in the order first
	// seen: the people asked keep read access once the run moves on.
	RuleApprovers []string `json:"rule_approvers,omitempty"`
	// FourEyes forbids the initiator's person, by any alias, to decide.
	FourEyes bool `json:"four_eyes,omitempty"`
	// Purpose is a short summary of what the run is for (approval mail and
	// page).
	Purpose string `json:"purpose,omitempty"`
	// Metadata is the caller's own labels, returned as given.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Request is the opaque start request the worker needs (prompt or
	// messages, model, options), as JSON. Nothing but the worker reads it:
	// what the API and the approval links need is in the typed fields.
	Request json.RawMessage `json:"request,omitempty"`

	// SuspensionID, TurnDigest and PendingCalls describe the current (or
	// last) suspension.
	SuspensionID string        `json:"suspension_id,omitempty"`
	TurnDigest   string        `json:"turn_digest,omitempty"`
	PendingCalls []CallSummary `json:"pending_calls,omitempty"`
	// SuspendedAt is when the current (or last) suspension began.
	SuspendedAt time.Time `json:"suspended_at,omitzero"`
	// InboxKeys are the approver keys whose inbox lists the current
	// suspension (see InboxEntry); cleared when the run leaves it.
	InboxKeys []string `json:"inbox_keys,omitempty"`
	// InboxDropped are the keys of those asked about the current
	// suspension (an inbox entry, and a link when they have a mailbox)
	// whose entries a quorum check removed because the directory in force
	// lets them decide no held call still open (Store.ReviseDeciders): a
	// later check that finds them able again lists them again, without a
	// new link (theirs still works). At most MaxApprovers, the latest;
	// cleared when the run leaves the suspension.
	InboxDropped []string `json:"inbox_dropped,omitempty"`
	// State points at the suspended state blob; zero when there is none.
	State StateRef `json:"state,omitzero"`
	// Checkpoint points at the loop's latest checkpoint (loop.Checkpoint):
	// where a new worker continues the run. Set when a segment ends before
	// its worker's deadline and in the write that records a write call's
	// result; cleared by a suspension and when the run ends.
	Checkpoint StateRef `json:"checkpoint,omitzero"`

	// LeaseOwner holds the run while it executes, until LeaseUntil.
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// PendingEffect is the id of a write call that may have started and
	// whose result is not recorded yet (the fence).
	PendingEffect string `json:"pending_effect,omitempty"`
	// PendingIdempotent, written with the fence, says the fenced call's
	// tool is idempotent under the call's idempotency key and the run's
	// checkpoint (or suspended state) reaches the call again: a new worker
	// may make it again with the same key instead of failing the run.
	PendingIdempotent bool `json:"pending_idempotent,omitempty"`
	// WroteSinceClaim is set when a write call of the current lease holder
	// took effect (its fence was cleared as done) and no checkpoint written
	// since holds its result; a claim or a checkpoint resets it. The fenced
	// call of an idempotent tool that the stored position reaches
	// (PendingIdempotent) does not set it: a replay makes it again under
	// its key, which applies it once. A run whose
	// worker vanished with it set is never replayed: a replay would execute
	// that write again. It is written in the same write that clears the
	// fence, never derived from events.
	WroteSinceClaim bool `json:"wrote_since_claim,omitempty"`
	// Reclaims counts the times in a row the run was taken over from a
	// vanished worker (a reclaimed claim) or dispatched again to a worker
	// that never wrote (Redispatch) without getting further: a checkpoint
	// written at a segment's end or with a write's result, a suspension or
	// a hand-over resets it. At MaxReclaims the run is not taken over or
	// dispatched again: it ends FAILED/worker_lost.
	Reclaims int `json:"reclaims,omitempty"`

	// unwritten is what a worker's segment holds for its next write (the
	// loop steps it made since its last write, AddStep); that write records
	// it first. Never stored, never cloned: the row as a worker sees it.
	unwritten *unwritten

	// ApprovalDeadline is when a waiting run expires; RemindAt when approvers
	// get a reminder (zero: none).
	ApprovalDeadline time.Time         `json:"approval_deadline,omitzero"`
	RemindAt         time.Time         `json:"remind_at,omitzero"`
	ReminderSent     bool              `json:"reminder_sent,omitempty"`
	Notification     NotificationState `json:"notification,omitempty"`
	// QuorumCheckAt, while the run waits, is when the sweep next checks
	// that each held call not yet approved or denied can still get the
	// approvals it needs from the directory in force (zero: never; see
	// CheckOpenApprovals and Store.EndUnmeetable).
	QuorumCheckAt time.Time `json:"quorum_check_at,omitzero"`
	// QuorumLost, while the run waits, are the held calls a quorum check
	// found can certainly no longer get their approvals, each with when a
	// check first found it so (none: the last check found every call it
	// could check able to get them). The sweep ends the run only for a
	// call that a check at least its check interval
	// (service.Sweeper.QuorumCheckEvery, an hour by default) after its mark
	// finds still so: a directory deployed by mistake and fixed within the
	// interval ends nothing, and neither does a second mistake that takes out
	// another call. Written by Store.ReviseDeciders (from a QuorumFinding);
	// cleared when the run leaves the suspension.
	QuorumLost []LostCall `json:"quorum_lost,omitempty"`
	// MailRetry, while the run waits, are the mailboxes whose approval mail
	// failed where no retry of the whole notification follows (the link a
	// quorum check mailed to one it asked, the reminder), and that the
	// sweep mails once more at MailRetryAt, each with a fresh link: nobody
	// else is mailed, no reminder is sent again, and a mail that fails
	// then is not retried (see Notice.Retry). A reminder or a retry of the
	// first notification mails them too and clears the list. Reset by
	// every suspension.
	MailRetry   []string  `json:"mail_retry,omitempty"`
	MailRetryAt time.Time `json:"mail_retry_at,omitzero"`
	// MailRetryReminders are those of MailRetry whose failed mail was the
	// reminder: their retry is mailed as the reminder (Notice.
	// RetryReminder). Cleared with MailRetry.
	MailRetryReminders []string `json:"mail_retry_reminders,omitempty"`
	// NoticeSeq is the event sequence number the current suspension kept
	// for the notified event of its first notification (Suspension.Notify),
	// until that event takes it (0: none kept, or taken). The event takes
	// it also once the run has moved on (RecordNotification), so the trail
	// records every approval mail that was sent.
	NoticeSeq int64 `json:"notice_seq,omitempty"`

	// VotesNeeded is how many distinct persons must approve the current
	// suspension (0 or 1: one approval for each call); Votes are the votes
	// cast on it so far, in order. PerCallVotes says the suspension takes
	// votes, call by call (see Voting): under a quorum (which VotesNeeded
	// says to a release before the flag), and although each held call
	// needs one approval when no one person could decide every held call
	// as the turn was held (their approvers had nobody in common), so that
	// each call is decided by its own. All three are reset by every
	// suspension.
	VotesNeeded  int    `json:"votes_needed,omitempty"`
	PerCallVotes bool   `json:"per_call_votes,omitempty"`
	Votes        []Vote `json:"votes,omitempty"`

	// Decision is the decision on the current suspension (nil: none yet),
	// with who made it, how (ViaAPI or ViaLink) and when. When votes
	// decide it (Voting) DecidedBy, DecidedVia and DecidedAt are those of
	// the vote that completed the turn; who decided each held call is in
	// the Votes (DecidedCalls, DecidingVoters), which the row keeps until
	// the next suspension.
	Decision   *loop.Decision `json:"decision,omitempty"`
	DecidedBy  string         `json:"decided_by,omitempty"`
	DecidedVia string         `json:"decided_via,omitempty"`
	DecidedAt  time.Time      `json:"decided_at,omitzero"`

	// Output is the final output (JSON) of a settled run.
	Output json.RawMessage `json:"output,omitempty"`
	// RetainUntil is when a terminal run gets purged.
	RetainUntil time.Time `json:"retain_until,omitzero"`

	// DueAt is the run's next deadline (approval expiry or reminder when
	// waiting, lease expiry when running, dispatch grace when queued or
	// resuming, retention when terminal); the due index is ordered by it.
	DueAt time.Time `json:"due_at,omitzero"`
	// WriteID is the id of the write that produced this version (32 hex
	// digits: random, or for a row that waits for a worker 8 random and a
	// digest of them and the row, SealWriteID). It lets Store recognise its
	// own write when a response was lost and a retry then failed its
	// condition, and a worker tell a job's row from an altered one.
	WriteID string `json:"write_id,omitempty"`
	// LastSeq is the sequence number of the run's last event.
	LastSeq int64 `json:"last_seq"`
	// TokenHashes lists approval tokens issued by rows written before the
	// adapters recorded a run's tokens under the run itself (RowStore.Write's
	// NewTokens): it is read and carried along, never added to, and purge
	// deletes its tokens with the rest. A list on the row that grew with
	// every suspension and reminder could take the row past DynamoDB's item
	// limit.
	TokenHashes []string `json:"token_hashes,omitempty"`

	// Webhook is where the caller is told about the run (nil: nowhere).
	Webhook *Subscription `json:"webhook,omitempty"`
	// Outbox holds the webhook deliveries not yet delivered or given up
	// (at most MaxOutbox).
	Outbox []OutboxEntry `json:"outbox,omitempty"`

	// ToolExecutors may submit the results of the run's client calls
	// besides its initiator: principals and "group:<name>" directory
	// groups, as the run named them (MaySubmitResults reads a group's
	// members when results are submitted).
	ToolExecutors []string `json:"tool_executors,omitempty"`
	// HandOver is the current (or last) hand-over of client calls to the
	// caller (nil: none yet).
	HandOver *HandOverRecord `json:"hand_over,omitempty"`
}

// Vote is one approver's vote on a suspension decided by votes (Run.Voting).
type Vote struct {
	// By is the voter as authenticated (or the link's approver).
	By string `json:"by"`
	// Person is who the vote counts for (identity.Subject.Key): one vote
	// per person, whatever alias they use. A person renamed since is
	// still this "person:<id>" when their entry lists the id among its
	// former ids (RecordedKey); reports keep naming the vote by it.
	Person string `json:"person"`
	// Keys are, for a directory person, the principal keys of their
	// aliases when they voted (at most MaxVoteKeys): should the directory
	// drop their entry, a vote as another of those principals is theirs
	// again (Vote.keys).
	Keys []string `json:"keys,omitempty"`
	// Action is what a release that knew only whole-turn votes reads: a
	// vote recorded before votes were per call has no Choices, and its
	// Action (approve or deny) applies to every held call. A per-call
	// vote's Action says only what such a reader may take from it without
	// approving more than the voter did: approve when it approves every
	// held call, deny when it denies any, "" otherwise (it counts for
	// nothing). Such a release rewriting the row drops Choices, and the
	// vote then reads that way here too: it never approves a call its
	// voter did not approve (Vote.TurnAction is the voter's own choice).
	Action loop.Action `json:"action,omitempty"`
	// Whole says the voter voted on the whole turn: the same choice, the
	// one in Choices, for every held call they may decide.
	Whole bool `json:"whole,omitempty"`
	// Message is a whole-turn vote's message (a denial's reason, or an
	// approval's note).
	Message string `json:"message,omitempty"`
	// Choices are the voter's choices (VoteChoice), one byte per held call
	// in PendingCalls order: 'a' approve, 'd' deny, '-' none (a call they
	// may not decide, or one that needs no approval); Reasons the messages
	// of its denials, one per 'd' in order (omitted when all are empty).
	// Kept this short because the row holds every vote: a held call's id
	// may be 256 bytes. A vote recorded before votes were per call has no
	// Choices: its Action applies to every held call. Where each held call
	// needs one approval (VotesTakeEdits) a choice may be 'e', edit: Edits
	// hold the edited inputs, one per 'e' in order, and an 'e' without
	// its input (a release before edits in votes rewrote the row) is no
	// choice.
	Choices string            `json:"choices,omitempty"`
	Reasons []string          `json:"reasons,omitempty"`
	Edits   []json.RawMessage `json:"edits,omitempty"`
	Via     string            `json:"via"`
	At      time.Time         `json:"at"`
}

// Voting reports whether the current (or last) suspension of r is
// decided by votes, call by call: a person votes on the held calls they
// may decide, each call is approved by the approvals it needs and denied
// by the first denial, and the run resumes once every held call is one or
// the other. That is so under a quorum (VotesNeeded above 1), when the
// turn was held with per-call votes (PerCallVotes), and whenever votes
// were cast on the suspension (only such a suspension takes any): a
// release before PerCallVotes that rewrites the row drops the flag but
// keeps the votes. Otherwise one decision decides the whole turn.
func (r *Run) Voting() bool {
	return r.VotesNeeded > 1 || r.PerCallVotes || len(r.Votes) > 0
}

// approves reports whether vote choice ch approves its call of r: an
// approval, or an edit of a call that needs one approval (the only edits
// Store.Decide takes, as Tally counts them).
func (r *Run) approves(ch VoteChoice) bool {
	if ch.Action == loop.ActionEdit {
		for _, t := range r.Tally() {
			if t.CallID == ch.CallID {
				return t.Needed == 1
			}
		}
		return false
	}
	return ch.Action == loop.ActionApprove
}

// MostApprovalsNeeded returns the most approvals from distinct persons a
// held call of the current suspension needs (1 when every call needs one,
// and when one decision decides the turn): the larger of VotesNeeded and
// what the held calls' own rules ask for.
func (r *Run) MostApprovalsNeeded() int {
	return max(r.VotesNeeded, VotesNeeded(r.PendingCalls))
}

// VotesTakeEdits reports whether a vote on r's held turn may edit the calls
// it decides: votes decide the turn (Voting) and each held call needs one
// approval (calls no one person may decide together), so the voter who
// decides a call decides it alone, as one decision would. Under a quorum
// an edit would change what the other approvers approved.
func (r *Run) VotesTakeEdits() bool {
	return r.Voting() && r.MostApprovalsNeeded() <= 1
}

// Approvals returns how many votes on the run's current suspension approve
// at least one held call (as it is, or edited where votes take edits):
// the number of distinct persons who approved (a person votes once per
// suspension).
func (r *Run) Approvals() int {
	n := 0
	for _, v := range r.Votes {
		for _, ch := range v.choices(r.PendingCalls) {
			if r.approves(ch) {
				n++
				break
			}
		}
	}
	return n
}

// VotesMissing returns how many approvals the current suspension still
// needs before the run resumes: when votes decide it (Voting), the most
// any held call that is neither approved nor denied still needs (0 once
// every held call is decided); otherwise 1.
func (r *Run) VotesMissing() int { return r.VotesMissingIn(nil) }

// VotesMissingIn is VotesMissing counted under dir, the directory in
// force (TallyIn).
func (r *Run) VotesMissingIn(dir *identity.Directory) int {
	if !r.Voting() {
		return max(1-r.Approvals(), 0)
	}
	n := 0
	for _, t := range r.TallyIn(dir) {
		n = max(n, t.StillNeeded())
	}
	return n
}

// Clone returns a deep copy of r, exact to nil and empty: a nil slice or
// map stays nil and an empty one empty (TestCloneIsDeepAndExact).
func (r *Run) Clone() *Run {
	if r == nil {
		return nil
	}
	c := *r
	c.unwritten = nil
	c.Approvers = slices.Clone(r.Approvers)
	c.InitiatorKeys = slices.Clone(r.InitiatorKeys)
	c.RuleApprovers = slices.Clone(r.RuleApprovers)
	c.Metadata = maps.Clone(r.Metadata)
	c.TokenHashes = slices.Clone(r.TokenHashes)
	c.InboxKeys = slices.Clone(r.InboxKeys)
	c.InboxDropped = slices.Clone(r.InboxDropped)
	c.QuorumLost = slices.Clone(r.QuorumLost)
	c.MailRetry = slices.Clone(r.MailRetry)
	c.MailRetryReminders = slices.Clone(r.MailRetryReminders)
	c.Votes = cloneVotes(r.Votes)
	c.Request = cloneRaw(r.Request)
	c.Decision = cloneDecision(r.Decision)
	c.Output = cloneRaw(r.Output)
	c.Webhook = cloneSubscription(r.Webhook)
	c.Outbox = cloneOutbox(r.Outbox)
	c.ToolExecutors = slices.Clone(r.ToolExecutors)
	c.HandOver = r.HandOver.clone()
	if r.PendingCalls != nil {
		c.PendingCalls = make([]CallSummary, len(r.PendingCalls))
		for i, p := range r.PendingCalls {
			p.Input = cloneRaw(p.Input)
			p.Approval = cloneApproval(p.Approval)
			if p.DefinitionUnverified != nil {
				u := *p.DefinitionUnverified
				p.DefinitionUnverified = &u
			}
			c.PendingCalls[i] = p
		}
	}
	return &c
}

// FirstNoticeDue is when the sweep sends the first approval mail of
// waiting run r's suspension itself (FirstNoticeGrace after the
// suspension): its worker was to mail the approvers (the suspension kept a
// number for the notified event, NoticeSeq) and has recorded no outcome
// yet. Zero when nothing of the kind is owed: the run does not wait for
// approval, its first notification is on record (sent or failed, by its
// worker or by the sweep: the number is taken), the reminder went out (it
// mailed everyone not yet voted, and took the notification as sent), or
// nobody was to be mailed. What is owed is the suspension's own mail, not
// a state: a quorum check that mailed those it asked takes the
// notification as sent (Store.ReviseDeciders), and those the hold listed
// are still owed theirs.
func (r *Run) FirstNoticeDue() time.Time {
	if r.Status != StatusWaiting || r.NoticeSeq == 0 || r.ReminderSent || r.SuspendedAt.IsZero() {
		return time.Time{}
	}
	return r.SuspendedAt.Add(FirstNoticeGrace)
}

// LeaseExpired reports whether the run's lease has run out at now.
func (r *Run) LeaseExpired(now time.Time) bool {
	return !now.Before(r.LeaseUntil)
}

// MaxReclaims is how many times in a row a run is taken over from a
// vanished worker without getting further (Run.Reclaims) before the sweep
// ends it FAILED/worker_lost instead: a step that kills its worker every
// time (a tool that crashes the process, a call that outlives every lease)
// does not hand the run from worker to worker for ever.
const MaxReclaims = 3

// Reclaimable reports whether a new worker may take the run over once its
// worker's lease expired: no write's outcome is unknown (no fence, or the
// fenced call is idempotent and reached again under its key), no write
// took effect that a new worker would make again, and the run has not been
// taken over MaxReclaims times in a row already. Otherwise the run ends
// (LostWorkerReason): an approved write runs at most once, and a run never
// goes from worker to worker for ever.
func (r *Run) Reclaimable() bool {
	return r.writeSafeToReplay() && r.Reclaims < MaxReclaims
}

func (r *Run) writeSafeToReplay() bool {
	return (r.PendingEffect == "" || r.PendingIdempotent) && !r.WroteSinceClaim
}

// LostWorkerReason is why a run whose worker vanished and that is not
// Reclaimable ends: interrupted_write when a write's outcome is unknown or
// a replay would make a write again, worker_lost when its workers kept
// vanishing at the same place (MaxReclaims).
func (r *Run) LostWorkerReason() loop.TerminationReason {
	if !r.writeSafeToReplay() {
		return loop.ReasonInterruptedWrite
	}
	return loop.ReasonWorkerLost
}

// HeldCalls returns the loop's view of the held turn's calls, for
// loop.ValidateDecision, which reads their ids, tools, whether they need
// approval and why one cannot run, never their inputs (a row's input may
// be shortened).
func (r *Run) HeldCalls() []loop.PendingCall {
	out := make([]loop.PendingCall, len(r.PendingCalls))
	for i, c := range r.PendingCalls {
		out[i] = c.PendingCall()
	}
	return out
}

// cloneRaw copies b; nil stays nil and empty stays empty.
func cloneRaw(b json.RawMessage) json.RawMessage { return slices.Clone(b) }

func cloneDecision(d *loop.Decision) *loop.Decision {
	if d == nil {
		return nil
	}
	c := *d
	if d.Calls != nil {
		c.Calls = make([]loop.CallDecision, len(d.Calls))
		for i, cd := range d.Calls {
			cd.Input = cloneRaw(cd.Input)
			c.Calls[i] = cd
		}
	}
	return &c
}

// Event types of the audit stream. The loop's steps recorded by RecordStep
// keep their step kind as the event type.
const (
	EventRunStarted   = "run_started"
	EventClaimed      = "claimed"
	EventRedispatched = "redispatched"
	EventReclaimed    = "reclaimed"
	EventCheckpointed = "checkpointed"
	EventContinued    = "continued"
	EventModelTurn    = string(loop.StepModelTurn)
	EventToolExecuted = string(loop.StepToolExecuted)
	EventToolDenied   = string(loop.StepToolDenied)
	EventSuspended    = "suspended"
	EventNotified     = "notified"
	EventReminded     = "reminded"
	EventDecision     = "decision"
	EventVote         = "vote"
	EventResumed      = "resumed"
	EventSettled      = "settled"
	EventCancelled    = "cancelled"
	EventExpired      = "expired"

	// EventDecidersChanged: a quorum check changed who is asked to decide
	// the held turn (DecidersEventData).
	EventDecidersChanged = "deciders_changed"
)

// DecisionEventData is the data of a decision event: the decision on one
// suspension and how it arrived (the decider is the event's actor: under a
// quorum, the voter whose vote completed the turn).
type DecisionEventData struct {
	SuspensionID string        `json:"suspension_id"`
	TurnDigest   string        `json:"turn_digest"`
	Via          string        `json:"via"`
	Decision     loop.Decision `json:"decision"`
	// Deciders and DecidedCalls are set under a quorum: the voters whose
	// votes decided a held call, in the order they voted
	// (Run.DecidingVoters), and who decided each held call
	// (Run.DecidedCalls). Where they would make the event larger than
	// maxDecidersSize, DecidedCalls is left out and Deciders cut short
	// (DecidersCut): the vote events still carry every vote. A decision
	// event written before this field has neither.
	Deciders     []string      `json:"deciders,omitempty"`
	DecidedCalls []DecidedCall `json:"decided_calls,omitempty"`
	DecidersCut  bool          `json:"deciders_cut,omitempty"`
	// ResumedBy is set when the votes had decided the turn already (a
	// directory change since the last vote) and another resumed it: the
	// approver whose vote only resumed it, or "purge" (the sweep's quorum
	// check: Store.ResumeDecided). The event's actor is then the last vote
	// that decided a call, as the decision's by is.
	ResumedBy string `json:"resumed_by,omitempty"`
}

// Event is one entry of a run's audit stream. Seq runs 1, 2, 3... in the
// order the events were written, with one exception: the notified event of
// a suspension's first notification takes the number its suspension kept
// for it (Run.NoticeSeq), right after the suspension's own events, when it
// is written, which may be after later events (a decision that came before
// the mail's outcome was recorded). When the worker that suspended ended
// before it recorded that outcome, the sweep sends the mail and its event
// takes the number (Notice.Recovered) while the run still waits on the
// suspension FirstNoticeGrace later; otherwise the number stays unused.
type Event struct {
	RunID string          `json:"run_id"`
	Seq   int64           `json:"seq"`
	Type  string          `json:"type"`
	At    time.Time       `json:"at"`
	Actor string          `json:"actor,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// ApprovalToken is the stored form of an approval link token: only its
// SHA-256 hash is kept, bound to one run, suspension and approver; it
// expires with the approval deadline and can be used once.
type ApprovalToken struct {
	// Hash is the lowercase hex SHA-256 of the raw token.
	Hash         string `json:"hash"`
	RunID        string `json:"run_id"`
	SuspensionID string `json:"suspension_id"`
	Approver     string `json:"approver"`
	// Person is who Approver was when the link was issued (TokenGrant.
	// Person; "" for a link issued before links kept it): the link
	// decides only while the directory in force still makes its address
	// theirs (RecordedKey: a person renamed since is still theirs when
	// their entry lists the id among its former ids), so that an address
	// handed to someone else does not carry its old links to them (a vote
	// through one would stand for its new holder, and the person it was
	// sent to could vote again).
	Person    string    `json:"person,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
	UsedAt    time.Time `json:"used_at,omitzero"`
}

// Usable returns nil if the token can still decide at now, an EConflict
// error if it was used, and an EGone error if it expired.
func (t *ApprovalToken) Usable(now time.Time) error {
	if !t.UsedAt.IsZero() {
		return Errorf(EConflict, "approval link was already used")
	}
	if !now.Before(t.ExpiresAt) {
		return Errorf(EGone, "approval link expired")
	}
	return nil
}

func cloneVotes(vs []Vote) []Vote {
	out := slices.Clone(vs)
	for i := range out {
		out[i].Reasons = slices.Clone(vs[i].Reasons)
		out[i].Keys = slices.Clone(vs[i].Keys)
		if vs[i].Edits != nil {
			out[i].Edits = make([]json.RawMessage, len(vs[i].Edits))
			for j, e := range vs[i].Edits {
				out[i].Edits[j] = cloneRaw(e)
			}
		}
	}
	return out
}

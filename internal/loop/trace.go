package loop

import (
	"context"
	"encoding/json"
	"time"
)

// StepKind names a step of the trace; persistence turns steps into events.
type StepKind string

// The step kinds.
const (
	StepModelTurn    StepKind = "model_turn"
	StepToolExecuted StepKind = "tool_executed"
	StepSuspended    StepKind = "suspended"
	StepResumed      StepKind = "resumed"
	StepFinished     StepKind = "finished"
	// StepHandedOver: the turn's client calls were handed to the caller.
	StepHandedOver StepKind = "handed_over"
)

// Step is one thing the loop did. Fields are set per kind; none holds prompt
// text or tool arguments except Edited inputs, which the audit needs.
type Step struct {
	Kind      StepKind  `json:"kind"`
	At        time.Time `json:"at"`
	Iteration int       `json:"iteration,omitempty"`
	// Model turn.
	Usage      *Usage     `json:"usage,omitempty"`
	StopReason StopReason `json:"stop_reason,omitempty"`
	ToolCalls  int        `json:"tool_calls,omitempty"`
	// Tool execution.
	CallID   string        `json:"call_id,omitempty"`
	Tool     string        `json:"tool,omitempty"`
	Effect   Effect        `json:"effect,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	IsError  bool          `json:"is_error,omitempty"`
	// BaseChanged says the tool refused the approved call, before any
	// effect, because what its preview was computed from changed after
	// review (Result.BaseChanged).
	BaseChanged bool `json:"base_changed,omitempty"`
	// Replayed says the tool answered from the record of an earlier
	// execution under the same idempotency key and applied nothing again
	// (Result.Replayed).
	Replayed bool `json:"replayed,omitempty"`
	// Action is what the decision did with this call (approve, deny, edit) on resume.
	Action Action `json:"action,omitempty"`
	// Rule names the policy rule that decided the call; ApprovedByRule says
	// a call ran without a decision because an approver approved its tool
	// for the rest of the run ("remembered, by <person>").
	Rule           string `json:"rule,omitempty"`
	ApprovedByRule string `json:"approved_by_rule,omitempty"`
	// DeniedAtResume marks a tool_denied step of a held call that its
	// decision let run but that a deny rule of the policy in force at the
	// resume refused (Rule); HeldRule names the rule that judged the call
	// when its turn was held.
	DeniedAtResume bool   `json:"denied_at_resume,omitempty"`
	HeldRule       string `json:"held_rule,omitempty"`
	// OriginalInput and EditedInput are both kept when an approver edited a
	// call; an original over MaxAuditInputBytes is kept as its SHA-256 (hex,
	// of the input's bytes) and size instead.
	OriginalInput       json.RawMessage `json:"original_input,omitempty"`
	OriginalInputSHA256 string          `json:"original_input_sha256,omitempty"`
	OriginalInputSize   int             `json:"original_input_size,omitempty"`
	EditedInput         json.RawMessage `json:"edited_input,omitempty"`
	// Suspension and resume.
	SuspensionID string `json:"suspension_id,omitempty"`
	TurnDigest   string `json:"turn_digest,omitempty"`
	// Finish.
	Reason TerminationReason `json:"reason,omitempty"`
	Detail string            `json:"detail,omitempty"`

	// Counters are the segment's running totals when the step was
	// recorded, this step included; not part of the step's data (its
	// event). A store applies them to the row, so a run whose segment
	// stops before its next write (a cancel) shows what its recorded
	// steps did.
	Counters *Counters `json:"-"`
}

// Hooks let the caller observe and fence the loop. Every field is optional. A
// hook error stops the loop: Run, Resume or Continue return it (wrapped)
// with the outcome so far, and nothing further executes.
type Hooks struct {
	// OnStep is called after each step (persist it as an event, renew a lease).
	OnStep func(ctx context.Context, step Step) error
	// BeforeEffect is called before a write tool call executes (stamp the
	// pending-effect fence). If it fails, the call does not run.
	BeforeEffect func(ctx context.Context, call FencedCall) error
	// AfterEffect is called once a write call's result is known (clear the
	// fence); the call's Checkpoint then holds its result.
	AfterEffect func(ctx context.Context, call FencedCall, result Result) error
	// NoEffect, when set, is called instead of AfterEffect when a write
	// tool failed with ErrNoEffect (it changed nothing): lift the fence
	// without recording a write.
	NoEffect func(ctx context.Context, call PendingCall) error
	// ResumeDenied, when set, is called by Resume before any call of the
	// held turn runs when the policy in force denied calls the decision
	// let run (PendingCall.DeniedAtResume): cp is the run at that moment,
	// the turn about to be executed with those denials and none of its
	// calls done. Store it (as the run's checkpoint), so that a process
	// that takes the run over continues from it, with those denials,
	// instead of judging the held turn again by its own policy (or, a
	// build before this one, by none). If it fails, nothing of the turn
	// runs. cp shares memory with the running loop: encode it during the
	// hook, do not keep it.
	ResumeDenied func(ctx context.Context, cp *Checkpoint) error
	// Yield, when set, is asked before each model call and each tool call
	// once the segment has done something: returning true ends the segment
	// with an OutcomeCheckpoint (the worker's time is up; the run goes on
	// in another process with Continue). When the context's deadline
	// passes (not the run's own Options.Deadline) while Yield is set, the
	// segment yields too instead of ending the run budget_exhausted.
	Yield func(ctx context.Context) bool
}

// FencedCall is what the fence hooks are told about a write call.
type FencedCall struct {
	PendingCall
	// Idempotent is the tool's declaration that a repeated call with the
	// same idempotency key has no further effect.
	Idempotent bool
	// Key is the call's idempotency key.
	Key string
	// Checkpoint is the run at this moment: before the call, the call is
	// the next one to run; after it, its result is in. Continue from it
	// reaches the call (or what follows it) with the same idempotency key.
	// It shares memory with the running loop: encode it during the hook,
	// do not keep it.
	Checkpoint *Checkpoint
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns ctx carrying a tool call's idempotency key.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// IdempotencyKey returns the key of the tool call being executed,
// "runID/suspensionID/callID" ("-" for the suspension id before the first
// suspension; "#N" after it when the model reused the call id in N earlier
// turns), or "" outside a tool call.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	return k
}

type previewBaseCtx struct{}

// WithPreviewBase returns ctx carrying the base of the preview an approver
// reviewed for the tool call being executed (see BasedPreviewer).
func WithPreviewBase(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, previewBaseCtx{}, base)
}

// PreviewBase returns the base of the preview the approver reviewed for the
// tool call being executed, or "" when there is none to check: the call
// needed no approval, its tool gave no base, or its state was saved before
// bases existed.
func PreviewBase(ctx context.Context) string {
	b, _ := ctx.Value(previewBaseCtx{}).(string)
	return b
}

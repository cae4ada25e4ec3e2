package loop

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SchemaVersion is the version of the SuspendedState layout this package
// writes. Resume also accepts version 1, whose turn digest covers the calls
// only; version 2 binds it to run and suspension (see TurnDigest).
const SchemaVersion = 2

// HandOverSchemaVersion is the layout of a state that waits for client-tool
// results (HandOver set). It is its own version so that a build that knows
// only decisions refuses such a state (ErrSchemaVersion) instead of
// resuming it with a decision.
const HandOverSchemaVersion = 3

// Counters are the running totals of a run; a resumed run folds the counters
// of its earlier segments into them.
type Counters struct {
	Iterations   int   `json:"iterations"`
	ModelCalls   int   `json:"model_calls"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	ToolCalls    int   `json:"tool_calls"`
}

// Tokens returns input plus output tokens.
func (c Counters) Tokens() int64 { return c.InputTokens + c.OutputTokens }

// Options are a run's settings; they travel in the SuspendedState so a resumed
// run keeps them.
type Options struct {
	// Model is the provider's model identifier passed to the Model.
	Model string `json:"model,omitempty"`
	// MaxIterations caps the model calls of the run (0: DefaultMaxIterations).
	MaxIterations int `json:"max_iterations,omitempty"`
	// MaxTokens caps input plus output tokens over the run (0: no cap).
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxOutputTokens caps one model answer (0: provider default).
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// Deadline ends the run with ReasonBudgetExhausted when passed (zero: none).
	Deadline time.Time `json:"deadline,omitzero"`
	// AllowedTools restricts the toolbox offered to the model (empty: all).
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// DenialEndsRun makes any denied call end the run with ReasonApprovalDenied
	// once the denial results are in the transcript.
	DenialEndsRun bool `json:"denial_ends_run,omitempty"`
	// Remembered maps tool names to the person who approved the tool for
	// the rest of the run (a per-call decision with remember: "run"); the
	// runner's Policy decides whether that approval covers a later call.
	Remembered map[string]string `json:"remembered,omitempty"`
}

// DefaultMaxIterations is the iteration cap when Options.MaxIterations is 0.
const DefaultMaxIterations = 25

// PendingCall is one tool call of a held turn.
type PendingCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is omitted when the call had none (nil), so a state decodes to
	// the input it was suspended with: written as null it came back as
	// null, whose digest differs from an absent input's (found by
	// FuzzDecodeState).
	Input json.RawMessage `json:"input,omitempty"`
	// NeedsApproval says the call may only run after an approving decision.
	NeedsApproval bool   `json:"needs_approval"`
	Effect        Effect `json:"effect,omitempty"`
	// Rejected holds why the call cannot run at all (unknown tool, invalid
	// input); such a call gets an error result whatever the decision. One
	// whose input is not one I-JSON object (CheckInputForm) is never held:
	// no policy judged it, and its Input is as the model wrote it.
	Rejected string `json:"rejected,omitempty"`
	// Rule names the policy rule that decided the call (the runner's
	// Policy; empty without one).
	Rule string `json:"rule,omitempty"`
	// Denied holds the policy's denial told to the model: the call never
	// runs, whatever the decision, and no human is asked about it.
	Denied string `json:"denied,omitempty"`
	// Approval is who must approve the call, as its rule says (nil: the
	// run's approvers, one approval).
	Approval *ApprovalRule `json:"approval,omitempty"`
	// RuleDescription is what the rule that let the call run unasked, or
	// denied it, is for (Verdict.Description), for approvers of the turn;
	// a held call's rule description is its Approval's. The turn digest
	// does not cover it.
	RuleDescription string `json:"rule_description,omitempty"`
	// ApprovedBy names who approved the call in advance (remember: "run");
	// such a call needs no decision.
	ApprovedBy string `json:"approved_by,omitempty"`
	// PreviewBase is the base of the call's preview (BasedPreviewer), set
	// at suspension for a call held for approval; the call runs with it in
	// its context (PreviewBase). Empty (no preview, or a state saved before
	// bases existed): the tool checks nothing. The turn digest does not
	// cover it: it is the loop's record, not something a decision names.
	PreviewBase string `json:"preview_base,omitempty"`
	// DefinitionUnverified, set at suspension, says that the call's tool
	// could not be checked against its source when the turn was held: the
	// call is held, previewed and hashed on the definition this process
	// read before (a definition that changed meanwhile still refuses the
	// resume, ErrToolChanged). Approvers are shown it; the turn digest does
	// not cover it.
	DefinitionUnverified *UnverifiedDefinition `json:"definition_unverified,omitempty"`
	// DeniedAtResume, set when a held turn resumes, says that Denied is
	// the denial of a deny rule of the policy in force at the resume (Rule
	// names it), which did not deny the call when its turn was held: the
	// decision let the call run, and it does not (Runner.Resume). HeldRule
	// is the rule that judged the call when the turn was held ("" for
	// none). They are set on the calls of the turn being executed (a
	// checkpoint's, a hand-over's), never on a held turn's, and the turn
	// digest does not cover them. A build that does not know them still
	// reads Denied, and never runs the call.
	DeniedAtResume bool   `json:"denied_at_resume,omitempty"`
	HeldRule       string `json:"held_rule,omitempty"`
}

// UnverifiedDefinition is why a held call's tool definition could not be
// checked against its source when the turn was held, and when the
// definition it is held on was read.
type UnverifiedDefinition struct {
	// Reason says in a few words why the source could not be asked
	// (DefinitionUnavailableError.Cause): never a transport's message, a
	// server's address or credentials.
	Reason string `json:"reason"`
	// ListedAt is when the definition the call is held on was read from
	// the source; zero (absent) when unknown.
	ListedAt time.Time `json:"listed_at,omitzero"`
}

// SuspendedState is everything needed to resume a run in another process.
type SuspendedState struct {
	SchemaVersion int    `json:"schema_version"`
	RunID         string `json:"run_id"`
	SuspensionID  string `json:"suspension_id"`
	// Transcript runs through the assistant turn whose calls are held.
	Transcript   Transcript    `json:"transcript"`
	PendingCalls []PendingCall `json:"pending_calls"`
	Counters     Counters      `json:"counters"`
	Options      Options       `json:"options"`
	// ToolHashes maps each tool of the held turn to its DefinitionHash at suspension.
	ToolHashes map[string]string `json:"tool_hashes"`
	// Previews maps call ids to what the call would change, for approvers.
	Previews map[string]string `json:"previews,omitempty"`
	// TurnDigest is the SHA-256 over the canonical pending calls; a decision
	// must name it.
	TurnDigest  string    `json:"turn_digest"`
	SuspendedAt time.Time `json:"suspended_at"`
	// HandOver is set when the state waits for the results of client calls
	// (schema version HandOverSchemaVersion) rather than for a decision;
	// SuspensionID is then the tool-results id.
	HandOver *HandOver `json:"hand_over,omitempty"`
}

// PendingKeys returns the idempotency keys of the held calls: the keys
// under which a resume from s makes them.
func (s *SuspendedState) PendingKeys() map[string]bool {
	return callKeys(s.RunID, s.SuspensionID, s.Transcript, s.PendingCalls)
}

// Encode returns the state as JSON (see MarshalJSON for the encoding).
func (s *SuspendedState) Encode() ([]byte, error) { return MarshalJSON(s) }

// MarshalJSON encodes v as compact JSON without HTML escaping, so text and
// tool inputs keep their characters exactly (<, > and & stay as they are).
// Encoding, decoding and encoding again yields the same bytes.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeState parses a state encoded by Encode, refusing unknown schema versions.
//
// The state is decoded once (a state can be megabytes); only when that
// fails is its schema_version read on its own, so a state of an unknown
// version is refused as such whatever its shape.
func DecodeState(raw []byte) (*SuspendedState, error) {
	var s SuspendedState
	err := json.Unmarshal(raw, &s)
	version := s.SchemaVersion
	if err != nil {
		var probe struct {
			SchemaVersion int `json:"schema_version"`
		}
		if json.Unmarshal(raw, &probe) != nil {
			return nil, fmt.Errorf("decode suspended state: %w", err)
		}
		version = probe.SchemaVersion
	}
	if version != SchemaVersion && version != 1 && version != HandOverSchemaVersion {
		return nil, fmt.Errorf("%w: state has schema_version %d, this build reads 1 to %d", ErrSchemaVersion, version, HandOverSchemaVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("decode suspended state: %w", err)
	}
	if (s.SchemaVersion == HandOverSchemaVersion) != (s.HandOver != nil) {
		return nil, fmt.Errorf("%w: schema_version %d, but the state %s a hand-over of client calls", ErrSchemaVersion, s.SchemaVersion, map[bool]string{true: "holds", false: "does not hold"}[s.HandOver != nil])
	}
	return &s, nil
}

// TurnDigest is the SHA-256 (hex) over the run id, the suspension id and the
// canonical form of the pending calls (their ids, tool names and canonical
// inputs, in turn order). It binds a decision to exactly the calls that were
// reviewed, in this run and this suspension: run A's digest is refused by
// run B even when the two turns are identical (issue #10 item 7).
func TurnDigest(runID, suspensionID string, calls []PendingCall) (string, error) {
	canon, err := canonCalls(calls)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(struct {
		RunID        string          `json:"run_id"`
		SuspensionID string          `json:"suspension_id"`
		Calls        json.RawMessage `json:"calls"`
	}{runID, suspensionID, canon})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ExpectedDigest is the digest the state's pending calls must have: bound
// to run and suspension from schema version 2, over the calls alone in
// version 1 states (written by earlier builds, still resumable).
func (s *SuspendedState) ExpectedDigest() (string, error) {
	if s.SchemaVersion == 1 {
		canon, err := canonCalls(s.PendingCalls)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:]), nil
	}
	return TurnDigest(s.RunID, s.SuspensionID, s.PendingCalls)
}

// compactRaw is raw without insignificant white space, as MarshalJSON
// writes it; raw as it is when it is not JSON.
func compactRaw(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// canonCalls is the canonical JSON array of the calls' ids, names and inputs.
// An input that is not I-JSON (a call refused for it, CheckInputForm) has
// no faithful canonical form: it is kept as written, byte for byte, under
// raw_input, so that no two different inputs share a digest.
func canonCalls(calls []PendingCall) ([]byte, error) {
	type canonCall struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input,omitempty"`
		RawInput []byte          `json:"raw_input,omitempty"`
	}
	canon := make([]canonCall, 0, len(calls))
	for _, c := range calls {
		in, err := CanonicalJSON(c.Input)
		switch {
		case errors.Is(err, errNotIJSON):
			// Compacted (which merges no member and keeps every byte of
			// every string), as the state's encoding stores it, so the
			// digest survives a round trip of the state.
			canon = append(canon, canonCall{ID: c.ID, Name: c.Name, RawInput: compactRaw(c.Input)})
			continue
		case err != nil:
			return nil, fmt.Errorf("call %s: input: %w", c.ID, err)
		}
		canon = append(canon, canonCall{ID: c.ID, Name: c.Name, Input: in})
	}
	return json.Marshal(canon)
}

// Action is what a decision does with a turn or a call.
type Action string

// The decision actions. Edit applies to single calls only.
const (
	ActionApprove Action = "approve"
	ActionDeny    Action = "deny"
	ActionEdit    Action = "edit"
)

// CallDecision decides one pending call.
type CallDecision struct {
	CallID string `json:"call_id"`
	Action Action `json:"action"`
	// Message is the reason given with a denial (shown to the model).
	Message string `json:"message,omitempty"`
	// Input holds the edited arguments when Action is edit.
	Input json.RawMessage `json:"input,omitempty"`
	// Remember, "run" (RememberRun) with approve or edit, approves the
	// call's tool for the rest of the run.
	Remember string `json:"remember,omitempty"`
}

// Decision is a human's answer to a suspension: either one Action for the
// whole turn (approve or deny, with an optional Message), or one CallDecision
// per call that needs approval (calls that need none may be listed too; left
// out, they run). TurnDigest must equal the suspension's digest.
type Decision struct {
	TurnDigest string         `json:"turn_digest"`
	Action     Action         `json:"action,omitempty"`
	Message    string         `json:"message,omitempty"`
	Calls      []CallDecision `json:"calls,omitempty"`
	// Decider is who decided, set by the caller of Resume from its own
	// record (never part of the wire form): the person a remember: "run"
	// is recorded for.
	Decider string `json:"-"`
}

// Errors returned by Resume and ValidateDecision; test with errors.Is.
var (
	// ErrDigestMismatch: the decision names another turn than the one held.
	ErrDigestMismatch = errors.New("decision was made on a different turn (turn digest mismatch)")
	// ErrSchemaVersion: the suspended state was written by an unknown layout.
	ErrSchemaVersion = errors.New("unknown suspended state schema version")
	// ErrToolChanged: a held call's tool changed or vanished since suspension.
	ErrToolChanged = errors.New("a held call's tool definition changed")
	// ErrInvalidDecision: the decision is malformed, incomplete, or an edit
	// fails the tool's schema.
	ErrInvalidDecision = errors.New("invalid decision")
)

// TerminationReason says why a run ended. It is the one list of reasons: the
// loop ends runs with the first group; the worker and the store end runs
// with the second when something around the loop fails or a human acts.
type TerminationReason string

// The termination reasons the loop returns in an Outcome.
const (
	ReasonCompleted       TerminationReason = "completed"
	ReasonMaxIterations   TerminationReason = "max_iterations"
	ReasonBudgetExhausted TerminationReason = "budget_exhausted"
	ReasonApprovalDenied  TerminationReason = "approval_denied"
	ReasonProviderFailed  TerminationReason = "provider_failed"
	ReasonCancelled       TerminationReason = "cancelled"
)

// The termination reasons set around the loop (by the worker, the sweep and
// the store); Run and Resume never return them.
const (
	// ReasonApprovalExpired ends a run whose approval window closed undecided.
	ReasonApprovalExpired TerminationReason = "approval_expired"
	// ReasonApprovalUnmeetable ends a waiting run a held call of which can
	// no longer get the approvals it still needs: the directory changed
	// while it waited (a person left a group it names, a group was
	// removed), and too few persons who have not voted may still decide it.
	ReasonApprovalUnmeetable TerminationReason = "approval_unmeetable"
	// ReasonInterruptedWrite ends a run whose worker vanished while a write
	// may have begun, or after a write completed in the lost segment: the
	// write is never executed again.
	ReasonInterruptedWrite TerminationReason = "interrupted_write"
	// ReasonInternalError ends a run whose infrastructure failed mid-segment.
	ReasonInternalError TerminationReason = "internal_error"
	// ReasonToolChanged ends a run whose held tool changed before resume.
	ReasonToolChanged TerminationReason = "tool_changed"
	// ReasonStateUnreadable ends a run whose stored request, suspended state
	// or decision cannot be used.
	ReasonStateUnreadable TerminationReason = "state_unreadable"
	// ReasonToolResultsExpired ends a run whose caller did not submit the
	// results of its handed-over client calls before the deadline.
	ReasonToolResultsExpired TerminationReason = "tool_results_expired"
	// ReasonStateTooLarge ends a run whose suspended state is over the
	// state blob limit (runs.MaxStateSize): the held turn's inputs and
	// previews, with the transcript, do not fit. Nothing of the turn runs;
	// the detail names the largest calls and their sizes. A long run whose
	// segment-end checkpoint is over the limit ends the same way.
	ReasonStateTooLarge TerminationReason = "state_too_large"
	// ReasonWorkerLost ends a run whose workers kept vanishing without the
	// run getting further: it was taken over from a vanished worker
	// runs.MaxReclaims times in a row, each time from the same checkpoint
	// (a step that kills its process, or outlives every lease).
	ReasonWorkerLost TerminationReason = "worker_lost"
)

// OutcomeKind says whether a run finished, waits for a decision, waits for
// the results of client calls, or yielded to go on in another segment.
type OutcomeKind string

// The outcome kinds.
const (
	OutcomeFinished  OutcomeKind = "finished"
	OutcomeSuspended OutcomeKind = "suspended"
	// OutcomeAwaitingResults: the turn's client calls were handed to the
	// caller; Suspended holds the state (with HandOver) to resume with
	// ResumeWithResults.
	OutcomeAwaitingResults OutcomeKind = "awaiting_tool_results"
	// OutcomeCheckpoint: the segment yielded (Hooks.Yield); Continue
	// runs the loop on from Outcome.Checkpoint.
	OutcomeCheckpoint OutcomeKind = "checkpoint"
)

// Outcome is what Run and Resume return.
type Outcome struct {
	Kind OutcomeKind
	// Reason is set when Kind is OutcomeFinished.
	Reason TerminationReason
	// Detail explains a non-completed reason (for example the provider's error message).
	Detail string
	// FinalText is the model's last text when the run completed.
	FinalText  string
	Transcript Transcript
	Counters   Counters
	// Suspended is set when Kind is OutcomeSuspended or OutcomeAwaitingResults.
	Suspended *SuspendedState
	// Checkpoint is set when Kind is OutcomeCheckpoint.
	Checkpoint *Checkpoint
	// Trace lists the steps of this segment (from Run or Resume to this outcome).
	Trace []Step
}

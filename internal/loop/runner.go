package loop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrInvalidRequest is returned by Run for a request it cannot start.
var ErrInvalidRequest = errors.New("invalid run request")

// Bounds the loop puts on what a model turn may hold, so that no input the
// tools accept can end a run for a reason the approver cannot act on.
const (
	// MaxPreviewBytes caps one call's preview kept in the suspended state
	// (a longer one is cut and says so). The builtin document tools' diffs
	// stay below it for every document they accept.
	MaxPreviewBytes = 8 << 20
	// MaxHeldCalls is the most tool calls a turn that needs approval may
	// hold; a larger turn runs none of its calls and every call gets an
	// error result saying so, which the model can act on.
	MaxHeldCalls = 64
	// MaxCallIDBytes bounds a tool_use id (providers use about 30 bytes); a
	// turn with a longer one is invalid (provider_failed).
	MaxCallIDBytes = 256
	// MaxAuditInputBytes bounds the original input a tool_executed step of
	// an edited call keeps; a longer one is recorded by its SHA-256 and
	// size (the turn digest of the suspension covers it whole).
	MaxAuditInputBytes = 16 << 10
)

// Runner runs the tool loop. Its fields are read-only once it is in use, so one
// Runner may serve many runs at once.
type Runner struct {
	// Model answers each turn.
	Model Model
	// Tools are the tools the model may call (further limited per run by Options.AllowedTools).
	Tools *Toolbox
	// Policy, when set, decides every call of a turn once the tool's own
	// trigger is known: run it, hold the turn for approval (naming the
	// rule, who must approve and how), or refuse it with a denial result.
	// The whole turn is judged before any call runs. Nil: the tool's own
	// trigger decides.
	Policy Policy
	// Unapprovable, when set, is asked about every planned turn that holds
	// calls needing approval, before the turn suspends: it returns, keyed by
	// call id, a denial for each such call whose approval no decision could
	// ever give (say, a quorum larger than the persons who may decide it).
	// Those calls are denied as a Policy's VerdictDeny denies them (an error
	// result carrying the denial, a tool_denied step naming the call's rule),
	// so the turn does not wait for a vote that cannot complete; it suspends
	// only for the calls left needing approval. Ids of other calls are
	// ignored. Nil: every held call waits for a decision.
	Unapprovable func(ctx context.Context, calls []PendingCall) map[string]string
	// TakenOverAt, set by a worker that took the run over from one that
	// vanished with a write's fence stamped, is the id of that write's
	// call: a Resume may be one that worker began and got as far as that
	// call, so the held turn's idempotent writes up to it, in turn order,
	// may have been made already (a write that is not idempotent would
	// have ended the run instead). They are made again under their keys
	// without the Policy judging them again (see Resume): a denial would
	// tell the model and the trail that a write did not run which may
	// have. The calls after it were never begun (every write is fenced
	// before it runs): they are judged as in any resume. A call id that is
	// not of the held turn counts every idempotent write as made. Empty: no
	// write of the turn was begun.
	TakenOverAt string
	// Hooks observe and fence the loop.
	Hooks Hooks
	// Now returns the current time (nil: time.Now).
	Now func() time.Time
	// NewID returns a fresh suspension id (nil: 128 random bits, hex).
	NewID func() string
}

// Request starts a run.
type Request struct {
	// RunID names the run; it is part of every idempotency key.
	RunID string
	// Transcript holds the system text and the opening messages; the last
	// message must be from the user.
	Transcript Transcript
	Options    Options
}

// Run runs the loop from the request's transcript until the model answers
// without tool calls, a budget stops it, or a turn holds a call that needs
// approval (then the Outcome is OutcomeSuspended and nothing of that turn ran).
// The error is non-nil only for a request it cannot start, a hook failure, or
// a tool's infrastructure failure; the Outcome then holds what happened so far.
func (r *Runner) Run(ctx context.Context, req Request) (Outcome, error) {
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	if req.RunID == "" {
		return Outcome{}, fmt.Errorf("%w: run id is empty", ErrInvalidRequest)
	}
	if err := req.Transcript.Validate(); err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	msgs := req.Transcript.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleUser {
		return Outcome{}, fmt.Errorf("%w: the transcript must end with a user message", ErrInvalidRequest)
	}
	r = r.revived(ctx, req.Options, nil)
	for _, name := range req.Options.AllowedTools {
		if _, ok := r.Tools.Lookup(name); !ok {
			return Outcome{}, fmt.Errorf("%w: allowed tools: %s", ErrInvalidRequest, r.Tools.Missing(name))
		}
	}
	s := r.newSegment(req.RunID, "-", cloneTranscript(req.Transcript), Counters{}, req.Options)
	return s.loop(ctx)
}

// Resume continues a suspended run with a human's decision. It refuses (and
// runs nothing) when the state's schema version is unknown (ErrSchemaVersion),
// the decision names another turn (ErrDigestMismatch), a held call's tool
// is no longer the one its call was held with (ErrToolChanged; a
// DefinitionChecker tool of a call that is to run is asked for its current
// definition first), or the decision is malformed or
// an edit fails the tool's schema (ErrInvalidDecision). Otherwise every call
// of the held turn gets exactly one result: approved and edited calls run
// (read-only siblings too), denied calls get a denial naming the reason; then
// the loop continues, and may suspend again.
//
// Before any call runs, each call the decision lets run (approved, edited:
// with the edited input, or a sibling that needed no approval) is judged
// again by the runner's Policy, the policy in force now: one that a deny
// rule refuses now does not run, as if the rule had denied it when the
// turn was planned (the model gets the rule's message, a tool_denied step
// names the rule, with DeniedAtResume), and the turn goes on without it.
// Only a denial counts: a call the policy would now allow, or hold under
// other terms, runs as decided (the decision is bound to the turn that
// was reviewed, and a resume never asks for a decision again). Calls the
// decision denied stay denied. When it denies a call, Hooks.ResumeDenied
// is given the turn with its denials to store before any call runs, so
// the judgement is made once: a process continuing the turn from a
// checkpoint keeps it.
func (r *Runner) Resume(ctx context.Context, state *SuspendedState, d Decision) (Outcome, error) {
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	if state == nil {
		return Outcome{}, fmt.Errorf("%w: no suspended state", ErrInvalidDecision)
	}
	if state.HandOver != nil || state.SchemaVersion == HandOverSchemaVersion {
		return Outcome{}, fmt.Errorf("%w: the run waits for tool results, not for a decision", ErrInvalidDecision)
	}
	if state.SchemaVersion != SchemaVersion && state.SchemaVersion != 1 {
		return Outcome{}, fmt.Errorf("%w: state has schema_version %d, this build reads %d", ErrSchemaVersion, state.SchemaVersion, SchemaVersion)
	}
	digest, err := state.ExpectedDigest()
	if err != nil || digest != state.TurnDigest {
		return Outcome{}, fmt.Errorf("%w: the suspended state's pending calls do not match its digest", ErrInvalidDecision)
	}
	if err := heldTurnMatches(state); err != nil {
		return Outcome{}, err
	}
	r = r.revived(ctx, state.Options, state.PendingCalls)
	// Edits were judged by the policy when the decision was made
	// (ValidateDecision): the decision stands as it was accepted (a policy
	// deployed since does not make it invalid); a deny rule deployed since
	// stops the calls it would run (judgeAtResume).
	actions, err := resolveDecision(ctx, r.Tools, nil, state.PendingCalls, state.TurnDigest, d, false)
	if err != nil {
		return Outcome{}, err
	}
	unconfirmed, asked, err := r.confirmDefinitions(ctx, state.PendingCalls, state.ToolHashes, actions)
	if err != nil {
		return Outcome{}, err
	}
	absent, err := r.checkToolHashes(state.PendingCalls, state.ToolHashes)
	if err != nil {
		return Outcome{}, err
	}
	if len(asked) > 0 {
		// An edit is checked again against the schema the source confirmed
		// (this process's copy may have been older).
		if actions, err = resolveDecision(ctx, r.Tools, nil, state.PendingCalls, state.TurnDigest, d, false); err != nil {
			return Outcome{}, err
		}
	}
	for id, why := range absent {
		if unconfirmed == nil {
			unconfirmed = map[string]string{}
		}
		unconfirmed[id] = why
	}
	opts := state.Options
	for _, c := range state.PendingCalls {
		if act := actions[c.ID]; act.Remember == RememberRun {
			if d.Decider == "" {
				return Outcome{}, fmt.Errorf("%w: remember needs the decider's name", ErrInvalidDecision)
			}
			m := make(map[string]string, len(opts.Remembered)+1)
			for k, v := range opts.Remembered {
				m[k] = v
			}
			m[c.Name] = d.Decider
			opts.Remembered = m
		}
	}
	s := r.newSegment(state.RunID, state.SuspensionID, cloneTranscript(state.Transcript), state.Counters, opts)
	s.unconfirmed = unconfirmed
	calls, deniedNow := s.judgeAtResume(ctx, state.PendingCalls, actions)
	if err := s.record(ctx, Step{Kind: StepResumed, SuspensionID: state.SuspensionID, TurnDigest: state.TurnDigest}); err != nil {
		return s.outcome(), err
	}
	if deniedNow && s.r.Hooks.ResumeDenied != nil {
		// The denials go on record before any call runs: a process that
		// takes the run over continues from them and does not judge the
		// held turn again (its policy may not deny what this one did).
		s.turn = newTurnState(calls, actions)
		err := s.r.Hooks.ResumeDenied(ctx, s.checkpoint())
		s.turn = nil
		if err != nil {
			return s.outcome(), fmt.Errorf("record the calls denied at resume: %w", err)
		}
	}
	tr, err := s.execute(ctx, calls, actions)
	if err != nil {
		return s.outcome(), err
	}
	if s.yielded {
		return s.yieldOutcome(), nil
	}
	if tr.stop != "" {
		return s.finish(ctx, tr.stop, "")
	}
	if tr.denied && s.opts.DenialEndsRun {
		return s.finish(ctx, ReasonApprovalDenied, "a call was denied and the run's policy ends it on denial")
	}
	if len(tr.handOver) > 0 {
		return s.handOver(ctx, calls, tr)
	}
	return s.loop(ctx)
}

// judgeAtResume returns the calls of a held turn about to be executed with
// actions, each call the decision lets run judged again by the runner's
// Policy (nil: calls as they are): one a deny rule refuses now is marked
// denied (Denied, Rule, DeniedAtResume, HeldRule), and runs no more;
// denied says whether any call was. A
// call that cannot run anyway (refused by policy when held, denied by the
// decision, an input that fails, a tool that is absent or could not be
// confirmed) is left as it is, and so is an idempotent write that a
// vanished worker may have made (Runner.TakenOverAt). No other
// verdict changes anything: an allow rule does not lift a denial, and a
// require_approval rule does not hold again a call a decision approved.
// calls itself is not changed.
func (s *segment) judgeAtResume(ctx context.Context, calls []PendingCall, actions map[string]CallDecision) (judged []PendingCall, denied bool) {
	pol := s.r.Policy
	if pol == nil {
		return calls, false
	}
	out := slices.Clone(calls)
	begun := s.r.begunByVanished(calls)
	for i, c := range calls {
		act := actions[c.ID]
		if c.Denied != "" || act.Action == ActionDeny {
			continue
		}
		if _, ok := s.unconfirmed[c.ID]; ok {
			continue
		}
		tool, ok := s.r.Tools.Lookup(c.Name)
		if !ok || !s.allowed[c.Name] {
			continue
		}
		def := tool.Definition()
		if i < begun && def.Effect == EffectWrite && def.Idempotent {
			continue
		}
		input := c.Input
		if act.Action == ActionEdit {
			input = act.Input
		} else if c.Rejected != "" || CheckInputForm(c.Name, input) != nil {
			continue // it fails as it is, and tells the model why
		}
		now := PendingCall{ID: c.ID, Name: c.Name, Input: input}
		judge(ctx, pol, tool, &now, "")
		if now.Denied == "" {
			continue
		}
		out[i].HeldRule = c.Rule
		out[i].Rule, out[i].Denied, out[i].RuleDescription = now.Rule, now.Denied, now.RuleDescription
		out[i].DeniedAtResume = true
		denied = true
	}
	return out, denied
}

// begunByVanished returns how many of a held turn's calls, in turn order,
// a vanished worker may have begun (Runner.TakenOverAt): up to and
// including its fenced call, every call when that is not one of them, none
// without a take-over.
func (r *Runner) begunByVanished(calls []PendingCall) int {
	if r.TakenOverAt == "" {
		return 0
	}
	for i, c := range calls {
		if c.ID == r.TakenOverAt {
			return i + 1
		}
	}
	return len(calls)
}

// ValidateDecision checks a decision against a held turn without running
// anything: the digest, the shape, that every call needing approval is
// decided, that only calls held for approval are denied or edited one by
// one, and that edits match the tool's schema and stay under the policy
// rule their call was held for (pol: the run's Policy; nil: none). It
// returns an error wrapping ErrDigestMismatch or ErrInvalidDecision.
func ValidateDecision(ctx context.Context, tools *Toolbox, pol Policy, calls []PendingCall, digest string, d Decision) error {
	_, err := resolveDecision(ctx, reviveEdited(ctx, tools, calls, d), pol, calls, digest, d, true)
	return err
}

// reviveEdited returns tools as it stands for checking the edits of d on
// calls: an edit is checked against its tool's schema, so a tool whose
// source this process could not list is looked for again (Revive).
func reviveEdited(ctx context.Context, tools *Toolbox, calls []PendingCall, d Decision) *Toolbox {
	var edited []string
	for _, cd := range d.Calls {
		for _, c := range calls {
			if c.ID == cd.CallID && cd.Action == ActionEdit {
				edited = append(edited, c.Name)
			}
		}
	}
	if len(edited) == 0 {
		return tools
	}
	return tools.Revive(ctx, edited, false)
}

// ValidateVote checks a vote on a held turn decided by votes without
// running anything: the digest and the shape, as ValidateDecision, and
// that it approves, denies or (where each call needs one approval) edits
// (a whole-turn action, or per-call decisions of pending calls). needed is
// the most approvals from distinct persons a held call needs (the run's
// votes_needed): above 1, a quorum, where the other approvers approved the
// call as it is, so edits and remember are refused; 1, calls each decided
// by their own approvers with one approval each, where the voter who
// decides a call may edit it, and an edit is checked as in a decision
// (the tool's schema, and pol, the run's Policy, nil: none, as judgeEdit).
// Remember is refused in every vote: the stored decision a vote comes to
// names one decider, the voter who completed the turn, not the one who
// chose to remember. Unlike a decision it need not decide every call held
// for approval: a voter decides the calls they may decide, which is the
// caller's check. A per-call deny or edit of a call that needs no approval
// is refused as in a decision. It returns an error wrapping
// ErrDigestMismatch or ErrInvalidDecision.
func ValidateVote(ctx context.Context, tools *Toolbox, pol Policy, calls []PendingCall, digest string, d Decision, needed int) error {
	switch {
	case d.Action != "" && len(d.Calls) > 0:
		return fmt.Errorf("%w: give either a turn action or per-call decisions, not both", ErrInvalidDecision)
	case d.Action == "" && len(d.Calls) == 0:
		return fmt.Errorf("%w: the decision has neither a turn action nor per-call decisions", ErrInvalidDecision)
	case d.Action != "" && d.Action != ActionApprove && d.Action != ActionDeny:
		return fmt.Errorf("%w: turn action must be %q or %q, got %q", ErrInvalidDecision, ActionApprove, ActionDeny, d.Action)
	}
	if err := checkCallShapes(d); err != nil {
		return err
	}
	for i, cd := range d.Calls {
		switch {
		case cd.Action == ActionEdit && needed > 1:
			return fmt.Errorf("%w: calls[%d]: this turn needs approvals from more than one person, so its calls cannot be edited: an edit would change what the other approvers approved; approve or deny the call as it is (a denial's message can say what to do instead)", ErrInvalidDecision, i)
		case cd.Remember != "" && needed > 1:
			return fmt.Errorf("%w: calls[%d]: remember is not possible in a vote of a turn that needs approvals from more than one person", ErrInvalidDecision, i)
		case cd.Remember != "":
			return fmt.Errorf("%w: calls[%d]: remember is not possible in a vote of a turn whose calls are each decided by their own approvers; approve or edit the call without it (later calls of its tool are asked again)", ErrInvalidDecision, i)
		}
	}
	if d.TurnDigest != digest {
		return fmt.Errorf("%w: decision names %q, the held turn is %q", ErrDigestMismatch, d.TurnDigest, digest)
	}
	byID := make(map[string]PendingCall, len(calls))
	for _, c := range calls {
		byID[c.ID] = c
	}
	tools = reviveEdited(ctx, tools, calls, d)
	for i, cd := range d.Calls {
		c, ok := byID[cd.CallID]
		if !ok {
			return fmt.Errorf("%w: calls[%d]: call %q is not pending in this turn", ErrInvalidDecision, i, cd.CallID)
		}
		if err := CheckCallDecision(c, cd.Action); err != nil {
			advice := "only calls held for approval are decided one by one (leave it out of calls; where one decision decides the turn, action deny denies every call)"
			if c.Denied != "" {
				advice = "leave it out of calls"
			}
			return fmt.Errorf("%w: calls[%d]: %w; %s", ErrInvalidDecision, i, err, advice)
		}
		if cd.Action == ActionEdit {
			if _, err := checkEdit(ctx, tools, pol, c, cd, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEdit checks the edit cd (calls[i] of a decision or a vote) of held
// call c: its tool is known, the edited input matches the tool's schema
// and stays under the policy rule and approval terms c was held for
// (judgeEdit; pol nil: none). It returns the input in canonical form.
func checkEdit(ctx context.Context, tools *Toolbox, pol Policy, c PendingCall, cd CallDecision, i int) (json.RawMessage, error) {
	if _, ok := tools.Lookup(c.Name); !ok {
		return nil, fmt.Errorf("%w: calls[%d]: the call cannot be edited: %s", ErrInvalidDecision, i, tools.Missing(c.Name))
	}
	if err := tools.ValidateInput(c.Name, cd.Input); err != nil {
		return nil, fmt.Errorf("%w: calls[%d]: edited input: %w", ErrInvalidDecision, i, err)
	}
	canon, err := CanonicalJSON(cd.Input)
	if err != nil {
		return nil, fmt.Errorf("%w: calls[%d]: edited input: %w", ErrInvalidDecision, i, err)
	}
	if err := judgeEdit(ctx, pol, tools, c, canon); err != nil {
		return nil, fmt.Errorf("%w: calls[%d]: %w", ErrInvalidDecision, i, err)
	}
	return canon, nil
}

// judgeEdit asks the run's Policy about a held call with its edited input,
// as planning would have: the edit stands when the policy allows that
// call, or holds it under the very rule and approval terms the call was
// held for (the approver was found eligible under those). Otherwise an
// edit could run what no rule let this approver approve: a path a deny
// rule protects, or one a stricter rule reserves to other approvers or
// more of them. Only a call held for approval is edited (resolveDecision).
func judgeEdit(ctx context.Context, pol Policy, tools *Toolbox, held PendingCall, input json.RawMessage) error {
	if pol == nil {
		return nil
	}
	tool, ok := tools.Lookup(held.Name)
	if !ok {
		return nil // refused before: unknown tools are not edited
	}
	e := PendingCall{ID: held.ID, Name: held.Name, Input: input}
	judge(ctx, pol, tool, &e, "")
	switch {
	case e.Denied != "":
		return fmt.Errorf("the edited input is refused by policy rule %q: %s", e.Rule, e.Denied)
	case !e.NeedsApproval:
		return nil
	case e.Rule == held.Rule && sameApproval(e.Approval, held.Approval):
		return nil
	}
	const advice = "approve or deny the call as it is (a denial's message can say what to do instead)"
	if e.Rule == held.Rule {
		return fmt.Errorf("with the edited input policy rule %q asks for other approval terms%s than the reviewed call's; %s",
			e.Rule, approvalTerms(e.Approval), advice)
	}
	return fmt.Errorf("with the edited input the call falls under policy rule %q%s, not under rule %q it was held for; %s",
		e.Rule, approvalTerms(e.Approval), held.Rule, advice)
}

// sameApproval reports whether two calls' approval terms are the same.
func sameApproval(a, b *ApprovalRule) bool {
	var x, y ApprovalRule
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	return slices.Equal(x.Approvers, y.Approvers) && max(x.RequiredApprovals, 1) == max(y.RequiredApprovals, 1) &&
		x.FourEyes == y.FourEyes && x.AlwaysAsk == y.AlwaysAsk
}

// approvalTerms describes a rule's approval terms for an error message.
func approvalTerms(a *ApprovalRule) string {
	if a == nil {
		return ""
	}
	var parts []string
	if len(a.Approvers) > 0 {
		parts = append(parts, "approvers "+strings.Join(a.Approvers, ", "))
	}
	if a.RequiredApprovals > 1 {
		parts = append(parts, fmt.Sprintf("%d approvals", a.RequiredApprovals))
	}
	if a.FourEyes {
		parts = append(parts, "four eyes")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// revived returns the runner to run a segment with: r with the toolbox
// Toolbox.Revive returns for a run with opts that is about to run calls
// (their tools are looked for again when this process lacks them; with no
// allowed tools, every absent tool is), r itself when that is r's. The
// segment keeps that toolbox; r is not changed (it may serve other runs).
func (r *Runner) revived(ctx context.Context, opts Options, calls []PendingCall) *Runner {
	names := slices.Clone(opts.AllowedTools)
	for _, c := range calls {
		names = append(names, c.Name)
	}
	tb := r.Tools.Revive(ctx, names, len(opts.AllowedTools) == 0)
	if tb == r.Tools {
		return r
	}
	cp := *r
	cp.Tools = tb
	return &cp
}

func (r *Runner) check() error {
	if r.Model == nil || r.Tools == nil {
		return errors.New("loop: runner needs a Model and Tools")
	}
	return nil
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) newID() string {
	if r.NewID != nil {
		return r.NewID()
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// heldTurnMatches checks that the transcript ends with the assistant turn
// whose tool_use blocks are exactly the pending calls.
func heldTurnMatches(state *SuspendedState) error {
	msgs := state.Transcript.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleAssistant {
		return fmt.Errorf("%w: the suspended transcript does not end with the held assistant turn", ErrInvalidDecision)
	}
	uses := msgs[len(msgs)-1].ToolUses()
	if len(uses) != len(state.PendingCalls) {
		return fmt.Errorf("%w: the held turn has %d calls, the state lists %d", ErrInvalidDecision, len(uses), len(state.PendingCalls))
	}
	for i, u := range uses {
		if u.ID != state.PendingCalls[i].ID {
			return fmt.Errorf("%w: the held turn's call %d is %s, the state lists %s", ErrInvalidDecision, i, u.ID, state.PendingCalls[i].ID)
		}
	}
	return nil
}

// resolveDecision turns a decision into one CallDecision per pending call;
// pol (nil: none) judges edited inputs (judgeEdit). deciding is true for a
// decision being made (ValidateDecision): a per-call deny or edit of a call
// that needs no approval is refused (CheckCallDecision, which the approval
// form shares). A decision accepted before that rule (Resume, deciding
// false) still applies as it was accepted.
func resolveDecision(ctx context.Context, tools *Toolbox, pol Policy, calls []PendingCall, digest string, d Decision, deciding bool) (map[string]CallDecision, error) {
	// The decision's own shape first: a malformed decision is wrong
	// whatever turn it names.
	switch {
	case d.Action != "" && len(d.Calls) > 0:
		return nil, fmt.Errorf("%w: give either a turn action or per-call decisions, not both", ErrInvalidDecision)
	case d.Action == "" && len(d.Calls) == 0:
		return nil, fmt.Errorf("%w: the decision has neither a turn action nor per-call decisions", ErrInvalidDecision)
	case d.Action != "" && d.Action != ActionApprove && d.Action != ActionDeny:
		return nil, fmt.Errorf("%w: turn action must be %q or %q, got %q", ErrInvalidDecision, ActionApprove, ActionDeny, d.Action)
	}
	if err := checkCallShapes(d); err != nil {
		return nil, err
	}
	if d.TurnDigest != digest {
		return nil, fmt.Errorf("%w: decision names %q, the held turn is %q", ErrDigestMismatch, d.TurnDigest, digest)
	}
	byID := make(map[string]PendingCall, len(calls))
	for _, c := range calls {
		byID[c.ID] = c
	}
	out := make(map[string]CallDecision, len(calls))
	if d.Action != "" {
		for _, c := range calls {
			out[c.ID] = CallDecision{CallID: c.ID, Action: d.Action, Message: d.Message}
		}
		return out, nil
	}
	for i, cd := range d.Calls {
		c, ok := byID[cd.CallID]
		if !ok {
			return nil, fmt.Errorf("%w: calls[%d]: call %q is not pending in this turn", ErrInvalidDecision, i, cd.CallID)
		}
		if err := CheckCallDecision(c, cd.Action); err != nil && (deciding || c.Denied != "") {
			advice := "only calls held for approval are decided one by one (leave it out of calls; where one decision decides the turn, action deny denies every call)"
			if c.Denied != "" {
				advice = "leave it out of calls"
			}
			return nil, fmt.Errorf("%w: calls[%d]: %w; %s", ErrInvalidDecision, i, err, advice)
		}
		if err := checkRemember(c, cd); err != nil {
			return nil, fmt.Errorf("%w: calls[%d]: %w", ErrInvalidDecision, i, err)
		}
		if cd.Action == ActionEdit {
			canon, err := checkEdit(ctx, tools, pol, c, cd, i)
			if err != nil {
				return nil, err
			}
			cd.Input = canon
		}
		out[cd.CallID] = cd
	}
	for _, c := range calls {
		if _, ok := out[c.ID]; ok {
			continue
		}
		if c.NeedsApproval {
			return nil, fmt.Errorf("%w: call %q (%s) needs a decision", ErrInvalidDecision, c.ID, c.Name)
		}
		out[c.ID] = CallDecision{CallID: c.ID, Action: ActionApprove}
	}
	return out, nil
}

// CheckCallDecision checks that call c of a held turn may be decided one
// by one with action (approve, deny or edit), the rule a per-call decision
// made through the API (ValidateDecision) and a choice on the approval
// form both follow: a call a deny rule refused is never decided (it never
// runs), and a call that needs no approval (a read, a write an allow rule
// or an earlier remember lets run, an unknown tool's call) may be approved,
// which changes nothing, but not denied or edited: nobody was asked about
// it, and it runs (or, for an unknown tool, fails) whatever the decision.
// Only a whole-turn denial stops it. The error names the call and says
// why; callers add what to do instead, in their own terms.
func CheckCallDecision(c PendingCall, action Action) error {
	switch {
	case c.Denied != "":
		return fmt.Errorf("call %q (%s) was denied by policy rule %q: it never runs, so it cannot be decided", c.ID, c.Name, c.Rule)
	case c.NeedsApproval || action == ActionApprove:
		return nil
	}
	why, runs := "", ": it runs without one"
	switch {
	case c.Rejected != "":
		runs = fmt.Sprintf(" and cannot run (%s)", cutText(c.Rejected, 200))
	case c.ApprovedBy != "":
		why = fmt.Sprintf(" (%s approved %s for the rest of the run)", c.ApprovedBy, c.Name)
	case c.Effect == EffectRead:
		why = " (its tool only reads)"
	case c.Rule != "":
		why = fmt.Sprintf(" (policy rule %q allows it)", c.Rule)
	}
	verb := "denied"
	if action == ActionEdit {
		verb = "edited"
	}
	return fmt.Errorf("call %q (%s) needs no approval%s%s, so it cannot be %s", c.ID, c.Name, why, runs, verb)
}

// checkCallShapes checks what per-call decisions must be whatever turn
// they name: a message only beside a turn action, each call decided once,
// a known action, input with edit and only with edit, and remember only
// "run" beside approve or edit.
func checkCallShapes(d Decision) error {
	if len(d.Calls) > 0 && d.Message != "" {
		return fmt.Errorf("%w: a message goes with a turn action or inside a per-call decision", ErrInvalidDecision)
	}
	seen := make(map[string]bool, len(d.Calls))
	for i, cd := range d.Calls {
		if seen[cd.CallID] {
			return fmt.Errorf("%w: calls[%d]: call %q is decided twice", ErrInvalidDecision, i, cd.CallID)
		}
		seen[cd.CallID] = true
		switch cd.Action {
		case ActionApprove, ActionDeny:
			if len(cd.Input) > 0 {
				return fmt.Errorf("%w: calls[%d]: input is only allowed with action %q", ErrInvalidDecision, i, ActionEdit)
			}
		case ActionEdit:
			if len(cd.Input) == 0 {
				return fmt.Errorf("%w: calls[%d]: action edit needs the edited input", ErrInvalidDecision, i)
			}
			if t := bytes.TrimSpace(cd.Input); len(t) == 0 || t[0] != '{' {
				return fmt.Errorf("%w: calls[%d]: edited input must be a JSON object, as a tool's input is", ErrInvalidDecision, i)
			}
		default:
			return fmt.Errorf("%w: calls[%d]: action must be approve, deny or edit, got %q", ErrInvalidDecision, i, cd.Action)
		}
		switch {
		case cd.Remember == "":
		case cd.Remember != RememberRun:
			return fmt.Errorf("%w: calls[%d]: remember must be %q, got %q", ErrInvalidDecision, i, RememberRun, cd.Remember)
		case cd.Action == ActionDeny:
			return fmt.Errorf("%w: calls[%d]: remember goes with approve or edit, not %s", ErrInvalidDecision, i, cd.Action)
		}
	}
	return nil
}

// checkRemember checks a per-call remember option against its call: only
// on a call that needs approval, and never when its rule says always_ask
// or needs more than one approval.
func checkRemember(c PendingCall, cd CallDecision) error {
	switch {
	case cd.Remember == "":
		return nil // its value and action: checkCallShapes
	case !c.NeedsApproval:
		return fmt.Errorf("call %q needs no approval, so there is nothing to remember", c.ID)
	case c.Approval != nil && c.Approval.AlwaysAsk:
		return fmt.Errorf("policy rule %q says always ask for %s: it cannot be approved for the rest of the run", c.Rule, c.Name)
	case c.Approval != nil && c.Approval.RequiredApprovals > 1:
		return fmt.Errorf("policy rule %q needs %d approvals for %s: it cannot be approved for the rest of the run by one person", c.Rule, c.Approval.RequiredApprovals, c.Name)
	}
	return nil
}

func cloneTranscript(t Transcript) Transcript {
	out := Transcript{System: t.System, Messages: make([]Message, len(t.Messages))}
	for i, m := range t.Messages {
		out.Messages[i] = Message{Role: m.Role, Content: append([]Block(nil), m.Content...)}
	}
	return out
}

// mustJSON marshals values that cannot fail to marshal.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

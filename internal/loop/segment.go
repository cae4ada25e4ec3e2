package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// segment is one stretch of a run: from Run or Resume to the next outcome.
type segment struct {
	r            *Runner
	runID        string
	suspensionID string
	tr           Transcript
	counters     Counters
	opts         Options
	specs        []ToolSpec
	allowed      map[string]bool
	// allowedNames are the keys of allowed, in the order the model sees them.
	allowedNames []string
	trace        []Step
	// unconfirmed maps the ids of resumed calls whose tool could not confirm
	// its definition to the reason; they get an error result and never run.
	unconfirmed map[string]string
	// turn is the assistant turn whose calls are being executed (nil
	// between turns).
	turn *turnState
	// progressed is set once the segment made a model call or handled a
	// call: only then may it yield (so every segment moves the run on).
	progressed bool
	// yielded is set when the segment stopped for Hooks.Yield.
	yielded bool
}

// turnState is the assistant turn being executed: its calls, what was
// decided for each (nil: a turn that needed no approval), how many are
// handled (a result, or handed over to the caller) and what they gave.
type turnState struct {
	calls   []PendingCall
	actions map[string]CallDecision
	done    int
	tr      turnResults
}

// newTurnState returns the turn of calls, decided with actions (nil: a
// turn that needed no approval), with none of its calls handled.
func newTurnState(calls []PendingCall, actions map[string]CallDecision) *turnState {
	return &turnState{calls: calls, actions: actions, tr: turnResults{results: make(map[string]Result, len(calls))}}
}

// handled records the result of the next call of the turn.
func (t *turnState) handled(id string, res Result) {
	t.tr.results[id] = res
	t.done++
}

func (r *Runner) newSegment(runID, suspensionID string, tr Transcript, c Counters, opts Options) *segment {
	s := &segment{r: r, runID: runID, suspensionID: suspensionID, tr: tr, counters: c, opts: opts}
	names := opts.AllowedTools
	if len(names) == 0 {
		names = r.Tools.Names()
	} else {
		// A run's client tools are its caller's own: always offered.
		names = append(append([]string(nil), names...), r.Tools.ClientNames()...)
	}
	s.allowed = make(map[string]bool, len(names))
	for _, name := range names {
		if _, ok := r.Tools.Lookup(name); ok && !s.allowed[name] {
			s.allowed[name] = true
			s.allowedNames = append(s.allowedNames, name)
		}
	}
	s.specs = r.specsOf(s.allowedNames)
	return s
}

// specsOf returns what the model is told about the named tools.
func (r *Runner) specsOf(names []string) []ToolSpec {
	specs := make([]ToolSpec, 0, len(names))
	for _, name := range names {
		t, _ := r.Tools.Lookup(name)
		specs = append(specs, t.Definition().Spec())
	}
	return specs
}

func (s *segment) outcome() Outcome {
	return Outcome{Transcript: s.tr, Counters: s.counters, Trace: s.trace}
}

func (s *segment) record(ctx context.Context, st Step) error {
	st.At = s.r.now()
	if st.Iteration == 0 {
		st.Iteration = s.counters.Iterations
	}
	c := s.counters
	st.Counters = &c
	s.trace = append(s.trace, st)
	if s.r.Hooks.OnStep != nil {
		if err := s.r.Hooks.OnStep(ctx, st); err != nil {
			return fmt.Errorf("record %s step: %w", st.Kind, err)
		}
	}
	return nil
}

// stopReason says whether the run must stop before the next model call.
func (s *segment) stopReason(ctx context.Context) (TerminationReason, string) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return ReasonBudgetExhausted, "deadline exceeded"
		}
		return ReasonCancelled, "cancelled"
	}
	if !s.opts.Deadline.IsZero() && !s.r.now().Before(s.opts.Deadline) {
		return ReasonBudgetExhausted, "deadline exceeded"
	}
	if s.opts.MaxTokens > 0 && s.counters.Tokens() >= s.opts.MaxTokens {
		return ReasonBudgetExhausted, fmt.Sprintf("token budget of %d used", s.opts.MaxTokens)
	}
	maxIt := s.opts.MaxIterations
	if maxIt <= 0 {
		maxIt = DefaultMaxIterations
	}
	if s.counters.Iterations >= maxIt {
		return ReasonMaxIterations, fmt.Sprintf("%d iterations", maxIt)
	}
	return "", ""
}

func (s *segment) loop(ctx context.Context) (Outcome, error) {
	for {
		if reason, detail := s.stopReason(ctx); reason != "" {
			if s.deadlineYield(ctx) {
				return s.yieldOutcome(), nil
			}
			return s.finish(ctx, reason, detail)
		}
		if s.wantsYield(ctx) {
			return s.yieldOutcome(), nil
		}
		resp, err := s.generate(ctx)
		if err != nil {
			if s.deadlineYield(ctx) {
				// The process's time ran out during the call: the next
				// segment makes it again.
				return s.yieldOutcome(), nil
			}
			if s.outlivedSegment(ctx) {
				// Made again as the segment's first call, it had all of
				// the worker's time: the provider does not answer in time,
				// which is not the run's own budget.
				return s.finish(ctx, ReasonProviderFailed, "the model call did not finish within the time one worker has")
			}
			if reason, detail := s.stopReason(ctx); reason == ReasonCancelled || reason == ReasonBudgetExhausted {
				return s.finish(ctx, reason, detail)
			}
			return s.finish(ctx, ReasonProviderFailed, err.Error())
		}
		s.progressed = true
		s.counters.Iterations++
		s.counters.ModelCalls++
		s.counters.InputTokens += resp.Usage.InputTokens
		s.counters.OutputTokens += resp.Usage.OutputTokens
		msg := resp.Message
		msg.Role = RoleAssistant
		if err := validateTurn(msg); err != nil {
			return s.finish(ctx, ReasonProviderFailed, "the model returned an invalid turn: "+err.Error())
		}
		s.tr.Messages = append(s.tr.Messages, msg)
		uses := msg.ToolUses()
		usage := resp.Usage
		if err := s.record(ctx, Step{Kind: StepModelTurn, Usage: &usage, StopReason: resp.StopReason, ToolCalls: len(uses)}); err != nil {
			return s.outcome(), err
		}
		if len(uses) == 0 {
			out, err := s.finish(ctx, ReasonCompleted, "")
			out.FinalText = msg.Text()
			return out, err
		}
		if resp.StopReason == StopMaxTokens || resp.StopReason == StopRefusal {
			// A cut-off or refused turn may carry incomplete tool input: run
			// none of its calls (that would fire side effects nobody
			// confirmed) and tell the model why.
			results := make([]Block, 0, len(uses))
			for _, u := range uses {
				results = append(results, ToolResultBlock(u.ID, ErrorResult("not executed: the turn ended with stop reason %q, so this call may be incomplete", resp.StopReason)))
			}
			s.tr.Messages = append(s.tr.Messages, Message{Role: RoleUser, Content: results})
			continue
		}
		if s.opts.MaxTokens > 0 && s.counters.Tokens() > s.opts.MaxTokens {
			return s.finish(ctx, ReasonBudgetExhausted, fmt.Sprintf("token budget of %d used", s.opts.MaxTokens))
		}
		calls := s.plan(ctx, uses)
		var unverified map[string]*UnverifiedDefinition
		if needsApprovalIn(calls) {
			var changed bool
			if changed, unverified = s.refreshHeld(ctx, calls); changed {
				// A tool's source changed its definition since this
				// process read it: the turn is judged, previewed and held
				// on the definition the source has now.
				calls = s.plan(ctx, uses)
			}
		}
		if (needsApprovalIn(calls) || s.hasClientCall(calls)) && len(calls) > MaxHeldCalls {
			// Too many calls to hold for approval or for the caller's
			// results: run none and say why.
			results := make([]Block, 0, len(calls))
			for _, c := range calls {
				results = append(results, ToolResultBlock(c.ID, ErrorResult(
					"not executed: this turn has %d tool calls and some need approval or are executed by the caller; such a turn may hold at most %d calls. Make fewer calls per turn.",
					len(calls), MaxHeldCalls)))
			}
			s.tr.Messages = append(s.tr.Messages, Message{Role: RoleUser, Content: results})
			continue
		}
		if needsApprovalIn(calls) {
			noteUnverified(calls, unverified)
			return s.suspend(ctx, calls)
		}
		tr, err := s.execute(ctx, calls, nil)
		if err != nil {
			return s.outcome(), err
		}
		if s.yielded {
			return s.yieldOutcome(), nil
		}
		if tr.stop != "" {
			return s.finish(ctx, tr.stop, "")
		}
		if len(tr.handOver) > 0 {
			return s.handOver(ctx, calls, tr)
		}
	}
}

// wantsYield asks Hooks.Yield whether the segment should end here; a
// segment that has done nothing yet never yields.
func (s *segment) wantsYield(ctx context.Context) bool {
	return s.r.Hooks.Yield != nil && s.progressed && s.r.Hooks.Yield(ctx)
}

// deadlineYield reports whether the segment should yield because its
// context's deadline passed: the process's time is up, not the run's own
// deadline (which ends the run budget_exhausted).
func (s *segment) deadlineYield(ctx context.Context) bool {
	if s.r.Hooks.Yield == nil || !s.progressed || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return false
	}
	return s.opts.Deadline.IsZero() || s.r.now().Before(s.opts.Deadline)
}

// outlivedSegment reports whether the process's time ran out during the
// segment's first call: the call had all of the segment's time (a segment
// that did something first yields instead, and the next one makes the call
// again as its first).
func (s *segment) outlivedSegment(ctx context.Context) bool {
	if s.r.Hooks.Yield == nil || s.progressed || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return false
	}
	return s.opts.Deadline.IsZero() || s.r.now().Before(s.opts.Deadline)
}

// yieldOutcome ends the segment with a checkpoint to continue from.
func (s *segment) yieldOutcome() Outcome {
	s.yielded = true
	out := s.outcome()
	out.Kind = OutcomeCheckpoint
	out.Checkpoint = s.checkpoint()
	return out
}

// checkpoint returns where the run stands: between turns, or in the middle
// of the turn being executed. It shares memory with the segment.
func (s *segment) checkpoint() *Checkpoint {
	cp := &Checkpoint{
		Kind: checkpointKind, SchemaVersion: CheckpointSchemaVersion,
		RunID: s.runID, SuspensionID: s.suspensionID,
		Transcript:  Transcript{System: s.tr.System, Messages: slices.Clip(s.tr.Messages)},
		Counters:    s.counters,
		Options:     s.opts,
		Unconfirmed: s.unconfirmed,
		At:          s.r.now().UTC(),
	}
	t := s.turn
	if t == nil {
		return cp
	}
	p := &TurnProgress{Calls: slices.Clip(t.calls), Done: t.done, Results: []Block{}, HandOver: slices.Clip(t.tr.handOver), Denied: t.tr.denied}
	for _, c := range t.calls[:t.done] {
		if res, ok := t.tr.results[c.ID]; ok {
			p.Results = append(p.Results, ToolResultBlock(c.ID, res))
		}
	}
	if t.actions != nil {
		p.Decisions = make([]CallDecision, 0, len(t.calls))
		for _, c := range t.calls {
			p.Decisions = append(p.Decisions, t.actions[c.ID])
		}
	}
	cp.Turn = p
	for _, c := range p.Remaining() {
		if h, ok := s.r.Tools.Hash(c.Name); ok && s.allowed[c.Name] {
			if cp.ToolHashes == nil {
				cp.ToolHashes = map[string]string{}
			}
			cp.ToolHashes[c.Name] = h
		}
	}
	return cp
}

// generate makes one model call, bounded by the run's deadline.
func (s *segment) generate(ctx context.Context) (ModelResponse, error) {
	if !s.opts.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.opts.Deadline)
		defer cancel()
	}
	return s.r.Model.Generate(ctx, ModelRequest{
		Model:           s.opts.Model,
		System:          s.tr.System,
		Messages:        s.tr.Messages,
		Tools:           s.specs,
		MaxOutputTokens: s.opts.MaxOutputTokens,
	})
}

// validateTurn checks an assistant turn: valid blocks, only text and
// tool_use, unique tool_use ids.
func validateTurn(m Message) error {
	seen := map[string]bool{}
	for _, b := range m.Content {
		if err := b.Validate(); err != nil {
			return err
		}
		switch b.Type {
		case BlockToolResult:
			return fmt.Errorf("an assistant turn cannot hold tool results")
		case BlockToolUse:
			if len(b.ID) > MaxCallIDBytes {
				return fmt.Errorf("a tool_use id is %d bytes, at most %d allowed", len(b.ID), MaxCallIDBytes)
			}
			if seen[b.ID] {
				return fmt.Errorf("tool_use id %q appears twice", b.ID)
			}
			seen[b.ID] = true
		}
	}
	return nil
}

// plan checks every call of a turn before any runs: unknown or disallowed
// tools and invalid inputs are rejected (an input that is no object or not
// I-JSON, CheckInputForm, before the policy sees it: such a call is never
// held), the rest are marked by whether they
// need approval (the tool's own trigger, then the runner's Policy, which may
// also refuse a call outright, then Unapprovable, which refuses a call whose
// approval can never be given).
func (s *segment) plan(ctx context.Context, uses []Block) []PendingCall {
	calls := make([]PendingCall, 0, len(uses))
	for _, u := range uses {
		in := u.Input
		if len(in) == 0 {
			in = mustJSON(map[string]any{})
		}
		c := PendingCall{ID: u.ID, Name: u.Name, Input: in}
		tool, ok := s.r.Tools.Lookup(u.Name)
		if !ok || !s.allowed[u.Name] {
			c.Rejected = s.r.Tools.Missing(u.Name)
			calls = append(calls, c)
			continue
		}
		if err := CheckInputForm(u.Name, in); err != nil {
			// An input that is no object or can be read in more than one
			// way: no policy judges it, no approver is shown it and no
			// caller gets it; the model gets the error.
			c.Rejected = err.Error()
			c.Effect = tool.Definition().Effect
			calls = append(calls, c)
			continue
		}
		if err := s.r.Tools.ValidateInput(u.Name, in); err != nil {
			c.Rejected = err.Error()
		}
		judge(ctx, s.r.Policy, tool, &c, s.opts.Remembered[c.Name])
		calls = append(calls, c)
	}
	if s.r.Unapprovable != nil && needsApprovalIn(calls) {
		denials := s.r.Unapprovable(ctx, slices.Clone(calls))
		for i := range calls {
			if msg, ok := denials[calls[i].ID]; ok && calls[i].NeedsApproval {
				calls[i].NeedsApproval = false
				if a := calls[i].Approval; a != nil {
					calls[i].RuleDescription = a.Description // what the rule is for stays
				}
				calls[i].Approval = nil
				calls[i].Denied = msg
			}
		}
	}
	return calls
}

// notRunStep is the tool_executed step of a call that could not run at all
// (an unknown tool, an input its schema refuses, a tool whose definition
// could not be confirmed at resume): the error, detail ("not run: " and
// why), the rule that judged the call (none for a tool the policy never
// saw) and who approved its tool for the run, if anyone did. It names no
// effect: nothing took effect, and a store reads a write's step as a write
// that did (runs.Store.AddStep).
func notRunStep(c PendingCall, detail string) Step {
	return Step{Kind: StepToolExecuted, CallID: c.ID, Tool: c.Name, IsError: true, Detail: detail, Rule: c.Rule, ApprovedByRule: rememberedBy(c)}
}

// decidedAction is the action of the decision made on call c of a turn
// decided with actions (nil: a turn that needed none), "" when none was
// made on it: only a call held for approval is decided. One that needs no
// approval (an unknown tool's, a read) is approved by default when a
// per-call decision leaves it out, and approving it explicitly changes
// nothing (CheckCallDecision); a whole-turn denial stops it as a denial,
// never here.
func decidedAction(c PendingCall, actions map[string]CallDecision, act CallDecision) Action {
	if actions == nil || !c.NeedsApproval {
		return ""
	}
	return act.Action
}

// rememberedBy is a call's approved_by_rule: who approved its tool for the
// rest of the run ("" when nobody did).
func rememberedBy(c PendingCall) string {
	if c.ApprovedBy == "" {
		return ""
	}
	return "remembered, by " + c.ApprovedBy
}

// deniedAtResumeDetail is the trail's note on a call of a resumed turn
// that a deny rule of the policy in force at the resume refused: the
// decision let it run, and the rule that judged it when the turn was held
// did not deny it. It does not say why the verdict changed: a rule
// deployed since, most often, but a directory change (a rule's condition
// on the initiator's groups) turns a verdict too.
func deniedAtResumeDetail(c PendingCall) string {
	held := "no policy rule judged it"
	if c.HeldRule != "" {
		held = fmt.Sprintf("rule %q judged it", c.HeldRule)
	}
	return fmt.Sprintf("denied at resume by policy rule %q of the policy in force then (when the turn was held, %s; the decision let it run): %s", c.Rule, held, c.Denied)
}

// rejectedDetail is the trail's note on a call that could not run at all,
// its reason cut to 500 bytes.
func rejectedDetail(why string) string {
	return "not run: " + cutText(why, 500)
}

// rejectedPreview is the preview of a held call whose input its schema
// refuses, its reason cut to 2000 bytes.
func rejectedPreview(why string) string {
	return "this call will fail as it is: " + cutText(why, 2000) + "\n(approving gives the model this error; where one decision decides the turn, an edit with a valid input runs instead)"
}

// cutText returns s, or its first limit bytes cut back to a rune boundary
// and marked "…" when it is longer.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// needsApprovalIn reports whether any call of a planned turn needs approval.
func needsApprovalIn(calls []PendingCall) bool {
	for _, c := range calls {
		if c.NeedsApproval {
			return true
		}
	}
	return false
}

// needsApproval is the tool's own approval trigger: the explicit marker, a
// write effect (unless the deployment exempted the tool), or the tool's
// argument policy.
func needsApproval(tool Tool, def Definition, c PendingCall) bool {
	if def.RequiresApproval || (def.Effect == EffectWrite && !def.NoApproval) {
		return true
	}
	p, ok := tool.(ArgumentPolicy)
	return ok && p.NeedsApproval(c.Input)
}

// judge marks c as its tool's own trigger and then the runner's Policy
// (nil: none) say: planning a turn, and an approver's edit of a held call
// (judgeEdit), judge a call alike.
func judge(ctx context.Context, pol Policy, tool Tool, c *PendingCall, rememberedBy string) {
	def := tool.Definition()
	c.Effect = def.Effect
	c.NeedsApproval = needsApproval(tool, def, *c)
	if pol != nil {
		applyVerdict(c, pol(ctx, PolicyQuery{Call: *c, Definition: def, RememberedBy: rememberedBy}))
	}
}

// applyVerdict records a Policy's verdict on the call. An action it does
// not know holds the call for approval (fail closed).
func applyVerdict(c *PendingCall, v Verdict) {
	c.Rule = v.Rule
	switch v.Action {
	case VerdictAllow:
		c.NeedsApproval = false
		c.ApprovedBy = v.ApprovedBy
		c.RuleDescription = v.Description
	case VerdictDeny:
		c.NeedsApproval = false
		c.RuleDescription = v.Description
		c.Denied = v.Message
		if c.Denied == "" {
			c.Denied = fmt.Sprintf("denied by policy rule %q", v.Rule)
		}
	default:
		c.NeedsApproval = true
		if v.Approval != nil {
			a := *v.Approval
			a.Approvers = append([]string(nil), a.Approvers...)
			c.Approval = &a
		}
	}
}

func (s *segment) suspend(ctx context.Context, calls []PendingCall) (Outcome, error) {
	hashes := map[string]string{}
	previews := map[string]string{}
	for i, c := range calls {
		tool, ok := s.r.Tools.Lookup(c.Name)
		if !ok || !s.allowed[c.Name] {
			continue
		}
		hashes[c.Name], _ = s.r.Tools.Hash(c.Name)
		if c.NeedsApproval && c.Rejected != "" && c.Denied == "" {
			// An input its schema refuses: approvers see that it fails as it
			// is (an edit with a valid input can still run it).
			previews[c.ID] = rejectedPreview(c.Rejected)
			continue
		}
		if !c.NeedsApproval || c.Rejected != "" || c.Denied != "" {
			continue
		}
		if p, ok := tool.(Previewer); ok {
			var (
				text, base string
				err        error
			)
			if bp, ok := p.(BasedPreviewer); ok {
				text, base, err = bp.PreviewWithBase(ctx, c.Input)
			} else {
				text, err = p.Preview(ctx, c.Input)
			}
			if err != nil {
				// Approvers never see a raw system error; the call itself
				// reports what is wrong when it runs.
				text, base = "preview unavailable: the tool could not compute it", ""
			}
			calls[i].PreviewBase = base
			if len(text) > MaxPreviewBytes {
				cut := MaxPreviewBytes
				for cut > 0 && !utf8.RuneStart(text[cut]) {
					cut--
				}
				text = text[:cut] + fmt.Sprintf("\n… (preview truncated by agentgate: %d of %d bytes kept)", cut, len(text))
			}
			if text != "" {
				previews[c.ID] = text
			}
		}
	}
	if len(previews) == 0 {
		previews = nil
	}
	return s.hold(ctx, OutcomeSuspended, calls, hashes, func(st *SuspendedState) Step {
		st.SchemaVersion = SchemaVersion
		st.Previews = previews
		return Step{Kind: StepSuspended, ToolCalls: len(calls)}
	})
}

// hold ends the segment holding the turn's calls under a new id (a
// suspension, or a hand-over's tool-results id): the state with the
// transcript, counters, options, tool hashes and the turn digest, which
// binds the run, the id and the calls. complete fills in what is the
// kind's own and returns the step that records it.
func (s *segment) hold(ctx context.Context, out OutcomeKind, calls []PendingCall, hashes map[string]string, complete func(*SuspendedState) Step) (Outcome, error) {
	id := s.r.newID()
	digest, err := TurnDigest(s.runID, id, calls)
	if err != nil {
		return s.outcome(), fmt.Errorf("turn digest: %w", err)
	}
	state := &SuspendedState{
		RunID:        s.runID,
		SuspensionID: id,
		Transcript:   s.tr,
		PendingCalls: calls,
		Counters:     s.counters,
		Options:      s.opts,
		ToolHashes:   hashes,
		TurnDigest:   digest,
		SuspendedAt:  s.r.now().UTC(),
	}
	step := complete(state)
	step.SuspensionID, step.TurnDigest = id, digest
	if err := s.record(ctx, step); err != nil {
		return s.outcome(), err
	}
	o := s.outcome()
	o.Kind = out
	o.Suspended = state
	return o, nil
}

// turnResults is what execute did with a turn.
type turnResults struct {
	// denied says an approver denied a call.
	denied bool
	// stop is a reason to stop when the context ended between calls.
	stop TerminationReason
	// handOver lists the client calls to hand to the caller, in turn
	// order; when set, results holds every other call's result and no
	// results message was appended yet.
	handOver []ClientCall
	results  map[string]Result
}

// execute gives every call exactly one result, in turn order, and appends
// them as one user message — unless the turn has client calls to hand
// over: then the other calls' results are kept in turnResults and the
// message is written when the caller's results arrive (ResumeWithResults).
// actions is nil for a turn that needed no approval. Client calls are
// never handed over when the segment stops in the turn (an error, the
// context ending, a denial that ends the run): they get a "not executed"
// result like any call that did not run. When the segment yields in the
// middle of the turn (s.yielded), nothing is appended: the checkpoint
// holds the turn's progress.
func (s *segment) execute(ctx context.Context, calls []PendingCall, actions map[string]CallDecision) (turnResults, error) {
	t := newTurnState(calls, actions)
	s.turn = t
	err := s.runTurn(ctx)
	return t.tr, err
}

// runTurn handles the calls of s.turn from the first one not handled yet.
func (s *segment) runTurn(ctx context.Context) (err error) {
	t := s.turn
	tr := &t.tr
	calls := t.calls
	// notRun, when set, is the result of every call left without one
	// when the turn stops.
	var notRun *Result
	defer func() {
		if s.yielded {
			return
		}
		s.turn = nil
		endsOnDenial := tr.denied && s.opts.DenialEndsRun
		if len(tr.handOver) > 0 && tr.stop == "" && err == nil && !endsOnDenial {
			return // the results wait for the caller's
		}
		if notRun == nil {
			res := ErrorResult("not executed: the run stopped")
			switch {
			case tr.stop != "":
				res = ErrorResult("not executed: the run ended (%s)", tr.stop)
			case err == nil && endsOnDenial:
				res = ErrorResult("not executed: the run ended (%s)", ReasonApprovalDenied)
			}
			notRun = &res
		}
		tr.handOver = nil
		results := make([]Block, 0, len(calls))
		for _, c := range calls {
			res, ok := tr.results[c.ID]
			if !ok {
				res = *notRun
			}
			results = append(results, ToolResultBlock(c.ID, res))
		}
		if len(results) > 0 {
			s.tr.Messages = append(s.tr.Messages, Message{Role: RoleUser, Content: results})
		}
	}()
	for t.done < len(calls) {
		c := calls[t.done]
		if tr.stop == "" && ctx.Err() != nil {
			if s.deadlineYield(ctx) {
				s.yielded = true
				return nil
			}
			tr.stop, _ = s.stopReason(ctx)
		}
		if tr.stop != "" {
			t.done++ // "not executed: the run ended"
			continue
		}
		if s.wantsYield(ctx) {
			s.yielded = true
			return nil
		}
		if c.Denied != "" {
			// The policy refused the call: it never runs, whatever the decision.
			s.progressed = true
			t.handled(c.ID, ErrorResult("Error: tool %q was denied by policy rule %q: %s", c.Name, c.Rule, c.Denied))
			st := Step{Kind: StepToolDenied, CallID: c.ID, Tool: c.Name, Effect: c.Effect, Action: ActionDeny, IsError: true, Rule: c.Rule, Detail: "denied by policy: " + c.Denied}
			if c.DeniedAtResume {
				st.DeniedAtResume, st.HeldRule = true, c.HeldRule
				st.Detail = deniedAtResumeDetail(c)
			}
			if err := s.record(ctx, st); err != nil {
				return err
			}
			continue
		}
		act := CallDecision{CallID: c.ID, Action: ActionApprove}
		if t.actions != nil {
			act = t.actions[c.ID]
		} else if c.NeedsApproval {
			// Defence in depth: plan routes such turns to suspend, never here.
			res := ErrorResult("not executed: call needs approval")
			notRun = &res
			return fmt.Errorf("call %s needs approval but reached execution without a decision", c.ID)
		}
		if act.Action == ActionDeny {
			tr.denied = true
			s.progressed = true
			t.handled(c.ID, denialResult(c.Name, act.Message))
			if err := s.record(ctx, Step{Kind: StepToolDenied, CallID: c.ID, Tool: c.Name, Effect: c.Effect, Action: ActionDeny, IsError: true, Rule: c.Rule}); err != nil {
				return err
			}
			continue
		}
		input, rejected := c.Input, c.Rejected
		if act.Action == ActionEdit {
			input, rejected = act.Input, ""
		} else if rejected == "" && len(input) > 0 {
			// Defence in depth: plan rejects an input that is no object or
			// not I-JSON, but a state or checkpoint written by an earlier
			// build may hold one as runnable.
			if err := CheckInputForm(c.Name, input); err != nil {
				rejected = err.Error()
			}
		}
		if rejected != "" {
			s.progressed = true
			t.handled(c.ID, ErrorResult("Error: %s", rejected))
			// The trail says the call did not run and why; an action only
			// when a decision was made on the call (decidedAction).
			st := notRunStep(c, rejectedDetail(rejected))
			st.Action = decidedAction(c, t.actions, act)
			if err := s.record(ctx, st); err != nil {
				return err
			}
			continue
		}
		if why, ok := s.unconfirmed[c.ID]; ok {
			s.progressed = true
			// The trail says why in the words the model gets: the tool's
			// own reason (an MCP server's cause, never its address).
			why = fmt.Sprintf("%s could not be run or its current definition confirmed here (%s)", c.Name, why)
			t.handled(c.ID, ErrorResult("not executed: %s", why))
			st := notRunStep(c, rejectedDetail(why))
			st.Action = decidedAction(c, t.actions, act)
			if err := s.record(ctx, st); err != nil {
				return err
			}
			continue
		}
		if tool, ok := s.r.Tools.Lookup(c.Name); ok && tool.Definition().Client {
			// The caller executes it: handed over once the turn's
			// server-side calls have run.
			tr.handOver = append(tr.handOver, ClientCall{ID: c.ID, Name: c.Name, Input: input, Edited: act.Action == ActionEdit})
			t.done++
			continue
		}
		added, err := s.call(ctx, c, input, act)
		if err != nil {
			if s.yielded {
				// The process's time ran out during a call that may run
				// again (a read, or an idempotent write under the same key).
				return nil
			}
			if !added {
				tr.results[c.ID] = ErrorResult("not executed: %v", err)
			}
			if ctx.Err() != nil {
				tr.stop = ReasonCancelled
				res := ErrorResult("not executed: the run stopped")
				notRun = &res
				return nil
			}
			return err
		}
	}
	return nil
}

// StepToolDenied marks a call an approver denied; it never ran.
const StepToolDenied StepKind = "tool_denied"

// idempotencyKey is the key of call id in the turn being executed
// (callKey).
func (s *segment) idempotencyKey(id string) string {
	return callKey(s.runID, s.suspensionID, s.tr, id)
}

// callKey is the idempotency key of call id in the turn being executed, the
// last assistant message of tr, in the stretch of run runID that continues
// suspension suspensionID ("-" before the first): "runID/suspensionID/callID",
// and "#N" after it when the model reused that call id in N earlier turns
// (a model's ids are its own; two different calls must never share a key,
// and a replay of the same call must find the same one, which it does:
// the turns before it are the same).
func callKey(runID, suspensionID string, tr Transcript, id string) string {
	key := runID + "/" + suspensionID + "/" + id
	last := len(tr.Messages) - 1
	for last >= 0 && tr.Messages[last].Role != RoleAssistant {
		last--
	}
	n := 0
	for _, m := range tr.Messages[:max(last, 0)] {
		if m.Role != RoleAssistant {
			continue
		}
		for _, u := range m.ToolUses() {
			if u.ID == id {
				n++
			}
		}
	}
	if n > 0 {
		key += "#" + strconv.Itoa(n)
	}
	return key
}

func denialResult(tool, reason string) Result {
	if reason == "" {
		return ErrorResult("Error: tool %q was denied by the approver.", tool)
	}
	return ErrorResult("Error: tool %q was denied by the approver: %s", tool, reason)
}

// call executes one tool call with its idempotency key, fencing writes,
// and records its result as the turn's next. added says whether the result
// was recorded (a hook or the step record can still fail after that).
func (s *segment) call(ctx context.Context, c PendingCall, input []byte, act CallDecision) (added bool, err error) {
	tool, _ := s.r.Tools.Lookup(c.Name)
	def := tool.Definition()
	if def.Client {
		return false, fmt.Errorf("tool %s (call %s) is a client tool and cannot be executed here", c.Name, c.ID)
	}
	pc := c
	pc.Input = input
	key := s.idempotencyKey(c.ID)
	fenced := FencedCall{PendingCall: pc, Idempotent: def.Idempotent, Key: key}
	if def.Effect == EffectWrite && s.r.Hooks.BeforeEffect != nil {
		fenced.Checkpoint = s.checkpoint()
		if err := s.r.Hooks.BeforeEffect(ctx, fenced); err != nil {
			return false, fmt.Errorf("fence before %s: %w", c.ID, err)
		}
	}
	start := s.r.now()
	callCtx := WithIdempotencyKey(ctx, key)
	if c.PreviewBase != "" {
		callCtx = WithPreviewBase(callCtx, c.PreviewBase)
	}
	res, err := tool.Call(callCtx, input)
	dur := s.r.now().Sub(start)
	if err != nil && def.Effect != EffectWrite && s.outlivedSegment(ctx) {
		// The call had a whole segment's time and did not finish: making it
		// again in the next segment would end the same way, for ever. It is
		// a tool failure the model can react to.
		res, err = ErrorResult("Error: the call of %s did not finish within the time one worker has (%s); it was stopped.", c.Name, dur.Round(time.Second)), nil
	}
	if err != nil {
		if s.deadlineYield(ctx) && (def.Effect != EffectWrite || def.Idempotent) {
			// Safe to make again in the next segment, with the same key.
			s.yielded = true
			return false, fmt.Errorf("tool %s (call %s): %w", c.Name, c.ID, err)
		}
		if def.Effect == EffectWrite && errors.Is(err, ErrNoEffect) {
			// Nothing happened: lift the fence, so the run does not end as
			// an interrupted write.
			var ferr error
			switch {
			case s.r.Hooks.NoEffect != nil:
				ferr = s.r.Hooks.NoEffect(ctx, pc)
			case s.r.Hooks.AfterEffect != nil:
				ferr = s.r.Hooks.AfterEffect(ctx, fenced, ErrorResult("not executed: the tool failed before it changed anything"))
			}
			if ferr != nil {
				return false, fmt.Errorf("fence after %s: %w", c.ID, ferr)
			}
		}
		return false, fmt.Errorf("tool %s (call %s): %w", c.Name, c.ID, err)
	}
	s.counters.ToolCalls++
	s.progressed = true
	result := res
	if act.Action == ActionEdit {
		result.Content = fmt.Sprintf("Note: the approver edited the arguments of this call before it ran; it ran with %s\n\n%s", input, res.Content)
	}
	s.turn.handled(c.ID, result)
	if def.Effect == EffectWrite && s.r.Hooks.AfterEffect != nil {
		fenced.Checkpoint = s.checkpoint()
		if err := s.r.Hooks.AfterEffect(ctx, fenced, res); err != nil {
			return true, fmt.Errorf("fence after %s: %w", c.ID, err)
		}
	}
	st := Step{Kind: StepToolExecuted, CallID: c.ID, Tool: c.Name, Effect: def.Effect, Duration: dur, IsError: res.IsError, BaseChanged: res.BaseChanged, Replayed: res.Replayed, Action: act.Action, Rule: c.Rule}
	st.ApprovedByRule = rememberedBy(c)
	if act.Action == ActionEdit {
		st.EditedInput = input
		if len(c.Input) <= MaxAuditInputBytes {
			st.OriginalInput = c.Input
		} else {
			sum := sha256.Sum256(c.Input)
			st.OriginalInputSHA256, st.OriginalInputSize = hex.EncodeToString(sum[:]), len(c.Input)
		}
	}
	if err := s.record(ctx, st); err != nil {
		return true, err
	}
	return true, nil
}

// finish ends the segment with a reason, first closing any tool_use of the
// last assistant turn that has no result, so the transcript stays valid.
func (s *segment) finish(ctx context.Context, reason TerminationReason, detail string) (Outcome, error) {
	if n := len(s.tr.Messages); n > 0 && s.tr.Messages[n-1].Role == RoleAssistant {
		if uses := s.tr.Messages[n-1].ToolUses(); len(uses) > 0 {
			results := make([]Block, 0, len(uses))
			for _, u := range uses {
				results = append(results, ToolResultBlock(u.ID, ErrorResult("not executed: the run ended (%s)", reason)))
			}
			s.tr.Messages = append(s.tr.Messages, Message{Role: RoleUser, Content: results})
		}
	}
	err := s.record(ctx, Step{Kind: StepFinished, Reason: reason, Detail: detail})
	out := s.outcome()
	out.Kind = OutcomeFinished
	out.Reason = reason
	out.Detail = detail
	return out, err
}

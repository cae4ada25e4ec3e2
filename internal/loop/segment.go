package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	trace        []Step
	// unconfirmed maps the ids of resumed calls whose tool could not confirm
	// its definition to the reason; they get an error result and never run.
	unconfirmed map[string]string
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
		if t, ok := r.Tools.Lookup(name); ok && !s.allowed[name] {
			s.allowed[name] = true
			s.specs = append(s.specs, t.Definition().Spec())
		}
	}
	return s
}

func (s *segment) outcome() Outcome {
	return Outcome{Transcript: s.tr, Counters: s.counters, Trace: s.trace}
}

func (s *segment) record(ctx context.Context, st Step) error {
	st.At = s.r.now()
	if st.Iteration == 0 {
		st.Iteration = s.counters.Iterations
	}
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
			return s.finish(ctx, reason, detail)
		}
		resp, err := s.generate(ctx)
		if err != nil {
			if reason, detail := s.stopReason(ctx); reason == ReasonCancelled || reason == ReasonBudgetExhausted {
				return s.finish(ctx, reason, detail)
			}
			return s.finish(ctx, ReasonProviderFailed, err.Error())
		}
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
			return s.suspend(ctx, calls)
		}
		tr, err := s.execute(ctx, calls, nil)
		if err != nil {
			return s.outcome(), err
		}
		if tr.stop != "" {
			return s.finish(ctx, tr.stop, "")
		}
		if len(tr.handOver) > 0 {
			return s.handOver(ctx, calls, tr)
		}
	}
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
// tools and invalid inputs are rejected, the rest are marked by whether they
// need approval (the tool's own trigger, then the runner's Policy, which may
// also refuse a call outright).
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
		def := tool.Definition()
		c.Effect = def.Effect
		if err := s.r.Tools.ValidateInput(u.Name, in); err != nil {
			c.Rejected = err.Error()
		}
		c.NeedsApproval = needsApproval(tool, def, c)
		if s.r.Policy != nil {
			v := s.r.Policy(ctx, PolicyQuery{Call: c, Definition: def, RememberedBy: s.opts.Remembered[c.Name]})
			applyVerdict(&c, v)
		}
		calls = append(calls, c)
	}
	return calls
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

// applyVerdict records a Policy's verdict on the call. An action it does
// not know holds the call for approval (fail closed).
func applyVerdict(c *PendingCall, v Verdict) {
	c.Rule = v.Rule
	switch v.Action {
	case VerdictAllow:
		c.NeedsApproval = false
		c.ApprovedBy = v.ApprovedBy
	case VerdictDeny:
		c.NeedsApproval = false
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
	for _, c := range calls {
		tool, ok := s.r.Tools.Lookup(c.Name)
		if !ok || !s.allowed[c.Name] {
			continue
		}
		hashes[c.Name], _ = s.r.Tools.Hash(c.Name)
		if !c.NeedsApproval || c.Rejected != "" || c.Denied != "" {
			continue
		}
		if p, ok := tool.(Previewer); ok {
			text, err := p.Preview(ctx, c.Input)
			if err != nil {
				// Approvers never see a raw system error; the call itself
				// reports what is wrong when it runs.
				text = "preview unavailable: the tool could not compute it"
			}
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
	id := s.r.newID()
	digest, err := TurnDigest(s.runID, id, calls)
	if err != nil {
		return s.outcome(), fmt.Errorf("turn digest: %w", err)
	}
	if len(previews) == 0 {
		previews = nil
	}
	state := &SuspendedState{
		SchemaVersion: SchemaVersion,
		RunID:         s.runID,
		SuspensionID:  id,
		Transcript:    s.tr,
		PendingCalls:  calls,
		Counters:      s.counters,
		Options:       s.opts,
		ToolHashes:    hashes,
		Previews:      previews,
		TurnDigest:    digest,
		SuspendedAt:   s.r.now().UTC(),
	}
	if err := s.record(ctx, Step{Kind: StepSuspended, SuspensionID: id, TurnDigest: digest, ToolCalls: len(calls)}); err != nil {
		return s.outcome(), err
	}
	out := s.outcome()
	out.Kind = OutcomeSuspended
	out.Suspended = state
	return out, nil
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
// result like any call that did not run.
func (s *segment) execute(ctx context.Context, calls []PendingCall, actions map[string]CallDecision) (tr turnResults, err error) {
	tr.results = make(map[string]Result, len(calls))
	// notRun, when set, is the result of every call left without one
	// when the turn stops.
	var notRun *Result
	defer func() {
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
	for _, c := range calls {
		if tr.stop == "" && ctx.Err() != nil {
			tr.stop, _ = s.stopReason(ctx)
		}
		if tr.stop != "" {
			continue // "not executed: the run ended"
		}
		if c.Denied != "" {
			// The policy refused the call: it never runs, whatever the decision.
			tr.results[c.ID] = ErrorResult("Error: tool %q was denied by policy rule %q: %s", c.Name, c.Rule, c.Denied)
			if err := s.record(ctx, Step{Kind: StepToolDenied, CallID: c.ID, Tool: c.Name, Effect: c.Effect, Action: ActionDeny, IsError: true, Rule: c.Rule, Detail: "denied by policy"}); err != nil {
				return tr, err
			}
			continue
		}
		act := CallDecision{CallID: c.ID, Action: ActionApprove}
		if actions != nil {
			act = actions[c.ID]
		} else if c.NeedsApproval {
			// Defence in depth: plan routes such turns to suspend, never here.
			res := ErrorResult("not executed: call needs approval")
			notRun = &res
			return tr, fmt.Errorf("call %s needs approval but reached execution without a decision", c.ID)
		}
		if act.Action == ActionDeny {
			tr.denied = true
			tr.results[c.ID] = denialResult(c.Name, act.Message)
			if err := s.record(ctx, Step{Kind: StepToolDenied, CallID: c.ID, Tool: c.Name, Effect: c.Effect, Action: ActionDeny, IsError: true, Rule: c.Rule}); err != nil {
				return tr, err
			}
			continue
		}
		input := c.Input
		if act.Action == ActionEdit {
			input = act.Input
		} else if c.Rejected != "" {
			tr.results[c.ID] = ErrorResult("Error: %s", c.Rejected)
			if err := s.record(ctx, Step{Kind: StepToolExecuted, CallID: c.ID, Tool: c.Name, Action: act.Action, IsError: true}); err != nil {
				return tr, err
			}
			continue
		}
		if why, ok := s.unconfirmed[c.ID]; ok {
			tr.results[c.ID] = ErrorResult("not executed: %s could not be run or its current definition confirmed here (%s)", c.Name, why)
			if err := s.record(ctx, Step{Kind: StepToolExecuted, CallID: c.ID, Tool: c.Name, Effect: c.Effect, Action: act.Action, IsError: true}); err != nil {
				return tr, err
			}
			continue
		}
		if tool, ok := s.r.Tools.Lookup(c.Name); ok && tool.Definition().Client {
			// The caller executes it: handed over once the turn's
			// server-side calls have run.
			tr.handOver = append(tr.handOver, ClientCall{ID: c.ID, Name: c.Name, Input: input, Edited: act.Action == ActionEdit})
			continue
		}
		res, err := s.call(ctx, c, input, act)
		if err != nil {
			tr.results[c.ID] = ErrorResult("not executed: %v", err)
			if ctx.Err() != nil {
				tr.stop = ReasonCancelled
				res := ErrorResult("not executed: the run stopped")
				notRun = &res
				return tr, nil
			}
			return tr, err
		}
		if act.Action == ActionEdit {
			res.Content = fmt.Sprintf("Note: the approver edited the arguments of this call before it ran; it ran with %s\n\n%s", input, res.Content)
		}
		tr.results[c.ID] = res
	}
	return tr, nil
}

// StepToolDenied marks a call an approver denied; it never ran.
const StepToolDenied StepKind = "tool_denied"

func denialResult(tool, reason string) Result {
	if reason == "" {
		return ErrorResult("Error: tool %q was denied by the approver.", tool)
	}
	return ErrorResult("Error: tool %q was denied by the approver: %s", tool, reason)
}

// call executes one tool call with its idempotency key, fencing writes.
func (s *segment) call(ctx context.Context, c PendingCall, input []byte, act CallDecision) (Result, error) {
	tool, _ := s.r.Tools.Lookup(c.Name)
	def := tool.Definition()
	if def.Client {
		return Result{}, fmt.Errorf("tool %s (call %s) is a client tool and cannot be executed here", c.Name, c.ID)
	}
	pc := c
	pc.Input = input
	if def.Effect == EffectWrite && s.r.Hooks.BeforeEffect != nil {
		if err := s.r.Hooks.BeforeEffect(ctx, pc); err != nil {
			return Result{}, fmt.Errorf("fence before %s: %w", c.ID, err)
		}
	}
	key := s.runID + "/" + s.suspensionID + "/" + c.ID
	start := s.r.now()
	res, err := tool.Call(WithIdempotencyKey(ctx, key), input)
	dur := s.r.now().Sub(start)
	if err != nil {
		if def.Effect == EffectWrite && errors.Is(err, ErrNoEffect) {
			// Nothing happened: lift the fence, so the run does not end as
			// an interrupted write.
			var ferr error
			switch {
			case s.r.Hooks.NoEffect != nil:
				ferr = s.r.Hooks.NoEffect(ctx, pc)
			case s.r.Hooks.AfterEffect != nil:
				ferr = s.r.Hooks.AfterEffect(ctx, pc, ErrorResult("not executed: the tool failed before it changed anything"))
			}
			if ferr != nil {
				return Result{}, fmt.Errorf("fence after %s: %w", c.ID, ferr)
			}
		}
		return Result{}, fmt.Errorf("tool %s (call %s): %w", c.Name, c.ID, err)
	}
	s.counters.ToolCalls++
	if def.Effect == EffectWrite && s.r.Hooks.AfterEffect != nil {
		if err := s.r.Hooks.AfterEffect(ctx, pc, res); err != nil {
			return Result{}, fmt.Errorf("fence after %s: %w", c.ID, err)
		}
	}
	st := Step{Kind: StepToolExecuted, CallID: c.ID, Tool: c.Name, Effect: def.Effect, Duration: dur, IsError: res.IsError, Action: act.Action, Rule: c.Rule}
	if c.ApprovedBy != "" {
		st.ApprovedByRule = "remembered, by " + c.ApprovedBy
	}
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
		return res, err
	}
	return res, nil
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

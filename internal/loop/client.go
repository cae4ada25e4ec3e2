package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ClientTool is a tool the run's caller executes itself (issue #13): to the
// loop it is a Tool like any other — offered to the model, checked by the
// whole-turn rule, hashed into the suspended state — except that the loop
// never calls it. An approved call of it (or one that needs no approval)
// is handed over: the segment ends with OutcomeAwaitingResults, and the
// caller's result comes back through Runner.ResumeWithResults.
type ClientTool struct {
	def Definition
}

var (
	_ Tool      = (*ClientTool)(nil)
	_ Previewer = (*ClientTool)(nil)
)

// NewClientTool returns the client tool with the given definition; its
// Client flag is set (NoApproval is never honoured: a client write needs
// approval like any write).
func NewClientTool(def Definition) *ClientTool {
	def.Client = true
	def.NoApproval = false
	def.Idempotent = false
	return &ClientTool{def: def}
}

// Definition returns the tool's definition.
func (t *ClientTool) Definition() Definition { return t.def }

// Call refuses: a client tool is executed by the caller, never by the loop.
func (t *ClientTool) Call(context.Context, json.RawMessage) (Result, error) {
	return Result{}, fmt.Errorf("tool %q is a client tool: its calls are handed to the caller, never executed here", t.def.Name)
}

// Preview tells approvers who executes the call.
func (t *ClientTool) Preview(context.Context, json.RawMessage) (string, error) {
	return "Executed by the caller of this run (client tool " + t.def.Name + "), after approval.", nil
}

// ClientCall is one call handed to the caller: its id, tool and final input
// (an approver's edit, if any, applied).
type ClientCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// Edited says an approver changed the input; the model is told.
	Edited bool `json:"edited,omitempty"`
}

// HandOver is what a state that waits for client-tool results holds beyond
// the held turn: the calls handed to the caller and the results every other
// call of the turn already has (server-side calls that ran, denials,
// rejections), by call id. The turn's results message is written only when
// the caller's results arrive, so every tool_use keeps exactly one
// tool_result.
type HandOver struct {
	Calls   []ClientCall      `json:"calls"`
	Results map[string]Result `json:"results,omitempty"`
}

// ClientResult is the caller's result of one handed-over call.
type ClientResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// ErrInvalidResults: the results do not answer the handed-over calls
// exactly (a missing, extra or repeated call id, or content that is not
// UTF-8), or the state does not wait for results.
var ErrInvalidResults = errors.New("invalid tool results")

// ValidateResults checks that results hold exactly one result per
// handed-over call, and nothing else.
func ValidateResults(calls []ClientCall, results []ClientResult) error {
	want := make(map[string]bool, len(calls))
	for _, c := range calls {
		want[c.ID] = true
	}
	got := make(map[string]bool, len(results))
	for i, r := range results {
		switch {
		case r.CallID == "":
			return fmt.Errorf("%w: results[%d]: call_id is required", ErrInvalidResults, i)
		case !want[r.CallID]:
			return fmt.Errorf("%w: results[%d]: call %q was not handed over for this result", ErrInvalidResults, i, r.CallID)
		case got[r.CallID]:
			return fmt.Errorf("%w: results[%d]: call %q has a second result", ErrInvalidResults, i, r.CallID)
		case !utf8.ValidString(r.Content):
			return fmt.Errorf("%w: results[%d]: content is not valid UTF-8", ErrInvalidResults, i)
		}
		got[r.CallID] = true
	}
	for _, c := range calls {
		if !got[c.ID] {
			return fmt.Errorf("%w: call %q (%s) has no result", ErrInvalidResults, c.ID, c.Name)
		}
	}
	return nil
}

// ResumeWithResults continues a run whose state waits for client-tool
// results (state.HandOver set). It refuses, and runs nothing, when the
// state does not wait for results or its schema version is unknown, its
// calls do not match its digest, a handed-over call's tool changed since
// (ErrToolChanged), or the results are not exactly one per handed-over
// call (ErrInvalidResults). Otherwise the held turn gets its results
// message — every call's result in turn order, the caller's among them —
// and the loop continues; it may suspend or hand over again.
func (r *Runner) ResumeWithResults(ctx context.Context, state *SuspendedState, results []ClientResult) (Outcome, error) {
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	if state == nil || state.HandOver == nil {
		return Outcome{}, fmt.Errorf("%w: the run's state does not wait for tool results", ErrInvalidResults)
	}
	if state.SchemaVersion != HandOverSchemaVersion {
		return Outcome{}, fmt.Errorf("%w: a state waiting for tool results has schema_version %d, this build writes %d", ErrSchemaVersion, state.SchemaVersion, HandOverSchemaVersion)
	}
	digest, err := state.ExpectedDigest()
	if err != nil || digest != state.TurnDigest {
		return Outcome{}, fmt.Errorf("%w: the suspended state's pending calls do not match its digest", ErrInvalidResults)
	}
	if err := heldTurnMatches(state); err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrInvalidResults, err)
	}
	r = r.revived(ctx, state.Options, state.PendingCalls)
	for _, c := range state.HandOver.Calls {
		want, recorded := state.ToolHashes[c.Name]
		got, ok := r.Tools.Hash(c.Name)
		if !recorded || !ok || got != want {
			return Outcome{}, fmt.Errorf("%w: client tool %q (call %s)", ErrToolChanged, c.Name, c.ID)
		}
	}
	if err := ValidateResults(state.HandOver.Calls, results); err != nil {
		return Outcome{}, err
	}
	byID := make(map[string]Result, len(state.PendingCalls))
	for id, res := range state.HandOver.Results {
		byID[id] = res
	}
	edited := map[string]ClientCall{}
	for _, c := range state.HandOver.Calls {
		if c.Edited {
			edited[c.ID] = c
		}
	}
	for _, res := range results {
		out := Result{Content: res.Content, IsError: res.IsError}
		if c, ok := edited[res.CallID]; ok {
			out.Content = fmt.Sprintf("Note: the approver edited the arguments of this call before it ran; it ran with %s\n\n%s", c.Input, out.Content)
		}
		byID[res.CallID] = out
	}
	blocks := make([]Block, 0, len(state.PendingCalls))
	for _, c := range state.PendingCalls {
		res, ok := byID[c.ID]
		if !ok {
			return Outcome{}, fmt.Errorf("%w: call %q of the held turn has no result in the state", ErrInvalidResults, c.ID)
		}
		blocks = append(blocks, ToolResultBlock(c.ID, res))
	}
	s := r.newSegment(state.RunID, state.SuspensionID, cloneTranscript(state.Transcript), state.Counters, state.Options)
	if err := s.record(ctx, Step{Kind: StepResumed, SuspensionID: state.SuspensionID, TurnDigest: state.TurnDigest}); err != nil {
		return s.outcome(), err
	}
	s.counters.ToolCalls += len(results)
	s.tr.Messages = append(s.tr.Messages, Message{Role: RoleUser, Content: blocks})
	return s.loop(ctx)
}

// hasClientCall reports whether a planned turn calls a client tool.
func (s *segment) hasClientCall(calls []PendingCall) bool {
	for _, c := range calls {
		if t, ok := s.r.Tools.Lookup(c.Name); ok && c.Rejected == "" && t.Definition().Client {
			return true
		}
	}
	return false
}

// handOver ends the segment with the turn's client calls handed to the
// caller: the state holds the turn, the other calls' results and the
// handed-over calls under a new id (the tool-results id).
func (s *segment) handOver(ctx context.Context, calls []PendingCall, tr turnResults) (Outcome, error) {
	hashes := map[string]string{}
	for _, c := range calls {
		if _, ok := s.r.Tools.Lookup(c.Name); ok && s.allowed[c.Name] {
			hashes[c.Name], _ = s.r.Tools.Hash(c.Name)
		}
	}
	results := tr.results
	if len(results) == 0 {
		results = nil
	}
	return s.hold(ctx, OutcomeAwaitingResults, calls, hashes, func(st *SuspendedState) Step {
		st.SchemaVersion = HandOverSchemaVersion
		st.HandOver = &HandOver{Calls: tr.handOver, Results: results}
		return Step{Kind: StepHandedOver, ToolCalls: len(tr.handOver)}
	})
}

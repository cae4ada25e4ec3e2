package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// CheckpointSchemaVersion is the version of the Checkpoint layout this
// package writes and reads.
const CheckpointSchemaVersion = 1

// checkpointKind tells a checkpoint blob from a suspended state.
const checkpointKind = "checkpoint"

// ErrInvalidCheckpoint is returned by Continue for a checkpoint it cannot
// continue from (an unknown version, another run, a transcript that does
// not match the turn in progress). Nothing runs.
var ErrInvalidCheckpoint = errors.New("invalid checkpoint")

// Checkpoint is a point of a running loop from which another process
// continues it with Continue, without re-assembling the prompt and with the
// counters kept. The loop offers one when a segment yields (Hooks.Yield:
// the worker's time is up) and to the fence hooks of every write call, so
// that a worker can store it in the same write as the fence: a run then
// never has to replay a write whose result was recorded.
//
// Between turns (Turn nil) the transcript ends with a user message and the
// model is called next. In the middle of a turn the transcript ends with the
// assistant turn being executed and Turn says which of its calls are done.
type Checkpoint struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schema_version"`
	RunID         string `json:"run_id"`
	// SuspensionID is the middle part of the calls' idempotency keys: the
	// suspension the current stretch of the run continues ("-" before the
	// run's first suspension). A call re-run from a checkpoint gets the key
	// it had before.
	SuspensionID string     `json:"suspension_id"`
	Transcript   Transcript `json:"transcript"`
	Counters     Counters   `json:"counters"`
	Options      Options    `json:"options"`
	// Turn is the assistant turn in progress (nil: between turns).
	Turn *TurnProgress `json:"turn,omitempty"`
	// ToolHashes maps the tools of the turn's calls that are not done yet
	// to their definition hashes: Continue refuses a tool that changed.
	ToolHashes map[string]string `json:"tool_hashes,omitempty"`
	// Unconfirmed maps calls of a resumed turn whose tool could not
	// confirm its definition to the reason; they never run.
	Unconfirmed map[string]string `json:"unconfirmed,omitempty"`
	At          time.Time         `json:"at"`
}

// TurnProgress is an assistant turn whose calls are being executed.
type TurnProgress struct {
	// Calls are every call of the turn, in turn order.
	Calls []PendingCall `json:"calls"`
	// Decisions, for a turn resumed after approval, hold what was decided
	// for each call; nil for a turn that needed no approval (its calls run).
	Decisions []CallDecision `json:"decisions,omitempty"`
	// Done is how many of the calls, in turn order, are handled: each has
	// a result in Results or is a client call in HandOver.
	Done int `json:"done"`
	// Results are the tool_result blocks of the handled calls, in turn order.
	Results []Block `json:"results"`
	// HandOver are the handled client calls, handed to the caller once the
	// turn's other calls are done.
	HandOver []ClientCall `json:"hand_over,omitempty"`
	// Denied is set when a call of the turn was denied.
	Denied bool `json:"denied,omitempty"`
}

// Remaining returns the calls of the turn that are not handled yet.
func (p *TurnProgress) Remaining() []PendingCall {
	if p == nil || p.Done >= len(p.Calls) || p.Done < 0 {
		return nil
	}
	return p.Calls[p.Done:]
}

// RemainingKeys returns the idempotency keys of the calls of the turn in
// progress that are not handled yet (none between turns): the calls a
// process continuing from c makes again, under these keys.
func (c *Checkpoint) RemainingKeys() map[string]bool {
	return callKeys(c.RunID, c.SuspensionID, c.Transcript, c.Turn.Remaining())
}

// callKeys maps the idempotency keys of calls, of the turn tr ends with,
// to true.
func callKeys(runID, suspensionID string, tr Transcript, calls []PendingCall) map[string]bool {
	keys := make(map[string]bool, len(calls))
	for _, c := range calls {
		keys[callKey(runID, suspensionID, tr, c.ID)] = true
	}
	return keys
}

// Encode returns the checkpoint as JSON (see MarshalJSON).
func (c *Checkpoint) Encode() ([]byte, error) { return MarshalJSON(c) }

// DecodeCheckpoint parses a checkpoint encoded by Encode, refusing other
// kinds of blob and unknown versions (ErrInvalidCheckpoint).
func DecodeCheckpoint(raw []byte) (*Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCheckpoint, err)
	}
	if c.Kind != checkpointKind {
		return nil, fmt.Errorf("%w: the blob is a %q, not a checkpoint", ErrInvalidCheckpoint, c.Kind)
	}
	if c.SchemaVersion != CheckpointSchemaVersion {
		return nil, fmt.Errorf("%w: schema_version %d, this build reads %d", ErrInvalidCheckpoint, c.SchemaVersion, CheckpointSchemaVersion)
	}
	return &c, nil
}

// Continue runs the loop on from a checkpoint: the calls of a turn in
// progress that are not done yet run first (with the decisions taken for
// them and the idempotency keys they had), then the model is called with
// the checkpoint's transcript. It refuses (ErrInvalidCheckpoint, nothing
// runs) a checkpoint whose transcript does not match its turn, and
// (ErrToolChanged) one whose remaining calls' tools changed meanwhile.
func (r *Runner) Continue(ctx context.Context, cp *Checkpoint) (Outcome, error) {
	if err := r.check(); err != nil {
		return Outcome{}, err
	}
	if cp == nil || cp.Kind != checkpointKind || cp.SchemaVersion != CheckpointSchemaVersion || cp.RunID == "" || cp.SuspensionID == "" {
		return Outcome{}, fmt.Errorf("%w: not a checkpoint of this build", ErrInvalidCheckpoint)
	}
	if err := cp.Transcript.Validate(); err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrInvalidCheckpoint, err)
	}
	var remaining []PendingCall
	if cp.Turn != nil {
		remaining = cp.Turn.Remaining()
	}
	r = r.revived(ctx, cp.Options, remaining)
	var actions map[string]CallDecision
	unconfirmed := cloneMap(cp.Unconfirmed)
	if cp.Turn != nil {
		var err error
		if actions, err = checkTurnProgress(cp); err != nil {
			return Outcome{}, err
		}
		confirmed, _, err := r.confirmDefinitions(ctx, remaining, cp.ToolHashes, actions)
		if err != nil {
			return Outcome{}, err
		}
		absent, err := r.checkToolHashes(remaining, cp.ToolHashes)
		if err != nil {
			return Outcome{}, err
		}
		maps.Copy(absent, confirmed)
		for id, why := range absent {
			if unconfirmed == nil {
				unconfirmed = map[string]string{}
			}
			unconfirmed[id] = why
		}
	} else if msgs := cp.Transcript.Messages; len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleUser {
		return Outcome{}, fmt.Errorf("%w: between turns the transcript must end with a user message", ErrInvalidCheckpoint)
	}
	s := r.newSegment(cp.RunID, cp.SuspensionID, cloneTranscript(cp.Transcript), cp.Counters, cp.Options)
	s.unconfirmed = unconfirmed
	if cp.Turn != nil {
		t := &turnState{
			calls:   append([]PendingCall(nil), cp.Turn.Calls...),
			actions: actions,
			done:    cp.Turn.Done,
			tr: turnResults{
				denied:   cp.Turn.Denied,
				handOver: append([]ClientCall(nil), cp.Turn.HandOver...),
				results:  make(map[string]Result, len(cp.Turn.Calls)),
			},
		}
		for _, b := range cp.Turn.Results {
			t.tr.results[b.ToolUseID] = Result{Content: b.Content, IsError: b.IsError}
		}
		s.turn = t
		err := s.runTurn(ctx)
		tr := t.tr
		switch {
		case err != nil:
			return s.outcome(), err
		case s.yielded:
			return s.yieldOutcome(), nil
		case tr.stop != "":
			return s.finish(ctx, tr.stop, "")
		case tr.denied && s.opts.DenialEndsRun:
			return s.finish(ctx, ReasonApprovalDenied, "a call was denied and the run's policy ends it on denial")
		case len(tr.handOver) > 0:
			return s.handOver(ctx, t.calls, tr)
		}
	}
	return s.loop(ctx)
}

// checkTurnProgress checks that the checkpoint's transcript ends with the
// turn in progress and that its results and decisions fit that turn; it
// returns the decisions by call id (nil for a turn that needed none).
func checkTurnProgress(cp *Checkpoint) (map[string]CallDecision, error) {
	p := cp.Turn
	msgs := cp.Transcript.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleAssistant {
		return nil, fmt.Errorf("%w: the transcript does not end with the turn in progress", ErrInvalidCheckpoint)
	}
	uses := msgs[len(msgs)-1].ToolUses()
	if len(uses) != len(p.Calls) || p.Done < 0 || p.Done > len(p.Calls) || len(p.Results)+len(p.HandOver) != p.Done {
		return nil, fmt.Errorf("%w: the turn has %d calls, the checkpoint lists %d with %d done, %d results and %d handed over",
			ErrInvalidCheckpoint, len(uses), len(p.Calls), p.Done, len(p.Results), len(p.HandOver))
	}
	for i, u := range uses {
		if u.ID != p.Calls[i].ID || u.Name != p.Calls[i].Name {
			return nil, fmt.Errorf("%w: call %d of the turn is %s, the checkpoint lists %s", ErrInvalidCheckpoint, i, u.ID, p.Calls[i].ID)
		}
	}
	// Every handled call has exactly one result or is handed over, in
	// turn order.
	handled := map[string]bool{}
	for _, c := range p.Calls[:p.Done] {
		handled[c.ID] = true
	}
	next := 0
	for _, b := range p.Results {
		for next < p.Done && p.Calls[next].ID != b.ToolUseID {
			next++
		}
		if b.Type != BlockToolResult || next == p.Done {
			return nil, fmt.Errorf("%w: result for %q is not the result of a handled call, in turn order", ErrInvalidCheckpoint, b.ToolUseID)
		}
		delete(handled, b.ToolUseID)
		next++
	}
	for _, c := range p.HandOver {
		if !handled[c.ID] {
			return nil, fmt.Errorf("%w: handed-over call %q is not a handled call without a result", ErrInvalidCheckpoint, c.ID)
		}
		delete(handled, c.ID)
	}
	if p.Decisions == nil {
		return nil, nil
	}
	actions := make(map[string]CallDecision, len(p.Decisions))
	for _, d := range p.Decisions {
		actions[d.CallID] = d
	}
	for _, c := range p.Calls {
		if _, ok := actions[c.ID]; !ok {
			return nil, fmt.Errorf("%w: call %s has no decision", ErrInvalidCheckpoint, c.ID)
		}
	}
	return actions, nil
}

// checkToolHashes compares the tools of calls with the definition hashes
// recorded for them. A changed or vanished tool refuses (ErrToolChanged);
// one whose source is noted absent in this process gives its calls an
// error result instead (returned by call id with the reason).
// DefinitionChecker tools are skipped: their source's answer
// (confirmDefinitions, for the calls that run), not this process's copy of
// their definition, decides.
func (r *Runner) checkToolHashes(calls []PendingCall, hashes map[string]string) (map[string]string, error) {
	absent := map[string]string{}
	for _, c := range calls {
		want, recorded := hashes[c.Name]
		if !recorded {
			continue // rejected when planned (unknown tool): it gets an error result
		}
		if tool, ok := r.Tools.Lookup(c.Name); ok {
			if _, remote := tool.(DefinitionChecker); remote {
				continue // asked when its call runs, irrelevant when it does not
			}
		}
		got, ok := r.Tools.Hash(c.Name)
		if !ok && r.Tools.noted(c.Name) {
			absent[c.ID] = r.Tools.Missing(c.Name)
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrToolChanged, r.Tools.Missing(c.Name))
		}
		if got != want {
			return nil, fmt.Errorf("%w: tool %q (call %s)", ErrToolChanged, c.Name, c.ID)
		}
	}
	return absent, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

package runs

import (
	"context"
	"slices"

	"github.com/agentgate/agentgate/internal/loop"
)

// Bounds of what a segment holds unwritten (AddStep): past either, AddStep
// writes the steps at once. They keep the write that carries them within
// DynamoDB's transaction limits (100 items, 4 MB) beside a suspension's
// tokens and inbox entries, and its event item within 400 KB.
const (
	MaxUnwrittenSteps = 25
	MaxUnwrittenBytes = 200 << 10
)

// unwritten is what a worker's segment holds for its next write: its claim
// (ClaimOnWrite, ClaimSnapshot) until that is written, and the loop steps
// made since its last write, as events that the next write records before
// its own change. A fence (StampFence) may write the row alone and leave
// the events held for the write after it.
type unwritten struct {
	// status is the stored row's status: the next write's condition, with
	// the row's version (which the segment's row keeps).
	status Status
	// claim says the segment's claim is not written yet: the stored row
	// is still status (QUEUED or RESUMING).
	claim bool
	// claimEvent says events[0] is the segment's claim event (claimed,
	// resumed, continued), not a step; it stays held after a fence wrote
	// the claim's row.
	claimEvent bool
	// writeResult says a held step records a write's result: it cleared
	// the fence or marked a write call (WroteSinceClaim) on the row, so the
	// next write of the row carries the events (StampFence).
	writeResult bool
	// writeID, set when the claim was made from a snapshot
	// (ClaimSnapshot), is the snapshot's WriteID: the next write's
	// condition too, until a write of the row.
	writeID string
	events  []Event
	// size is the events' data size.
	size int
}

func (u *unwritten) copyEvents() []Event { return slices.Clone(u.events) }

func (u *unwritten) clone() *unwritten {
	c := *u
	c.events = u.copyEvents()
	return &c
}

// Unwritten returns how many steps and bytes of step data r holds for its
// segment's next write (AddStep); zero for a row as stored.
func (r *Run) Unwritten() (steps, bytes int) {
	if r == nil || r.unwritten == nil {
		return 0, 0
	}
	n := len(r.unwritten.events)
	if r.unwritten.claimEvent {
		n-- // the claim's event
	}
	return n, r.unwritten.size
}

// AddStep adds one step of the running loop (its kind the event type, the
// step its data) to what owner's segment records with its next write: the
// returned row holds it, and the next Store write made with that row (a
// suspension, a settle, a checkpoint, a hand-over, a lease renewal, a
// write's fence when StampFence says so) appends it as an event, in order,
// before its own event, in the same atomic write. The step's effect on the
// row applies at once to the returned row: the tool_executed step of the
// fenced call clears the fence and, like any write call's tool_executed
// step, sets WroteSinceClaim. When more than MaxUnwrittenSteps steps or
// MaxUnwrittenBytes of step data wait, AddStep writes them at once with a
// lease renewal (the only case in which it writes). Suspended, resumed,
// handed_over and finished steps are refused: the transitions record
// those. Codes: EInvalid, ENotFound, EConflict (only when it writes).
func (s *Store) AddStep(ctx context.Context, cur *Run, owner string, st loop.Step) (*Run, error) {
	next, err := s.addStep(cur, owner, st)
	if err != nil {
		return nil, err
	}
	if n, size := next.Unwritten(); n > MaxUnwrittenSteps || size > MaxUnwrittenBytes {
		return s.RenewLease(ctx, next, owner)
	}
	return next, nil
}

// addStep returns cur with st added to its unwritten steps and applied.
func (s *Store) addStep(cur *Run, owner string, st loop.Step) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	switch st.Kind {
	case "":
		return nil, Errorf(EInvalid, "step kind is required")
	case loop.StepSuspended, loop.StepResumed, loop.StepFinished, loop.StepHandedOver:
		return nil, Errorf(EInvalid, "a %s step is recorded by the transition itself, not as a step", st.Kind)
	}
	data, err := loop.MarshalJSON(st)
	if err != nil {
		return nil, Errorf(EInvalid, "step data: %v", err)
	}
	if err := checkJSON("step data", data, MaxEventDataSize, true); err != nil {
		return nil, err
	}
	next := cur.Clone()
	u := &unwritten{status: cur.Status}
	if cur.unwritten != nil {
		u = cur.unwritten.clone()
	}
	u.events = append(u.events, Event{Type: string(st.Kind), Actor: owner, Data: data})
	u.size += len(data)
	next.unwritten = u
	if st.Counters != nil {
		// The segment's totals so far go with the step's event, so the
		// row never shows fewer calls than its recorded steps.
		next.Counters = *st.Counters
	}
	// A write that took effect makes a replay unsafe (WroteSinceClaim),
	// except the fenced call of an idempotent tool that the run's stored
	// position reaches (PendingIdempotent): a new worker makes it again
	// under the same idempotency key, which applies it once.
	replayable := st.Kind == loop.StepToolExecuted && st.CallID != "" && st.CallID == cur.PendingEffect && cur.PendingIdempotent
	if st.Kind == loop.StepToolExecuted && st.CallID != "" && st.CallID == cur.PendingEffect {
		next.PendingEffect, next.PendingIdempotent = "", false
		next.WroteSinceClaim = cur.WroteSinceClaim || !replayable
		u.writeResult = true
	}
	if st.Kind == loop.StepToolExecuted && st.Effect == loop.EffectWrite {
		next.WroteSinceClaim = next.WroteSinceClaim || !replayable
		u.writeResult = true
	}
	return next, nil
}

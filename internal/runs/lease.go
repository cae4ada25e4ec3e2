package runs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Claim moves a QUEUED or RESUMING run to RUNNING under a lease held by owner
// for LeaseTTL, appending a claimed (or resumed) event. A RUNNING run whose
// lease expired with no pending effect is taken over the same way (a
// reclaimed event); one whose worker completed a write under that lease
// (WroteSinceClaim) is not. Of concurrent claimers exactly one wins. A write that
// moved the run's version meanwhile without making it unclaimable (a
// re-dispatch, a notification record) does not make the claim lose: Claim
// tries again on the fresh row. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) Claim(ctx context.Context, id, owner string) (*Run, error) {
	if owner == "" {
		return nil, Errorf(EInvalid, "lease owner is required")
	}
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		reclaim := claimableByReclaim(cur, now)
		if cur.Status != StatusQueued && cur.Status != StatusResuming && !reclaim {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not claimable", id, cur.Status)
		}
		next := cur.Clone()
		next.Status = StatusRunning
		next.LeaseOwner = owner
		next.LeaseUntil = now.Add(s.opts.LeaseTTL)
		next.WroteSinceClaim = false
		typ := EventClaimed
		var data json.RawMessage
		switch {
		case reclaim:
			// The previous worker vanished with no write in flight; a new one
			// takes the run over (the sweep decides when that is safe).
			typ = EventReclaimed
			data = mustJSON(struct {
				PreviousOwner string `json:"previous_owner"`
			}{cur.LeaseOwner})
		case cur.Status == StatusResuming:
			typ = EventResumed
			data = mustJSON(struct {
				SuspensionID string `json:"suspension_id"`
			}{cur.SuspensionID})
		}
		return next, Write{Events: []Event{{Type: typ, Actor: owner, Data: data}}}, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusQueued || fresh.Status == StatusResuming || claimableByReclaim(fresh, s.now())
	})
}

// claimableByReclaim reports whether cur is a RUNNING run whose worker's
// lease expired with no write in flight and none done under that lease (a
// new worker replays the segment, which would execute that write again).
func claimableByReclaim(cur *Run, now time.Time) bool {
	return cur.Status == StatusRunning && cur.LeaseExpired(now) && cur.PendingEffect == "" && !cur.WroteSinceClaim
}

// Redispatch records that the worker of a QUEUED or RESUMING run was
// dispatched again (its first dispatch looked lost) and moves the run's due
// time DispatchGrace ahead, so the next sweep does not dispatch it again at
// once. Codes: ENotFound, EConflict (claimed or ended meanwhile).
func (s *Store) Redispatch(ctx context.Context, cur *Run, actor string) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusQueued && cur.Status != StatusResuming {
		return nil, Errorf(EConflict, "run %s is %s, not waiting for a worker", cur.ID, cur.Status)
	}
	if actor == "" {
		actor = "purge"
	}
	return s.commit(ctx, cur, cur.Clone(), Write{Events: []Event{{Type: EventRedispatched, Actor: actor}}})
}

// RenewLease extends owner's lease on a RUNNING run by LeaseTTL. Codes:
// EInvalid, ENotFound, EConflict (not RUNNING, not owner, stale version).
func (s *Store) RenewLease(ctx context.Context, cur *Run, owner string) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// RecordStep appends one step of the running loop as an event (its kind is
// the event type, the step its data) and renews owner's lease in one write.
// The tool_executed step of the fenced call clears the fence in the same
// write. Suspended, resumed and finished steps are refused: Suspend, Claim
// and Settle record those. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) RecordStep(ctx context.Context, cur *Run, owner string, st loop.Step) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	switch st.Kind {
	case "":
		return nil, Errorf(EInvalid, "step kind is required")
	case loop.StepSuspended, loop.StepResumed, loop.StepFinished:
		return nil, Errorf(EInvalid, "a %s step is recorded by the transition itself, not by RecordStep", st.Kind)
	}
	data, err := loop.MarshalJSON(st)
	if err != nil {
		return nil, Errorf(EInvalid, "step data: %v", err)
	}
	if err := checkJSON("step data", data, MaxEventDataSize, true); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	if st.Kind == loop.StepToolExecuted && st.CallID != "" && st.CallID == cur.PendingEffect {
		next.PendingEffect = ""
		next.WroteSinceClaim = true
	}
	if st.Kind == loop.StepToolExecuted && st.Effect == loop.EffectWrite {
		next.WroteSinceClaim = true
	}
	return s.commit(ctx, cur, next, Write{Events: []Event{{Type: string(st.Kind), Actor: owner, Data: data}}})
}

// MarkPendingEffect stamps the fence pending_effect=callID on owner's run
// before a write tool runs. Codes: EInvalid, ENotFound, EConflict (another
// effect is pending, or the lease guard fails).
func (s *Store) MarkPendingEffect(ctx context.Context, cur *Run, owner, callID string) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if callID == "" {
		return nil, Errorf(EInvalid, "call id is required")
	}
	if cur.PendingEffect != "" && cur.PendingEffect != callID {
		return nil, Errorf(EConflict, "run %s already has pending effect %q", cur.ID, cur.PendingEffect)
	}
	next := cur.Clone()
	next.PendingEffect = callID
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// ClearPendingEffect removes the fence for callID once the write's outcome
// is known. wrote says whether it took effect (false: the tool failed before
// it changed anything); when it did, WroteSinceClaim is set in the same
// write. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) ClearPendingEffect(ctx context.Context, cur *Run, owner, callID string, wrote bool) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if callID == "" || cur.PendingEffect != callID {
		return nil, Errorf(EConflict, "run %s has no pending effect %q", cur.ID, callID)
	}
	next := cur.Clone()
	next.PendingEffect = ""
	next.WroteSinceClaim = cur.WroteSinceClaim || wrote
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// guardLease refuses unless cur is RUNNING under owner's lease.
func (s *Store) guardLease(cur *Run, owner string) error {
	if owner == "" {
		return Errorf(EInvalid, "lease owner is required")
	}
	if cur == nil {
		return Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusRunning {
		return Errorf(EConflict, "run %s is %s, not running", cur.ID, cur.Status)
	}
	if cur.LeaseOwner != owner {
		return Errorf(EConflict, "run %s is not leased by %s", cur.ID, owner)
	}
	return nil
}

// dueAt is the run's next deadline, the sort key of the due index.
func (s *Store) dueAt(r *Run) time.Time {
	due := s.LifecycleDue(r)
	if r.OutboxSendable() {
		if o := r.OutboxDue(); !o.IsZero() && (due.IsZero() || o.Before(due)) {
			due = o
		}
	}
	return due
}

// LifecycleDue is when r has time-based work of its own (approval expiry
// or reminder, tool-results expiry, lease expiry, dispatch grace, retention), leaving its
// outbox aside: the run's DueAt is the earlier of the two.
func (s *Store) LifecycleDue(r *Run) time.Time {
	switch r.Status {
	case StatusQueued, StatusResuming:
		return r.UpdatedAt.Add(s.opts.DispatchGrace)
	case StatusRunning:
		return r.LeaseUntil
	case StatusWaiting:
		if !r.RemindAt.IsZero() && !r.ReminderSent {
			return r.RemindAt
		}
		return r.ApprovalDeadline
	case StatusWaitingForToolResults:
		if r.HandOver == nil {
			return r.UpdatedAt // unreadable: the sweep looks at it at once
		}
		return r.HandOver.Deadline
	default:
		return r.RetainUntil
	}
}

package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Claim moves a QUEUED or RESUMING run to RUNNING under a lease held by owner
// for LeaseTTL (or until the run's dispatch deadline, its due time, when
// that leaves between half a lease and a lease: the due time then stays),
// appending a claimed, resumed (after a decision) or continued (after a
// checkpoint) event. A RUNNING run whose lease expired is taken
// over the same way (a reclaimed event, Reclaims counted) when
// Run.Reclaimable: no write's outcome is unknown and none took effect that
// the new worker would make again. Of concurrent claimers exactly one wins.
// A write that moved the run's version meanwhile without making it
// unclaimable (a re-dispatch, a notification record) does not make the
// claim lose: Claim tries again on the fresh row. ClaimOnWrite is the
// claim a worker makes without a write of its own. Codes: EInvalid,
// ENotFound, EConflict.
func (s *Store) Claim(ctx context.Context, id, owner string) (*Run, error) {
	if owner == "" {
		return nil, Errorf(EInvalid, "lease owner is required")
	}
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		next, ev, err := s.claimed(cur, owner, now)
		if err != nil {
			return nil, Write{}, err
		}
		return next, Write{Events: []Event{ev}}, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusQueued || fresh.Status == StatusResuming || claimableByReclaim(fresh, s.now())
	})
}

// ClaimOnWrite reads the run and claims it for owner by Claim's rules
// without writing: a QUEUED or RESUMING run is returned as owner's RUNNING
// row whose claim (the lease, Reclaims kept) the segment's first write
// records, conditional on the status and version read here, and whose
// claim event goes first with the segment's steps (in the same write, or
// in the one after a fence: StampFence). A
// worker that dies before that write leaves no trace (the sweep
// re-dispatches the run after DispatchGrace, Redispatch); a concurrent
// worker that writes first makes that write fail with EConflict, so a
// duplicated dispatch costs the loser only what it did without writing
// (model calls and reads). The worker writes the claim by itself (a lease
// renewal) before the run would be due for re-dispatch. A RUNNING run
// whose worker vanished is taken over at once (one write, as Claim):
// that take-over is counted (Reclaims) whatever the new worker gets to.
// Codes: EInvalid, ENotFound, EConflict (not claimable).
func (s *Store) ClaimOnWrite(ctx context.Context, id, owner string) (*Run, error) {
	if owner == "" {
		return nil, Errorf(EInvalid, "lease owner is required")
	}
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Status == StatusRunning {
		return s.Claim(ctx, id, owner)
	}
	next, ev, err := s.claimed(cur, owner, s.now())
	if err != nil {
		return nil, err
	}
	next.unwritten = &unwritten{status: cur.Status, events: []Event{ev}, claim: true, claimEvent: true}
	return next, nil
}

// ClaimSnapshot is ClaimOnWrite without the read: snap is the run's row as
// a write just returned it to the one who dispatched the worker (the row
// that write committed), and the claim is made from it. It is only a hint:
// the segment's first write is conditional on snap's status and version
// like any other, and on its WriteID (the id of the write that committed
// it), so a snapshot that is stale (the run was cancelled, or another
// worker got there first) makes that write fail with EConflict, as a row
// read just before that change would. A snapshot whose content is not
// what its WriteID digests (changed after its write, writeid.go) is
// refused with EInvalid, and one that digests right but is not the
// stored row fails that write's condition. A RowStore that remembers
// the rows it read or wrote (RowPrimer) is told of snap, so the claim makes
// the segment's writes no dearer than a read would have. Only a QUEUED or
// RESUMING snapshot is claimed from (a take-over reads: Claim). Codes:
// EInvalid (no owner, a snapshot that is not a stored row), EConflict (not
// claimable).
func (s *Store) ClaimSnapshot(snap *Run, owner string) (*Run, error) {
	if owner == "" {
		return nil, Errorf(EInvalid, "lease owner is required")
	}
	if snap == nil || !ValidRunID(snap.ID) || snap.Version < 1 || snap.WriteID == "" || snap.unwritten != nil {
		return nil, Errorf(EInvalid, "the snapshot is not a stored row")
	}
	if snap.Status != StatusQueued && snap.Status != StatusResuming {
		return nil, Errorf(EConflict, "run %s is %s in the snapshot, not waiting for a worker", snap.ID, snap.Status)
	}
	if !snap.writtenAsIs() {
		// Changed since its write (or written before WriteIDs were
		// digests): its content cannot be trusted (writeid.go).
		return nil, ErrSnapshotAltered
	}
	next, ev, err := s.claimed(snap, owner, s.now())
	if err != nil {
		return nil, err
	}
	upgradeLegacy(next) // as a read would (fails closed)
	if l, ok := s.rows.(legacyRows); ok {
		if p, ok := l.RowStore.(RowPrimer); ok {
			p.PrimeRow(snap)
		}
	}
	next.unwritten = &unwritten{status: snap.Status, events: []Event{ev}, claim: true, claimEvent: true, writeID: snap.WriteID}
	return next, nil
}

// UnwrittenClaim reports whether r is a worker's row whose claim is not
// written yet (ClaimOnWrite).
func (r *Run) UnwrittenClaim() bool { return r != nil && r.unwritten != nil && r.unwritten.claim }

// claimed returns cur claimed by owner at now and the claim's event.
func (s *Store) claimed(cur *Run, owner string, now time.Time) (*Run, Event, error) {
	reclaim := claimableByReclaim(cur, now)
	if cur.Status != StatusQueued && cur.Status != StatusResuming && !reclaim {
		return nil, Event{}, Errorf(EConflict, "run %s is %s, not claimable", cur.ID, cur.Status)
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
		// The previous worker vanished; a new one takes the run over
		// from its checkpoint, its suspended state or its request (the
		// sweep decides when that is safe). A stamped fence stays: the
		// new worker makes that idempotent call again under its key.
		typ = EventReclaimed
		next.Reclaims = cur.Reclaims + 1
		data = mustJSON(struct {
			PreviousOwner string `json:"previous_owner"`
			PendingEffect string `json:"pending_effect,omitempty"`
			Reclaims      int    `json:"reclaims"`
		}{cur.LeaseOwner, cur.PendingEffect, next.Reclaims})
	case cur.Status == StatusResuming && !cur.Checkpoint.IsZero():
		typ = EventContinued
		data = mustJSON(struct {
			CheckpointSHA256 string `json:"checkpoint_sha256"`
		}{cur.Checkpoint.SHA256})
	case cur.Status == StatusResuming:
		typ = EventResumed
		data = mustJSON(struct {
			SuspensionID string `json:"suspension_id"`
		}{cur.SuspensionID})
	}
	return next, Event{Type: typ, Actor: owner, Data: data}, nil
}

// claimableByReclaim reports whether cur is a RUNNING run whose worker's
// lease expired and that a new worker may take over (Run.Reclaimable).
func claimableByReclaim(cur *Run, now time.Time) bool {
	return cur.Status == StatusRunning && cur.LeaseExpired(now) && cur.Reclaimable()
}

// Redispatch records that the worker of a QUEUED or RESUMING run was
// dispatched again (its first dispatch looked lost, or its worker died
// before its first write: a claim is written with the worker's first
// write, ClaimOnWrite) and moves the run's due time DispatchGrace ahead, so
// the next sweep does not dispatch it again at once. A re-dispatch counts
// as a take-over (Reclaims): a run re-dispatched MaxReclaims times in a row
// without getting further ends FAILED/worker_lost instead (a settled
// event; nothing to dispatch). Codes: ENotFound, EConflict (claimed or
// ended meanwhile).
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
	if cur.Reclaims >= MaxReclaims {
		next := s.terminal(cur, StatusFailed, loop.ReasonWorkerLost, s.now())
		return s.finish(ctx, cur, next, Event{Type: EventSettled, Actor: actor, Data: mustJSON(struct {
			Status   Status                 `json:"status"`
			Reason   loop.TerminationReason `json:"reason"`
			Reclaims int                    `json:"reclaims"`
		}{StatusFailed, loop.ReasonWorkerLost, cur.Reclaims})})
	}
	next := cur.Clone()
	next.Reclaims = cur.Reclaims + 1
	return s.commit(ctx, cur, next, Write{Events: []Event{{Type: EventRedispatched, Actor: actor, Data: mustJSON(struct {
		Reclaims int `json:"reclaims"`
	}{next.Reclaims})}}})
}

// EndLease ends the lease of a RUNNING run now, for a caller that knows
// its holder is gone: serve on the embedded store at start-up (the file
// admits one process, so a lease held by any process before it is held by
// a dead one). The run is then taken over as after an expired lease (a
// reclaim from its position, or FAILED/interrupted_write when a write's
// outcome is unknown), at once instead of after the lease. The write is
// conditional on cur's version: a run that moved on meanwhile is EConflict.
func (s *Store) EndLease(ctx context.Context, cur *Run) (*Run, error) {
	if cur == nil || cur.Status != StatusRunning {
		return nil, Errorf(EConflict, "run is not RUNNING")
	}
	next := cur.Clone()
	if now := s.now(); now.Before(next.LeaseUntil) {
		next.LeaseUntil = now
	}
	return s.commit(ctx, cur, next, Write{})
}

// RenewLease extends owner's lease on a RUNNING run by LeaseTTL (the
// worker's heartbeat while a long model or tool call runs), writing the
// steps cur holds unwritten (AddStep) with it. Codes:
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
// the event type, the step its data) and renews owner's lease in one write,
// with the steps cur holds unwritten (AddStep) before it: AddStep, written
// at once. Codes: EInvalid, ENotFound, EConflict.
func (s *Store) RecordStep(ctx context.Context, cur *Run, owner string, st loop.Step) (*Run, error) {
	next, err := s.addStep(cur, owner, st)
	if err != nil {
		return nil, err
	}
	return s.RenewLease(ctx, next, owner)
}

// RecordEffect records the tool_executed step of the fenced write call
// st.CallID like RecordStep, clearing its fence, with checkpoint (an encoded
// loop.Checkpoint that holds the call's result) as the run's checkpoint in
// the same write: AddStep, then SaveProgress with the checkpoint. Codes:
// EInvalid (including a checkpoint over MaxStateSize), ENotFound, EConflict
// (no such fence, or the lease guard fails).
func (s *Store) RecordEffect(ctx context.Context, cur *Run, owner string, st loop.Step, checkpoint []byte) (*Run, error) {
	if st.Kind != loop.StepToolExecuted || st.CallID == "" {
		return nil, Errorf(EInvalid, "a write's result is recorded with its tool_executed step")
	}
	if len(checkpoint) == 0 {
		return nil, Errorf(EInvalid, "checkpoint is required")
	}
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if cur.PendingEffect != st.CallID {
		return nil, Errorf(EConflict, "run %s has no pending effect %q", cur.ID, st.CallID)
	}
	next, err := s.addStep(cur, owner, st)
	if err != nil {
		return nil, err
	}
	return s.SaveProgress(ctx, next, owner, checkpoint)
}

// SaveProgress writes the steps cur holds unwritten (AddStep) and renews
// owner's lease; with a checkpoint (an encoded loop.Checkpoint: the loop
// after every step recorded so far, the results of its write calls in),
// that checkpoint becomes the run's in the same write (its blob is put
// first), so a new worker continues from there instead of failing the run
// for a write whose result only this worker held. The worker saves its
// progress this way when its lease must be renewed while a write's
// tool_executed step waits unwritten (a long model call after a write).
// Codes: EInvalid (including a checkpoint over MaxStateSize, or one while a
// write's fence is stamped), ENotFound, EConflict.
func (s *Store) SaveProgress(ctx context.Context, cur *Run, owner string, checkpoint []byte) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	if checkpoint != nil {
		if cur.PendingEffect != "" {
			return nil, Errorf(EInvalid, "run %s has pending effect %q; a checkpoint holds only recorded results", cur.ID, cur.PendingEffect)
		}
		ref, err := s.putCheckpoint(ctx, cur, checkpoint)
		if err != nil {
			return nil, err
		}
		next.Checkpoint = ref
		next.WroteSinceClaim = false // the checkpoint holds the writes' results
		next.Reclaims = 0            // and the run got past them
	}
	return s.commit(ctx, cur, next, Write{})
}

// Fence is a write call about to run, as StampFence records it.
type Fence struct {
	// CallID is the call's tool_use id.
	CallID string
	// Idempotent says a new worker may make the call again under its
	// idempotency key: the tool declares itself idempotent and the run's
	// checkpoint or suspended state (or Checkpoint) reaches the call.
	Idempotent bool
	// Checkpoint, when set, is an encoded loop.Checkpoint from which a new
	// worker reaches the call; it becomes the run's checkpoint in the same
	// write (its blob is put first).
	Checkpoint []byte
}

// MarkPendingEffect stamps the fence pending_effect=callID on owner's run
// before a write tool runs: StampFence with nothing more than the call id.
func (s *Store) MarkPendingEffect(ctx context.Context, cur *Run, owner, callID string) (*Run, error) {
	return s.StampFence(ctx, cur, owner, Fence{CallID: callID})
}

// StampFence stamps the fence pending_effect=f.CallID on owner's run before
// a write tool runs, with whether the call may be made again
// (PendingIdempotent) and, when given, the checkpoint that reaches it, in
// one write. Stamping the fence that is already stamped (a new worker
// making an idempotent call again) is allowed.
//
// The fence writes the row alone (with the segment's claim, if that is not
// written yet): the events cur holds unwritten (the claim's event, the
// steps since the segment's last write) stay held for the segment's next
// write, which records them first, so a run that does not crash keeps
// its events in order. Only the fence must be durable before the call:
// the decision that approved it is on record since its own write, and the
// held steps are the segment's model turns and reads, which a worker that
// dies loses as it would before any write (the run's ending event then
// names its lease owner, Settle and Cancel). Two kinds of held step go
// with the fence instead: those before a checkpoint it stores (a new
// worker goes on from the checkpoint and does not make them again) and
// those that record an earlier write's result (every write that took
// effect is named by an event before the next one runs).
//
// Codes: EInvalid, ENotFound, EConflict (another effect is pending, or the
// lease guard fails).
func (s *Store) StampFence(ctx context.Context, cur *Run, owner string, f Fence) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if f.CallID == "" {
		return nil, Errorf(EInvalid, "call id is required")
	}
	// Another call's fence may be stamped over a fence left by a vanished
	// worker only when both calls are idempotent and reached by the run's
	// stored position: the new worker's replay makes the earlier call again
	// under its key, and reaches the fenced one after it.
	if cur.PendingEffect != "" && cur.PendingEffect != f.CallID && !(cur.PendingIdempotent && f.Idempotent) {
		return nil, Errorf(EConflict, "run %s already has pending effect %q", cur.ID, cur.PendingEffect)
	}
	next := cur.Clone()
	next.PendingEffect = f.CallID
	next.PendingIdempotent = f.Idempotent
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	if f.Checkpoint != nil {
		ref, err := s.putCheckpoint(ctx, cur, f.Checkpoint)
		if err != nil {
			return nil, err
		}
		next.Checkpoint = ref
		next.WroteSinceClaim = false
		return s.commit(ctx, cur, next, Write{})
	}
	if u := cur.unwritten; u != nil && u.writeResult {
		return s.commit(ctx, cur, next, Write{})
	}
	return s.commitRow(ctx, cur, next)
}

// ClearPendingEffect removes the fence for callID once the write's outcome
// is known. wrote says whether it took effect (false: the tool failed before
// it changed anything); when it did, WroteSinceClaim is set in the same
// write, unless the fence was idempotent (the call replays under its key).
// Codes: EInvalid, ENotFound, EConflict.
func (s *Store) ClearPendingEffect(ctx context.Context, cur *Run, owner, callID string, wrote bool) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if callID == "" || cur.PendingEffect != callID {
		return nil, Errorf(EConflict, "run %s has no pending effect %q", cur.ID, callID)
	}
	next := cur.Clone()
	next.PendingEffect, next.PendingIdempotent = "", false
	// An idempotent call the stored position reaches is made again under
	// its key by a new worker: its effect does not make a replay unsafe.
	next.WroteSinceClaim = cur.WroteSinceClaim || (wrote && !cur.PendingIdempotent)
	next.LeaseUntil = s.now().Add(s.opts.LeaseTTL)
	return s.commit(ctx, cur, next, Write{})
}

// SegmentEnd is what Checkpoint records when a worker's segment ends before
// the worker's time is up.
type SegmentEnd struct {
	// State is the encoded loop.Checkpoint to continue from.
	State []byte
	// Counters are the run's totals so far.
	Counters loop.Counters
	// Cause says why the segment ended (for the event), e.g.
	// "segment_budget" or "deadline".
	Cause string
}

// Checkpoint ends owner's segment of a RUNNING run: the checkpoint blob is
// put first, then one write moves the run to RESUMING (released, with the
// checkpoint and the counters, and a checkpointed event), where a worker
// claims it again: the worker dispatches that job itself, and the sweep
// re-dispatches it after DispatchGrace if that job is lost. A write whose
// outcome is unknown refuses the checkpoint unless its call is idempotent
// (the fence stays; the next worker makes the call again). Codes: EInvalid
// (including a state over MaxStateSize), ENotFound, EConflict.
func (s *Store) Checkpoint(ctx context.Context, cur *Run, owner string, e SegmentEnd) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	if len(e.State) == 0 {
		return nil, Errorf(EInvalid, "checkpoint state is required")
	}
	if cur.PendingEffect != "" && !cur.PendingIdempotent {
		return nil, Errorf(EConflict, "run %s has pending effect %q; record its result before checkpointing", cur.ID, cur.PendingEffect)
	}
	ref, err := s.putCheckpoint(ctx, cur, e.State)
	if err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.Status = StatusResuming
	next.Checkpoint = ref
	next.Counters = e.Counters
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.WroteSinceClaim = false
	next.Reclaims = 0
	return s.commit(ctx, cur, next, Write{Events: []Event{{Type: EventCheckpointed, Actor: owner, Data: mustJSON(struct {
		Cause         string        `json:"cause,omitempty"`
		StateSHA256   string        `json:"state_sha256"`
		StateSize     int64         `json:"state_size"`
		Counters      loop.Counters `json:"counters"`
		PendingEffect string        `json:"pending_effect,omitempty"`
	}{e.Cause, ref.SHA256, ref.Size, e.Counters, cur.PendingEffect})}}})
}

// putCheckpoint stores a checkpoint blob of the run.
func (s *Store) putCheckpoint(ctx context.Context, cur *Run, blob []byte) (StateRef, error) {
	ref, err := s.states.PutState(ctx, cur.ID, blob)
	if err != nil {
		switch ErrorCode(err) {
		case EInvalid:
			return StateRef{}, err
		case ETooLarge:
			return StateRef{}, Errorf(ETooLarge, "checkpoint of run %s: %s", cur.ID, ErrorMessage(err))
		}
		return StateRef{}, fmt.Errorf("checkpoint run %s: put state: %w", cur.ID, err)
	}
	return ref, nil
}

// LoadCheckpoint returns the checkpoint the run's checkpoint ref points at,
// verified against its SHA-256. Codes: ENotFound (the run has none), EGone
// (blob missing), EInternal (corrupted).
func (s *Store) LoadCheckpoint(ctx context.Context, r *Run) ([]byte, error) {
	if r.Checkpoint.IsZero() {
		return nil, Errorf(ENotFound, "run %s has no checkpoint", r.ID)
	}
	b, err := s.states.LoadState(ctx, r.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint of run %s: %w", r.ID, err)
	}
	return b, nil
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

// LifecycleDue is when r has time-based work of its own (approval expiry,
// reminder, retry of a failed mail, a first approval mail whose worker
// recorded none (Run.FirstNoticeDue) or quorum check, tool-results
// expiry, lease expiry, dispatch grace, retention, which waits for a
// pending delivery), leaving its outbox aside: the run's DueAt is the
// earlier of the two.
func (s *Store) LifecycleDue(r *Run) time.Time {
	switch r.Status {
	case StatusQueued, StatusResuming:
		return r.UpdatedAt.Add(s.opts.DispatchGrace)
	case StatusRunning:
		return r.LeaseUntil
	case StatusWaiting:
		due := r.ApprovalDeadline
		if !r.RemindAt.IsZero() && !r.ReminderSent && r.RemindAt.Before(due) {
			due = r.RemindAt
		}
		if !r.QuorumCheckAt.IsZero() && r.QuorumCheckAt.Before(due) {
			due = r.QuorumCheckAt
		}
		if len(r.MailRetry) > 0 && !r.MailRetryAt.IsZero() && r.MailRetryAt.Before(due) {
			due = r.MailRetryAt
		}
		if first := r.FirstNoticeDue(); !first.IsZero() && first.Before(due) {
			due = first
		}
		return due
	case StatusWaitingForToolResults:
		if r.HandOver == nil {
			return r.UpdatedAt // unreadable: the sweep looks at it at once
		}
		return r.HandOver.Deadline
	default:
		// Retention waits for the run's deliveries: a run purged with its
		// outbox would lose them (a receiver that is down gets its
		// retries for up to a day, whatever the retention).
		if o := r.OutboxDue(); !o.IsZero() && o.After(r.RetainUntil) {
			return o
		}
		return r.RetainUntil
	}
}

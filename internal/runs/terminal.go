package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Settlement is how a run ends, given to Settle.
type Settlement struct {
	// Status is StatusCompleted or StatusFailed.
	Status Status
	// Reason is the termination reason; loop.ReasonCompleted when empty and
	// Status is COMPLETED.
	Reason loop.TerminationReason
	// Output is the final output (JSON, optional).
	Output json.RawMessage
	// Counters, when set, are the run's final totals.
	Counters *loop.Counters
}

// Settle ends a RUNNING run as COMPLETED or FAILED, sets its retention and
// deletes its state blobs. The caller must hold the lease, or the lease must
// have expired (the sweeper settles those with owner ""). The settled event
// names the call whose write fence is stamped (pending_effect), and when
// the sweeper settles, the vanished worker (writesInFlight). Codes:
// EInvalid, ENotFound, EConflict.
func (s *Store) Settle(ctx context.Context, cur *Run, owner string, o Settlement) (*Run, error) {
	if o.Status != StatusCompleted && o.Status != StatusFailed {
		return nil, Errorf(EInvalid, "settle status %q: want %s or %s", o.Status, StatusCompleted, StatusFailed)
	}
	if o.Reason == "" {
		if o.Status == StatusFailed {
			return nil, Errorf(EInvalid, "a failed run needs a termination reason")
		}
		o.Reason = loop.ReasonCompleted
	}
	if err := checkJSON("output", o.Output, MaxOutputSize, true); err != nil {
		return nil, err
	}
	now := s.now()
	if cur.Status != StatusRunning {
		return nil, Errorf(EConflict, "run %s is %s, not running", cur.ID, cur.Status)
	}
	if cur.LeaseOwner != owner && !cur.LeaseExpired(now) {
		return nil, Errorf(EConflict, "run %s is leased by another worker", cur.ID)
	}
	next := s.terminal(cur, o.Status, o.Reason, now)
	next.Output = cloneRaw(o.Output)
	if o.Counters != nil {
		next.Counters = *o.Counters
	}
	actor := owner
	// A worker that ends its run with a write's fence stamped names that
	// call: its write may or may not have taken effect, and no step of it
	// will be recorded.
	inFlight := writesInFlight{PendingEffect: cur.PendingEffect}
	if actor == "" {
		// Its worker vanished: say what that worker's writes had come to.
		actor = "purge"
		inFlight = writesInFlightOf(cur)
	}
	return s.finish(ctx, cur, next, Event{Type: EventSettled, Actor: actor, Data: mustJSON(struct {
		Status Status                 `json:"status"`
		Reason loop.TerminationReason `json:"reason"`
		writesInFlight
	}{o.Status, o.Reason, inFlight})})
}

// writesInFlight is what the event that ends a run without its worker says
// about that worker's writes, so the audit accounts for every write: the
// worker that held the run (its claim's event may not be on record: a
// fence writes the claim's row and leaves its event for the segment's
// next write, StampFence), the call whose write fence is stamped (its
// write may or may not have taken effect, and no step of it will be
// recorded) and whether a write took effect since the worker's claim.
type writesInFlight struct {
	LeaseOwner      string `json:"lease_owner,omitempty"`
	PendingEffect   string `json:"pending_effect,omitempty"`
	WroteSinceClaim bool   `json:"wrote_since_claim,omitempty"`
}

func writesInFlightOf(cur *Run) writesInFlight {
	if cur.Status != StatusRunning {
		return writesInFlight{}
	}
	return writesInFlight{LeaseOwner: cur.LeaseOwner, PendingEffect: cur.PendingEffect, WroteSinceClaim: cur.WroteSinceClaim}
}

// Cancel ends any non-terminal run as CANCELLED and deletes its state blobs;
// a running worker finds out at its next write. The cancelled event of a
// running run names its worker (lease_owner) and its write in flight
// (pending_effect) and says whether a write took effect since the claim
// (wrote_since_claim). It retries when only the
// version moved. Codes: EInvalid, ENotFound, EConflict (already terminal).
func (s *Store) Cancel(ctx context.Context, cur *Run, actor string) (*Run, error) {
	if actor == "" {
		return nil, Errorf(EInvalid, "actor is required")
	}
	var blobs []StateRef
	r, err := s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status.Terminal() {
			return nil, Write{}, Errorf(EConflict, "run %s is already %s", cur.ID, cur.Status)
		}
		blobs = blobsOf(cur)
		next := s.terminal(cur, StatusCancelled, loop.ReasonCancelled, now)
		ev := Event{Type: EventCancelled, Actor: actor}
		if w := writesInFlightOf(cur); w != (writesInFlight{}) {
			// Cancelled under a running worker: the worker, its write in
			// flight, or one whose step it has not recorded yet, is named
			// here.
			ev.Data = mustJSON(w)
		}
		return next, Write{Events: []Event{ev}}, nil
	}, func(fresh *Run) bool { return !fresh.Status.Terminal() })
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID, blobs)
	return r, nil
}

// Expire ends a WAITING_FOR_APPROVAL run whose approval deadline has passed
// as EXPIRED (reason approval_expired), or a WAITING_FOR_TOOL_RESULTS run
// whose results were not submitted in time (reason tool_results_expired),
// and deletes its state blobs. Codes: ENotFound, EConflict (not waiting,
// or the deadline has not passed).
func (s *Store) Expire(ctx context.Context, cur *Run) (*Run, error) {
	if cur != nil && cur.Status == StatusWaitingForToolResults {
		return s.expireToolResults(ctx, cur)
	}
	suspension := cur.SuspensionID
	var blobs []StateRef
	r, err := s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaiting || cur.SuspensionID != suspension {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
		}
		blobs = blobsOf(cur)
		if now.Before(cur.ApprovalDeadline) {
			return nil, Write{}, Errorf(EConflict, "the approval window of run %s is still open", cur.ID)
		}
		next := s.terminal(cur, StatusExpired, loop.ReasonApprovalExpired, now)
		return next, Write{Events: []Event{{Type: EventExpired, Actor: "purge", Data: mustJSON(struct {
			SuspensionID string `json:"suspension_id"`
		}{cur.SuspensionID})}}}, nil
	}, func(fresh *Run) bool { return fresh.Status == StatusWaiting && fresh.SuspensionID == suspension })
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID, blobs)
	return r, nil
}

// UnmeetableCall is a held call whose approval can no longer be given, as
// the expired event of a run EndUnmeetable ended names it.
type UnmeetableCall struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Detail says why (CheckOpenApprovals).
	Detail string `json:"detail"`
}

// EndUnmeetable ends WAITING_FOR_APPROVAL run cur, as the sweep read it,
// as EXPIRED (reason approval_unmeetable) because held calls of it can no
// longer get the approvals they still need (lost: why, by call id, from
// CheckOpenApprovals on cur), each found so by an earlier check too (cur
// marks it: Run.QuorumLost, written by ScheduleQuorumCheck; how long
// before is the sweep's rule), and
// deletes its state blobs, as Expire does
// at the deadline: the expired event names the calls and why, the run's
// output says it, its inbox entries go and its webhook hears run.expired.
// The write is conditional on cur's version, the row the check read, and
// is never retried on a later one: a vote (or any write) that lands first
// wins, and the run is checked again on the row it left. Codes: EInvalid
// (no call named, one that is not a held call of cur awaiting approval, or
// one an earlier check did not mark), ENotFound, EConflict (the run changed since cur, or is not
// waiting).
func (s *Store) EndUnmeetable(ctx context.Context, cur *Run, lost map[string]string) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	if cur.Status != StatusWaiting {
		return nil, Errorf(EConflict, "run %s is %s, not waiting for approval", cur.ID, cur.Status)
	}
	if len(lost) == 0 {
		return nil, Errorf(EInvalid, "no held call of run %s was named as unmeetable", cur.ID)
	}
	for id := range lost {
		if _, ok := cur.LostSince(id); !ok {
			// Two checks must find a call so: the first marks it
			// (ScheduleQuorumCheck).
			return nil, Errorf(EInvalid, "call %q of run %s was not found unmeetable by an earlier quorum check", id, cur.ID)
		}
	}
	var calls []UnmeetableCall
	var details []string
	for _, c := range cur.PendingCalls {
		why, ok := lost[c.ID]
		if !ok {
			continue
		}
		if !c.NeedsApproval {
			return nil, Errorf(EInvalid, "call %q of run %s needs no approval", c.ID, cur.ID)
		}
		calls = append(calls, UnmeetableCall{CallID: c.ID, Tool: c.Tool, Detail: cutText(why, 500, "…")})
		details = append(details, fmt.Sprintf("call %s (%s): %s", c.ID, c.Tool, why))
	}
	if len(calls) != len(lost) {
		return nil, Errorf(EInvalid, "a call named as unmeetable is not held by run %s", cur.ID)
	}
	now := s.now()
	next := s.terminal(cur, StatusExpired, loop.ReasonApprovalUnmeetable, now)
	next.Output = FinalOutput("", loop.ReasonApprovalUnmeetable,
		strings.Join(details, "; ")+"; the directory changed while the run waited, and nothing of the held turn ran")
	r, err := s.commit(ctx, cur, next, Write{Events: []Event{{Type: EventExpired, Actor: "purge", Data: mustJSON(struct {
		SuspensionID string                 `json:"suspension_id"`
		Reason       loop.TerminationReason `json:"reason"`
		Calls        []UnmeetableCall       `json:"calls"`
	}{cur.SuspensionID, loop.ReasonApprovalUnmeetable, calls})}}})
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID, blobsOf(cur))
	return r, nil
}

// ScheduleQuorumCheck moves the next quorum check of WAITING_FOR_APPROVAL
// run cur, as the sweep read it, to at (Run.QuorumCheckAt: the run's due
// time moves with it; zero, or not before the approval deadline: no more
// checks), and records what the check found (found: the held calls that
// can certainly no longer get their approvals are marked, each when a
// check first found it so, in Run.QuorumLost; see QuorumFinding). One write of the row alone, with no event, conditional on
// cur's version: a change since (a vote) refuses it, and the run, still
// due, is checked again on the new row. Codes: ENotFound, EConflict.
// A check that also changes who is asked to decide the held turn writes
// that in the same write (ReviseDeciders).
func (s *Store) ScheduleQuorumCheck(ctx context.Context, cur *Run, at time.Time, found QuorumFinding) (*Run, error) {
	return s.ReviseDeciders(ctx, cur, at, found, DeciderRevision{})
}

// Purge deletes a terminal run: its state blobs (the whole prefix), then its
// row, events and tokens. Purging a run that no longer exists deletes any
// blobs left under its prefix and succeeds. Codes: EConflict (not terminal).
func (s *Store) Purge(ctx context.Context, id string) error {
	if !ValidRunID(id) {
		return Errorf(EInvalid, "run id %q is not valid", id)
	}
	r, err := s.rows.GetRun(ctx, id)
	switch {
	case ErrorCode(err) == ENotFound:
		r = &Run{ID: id, Status: StatusCompleted}
	case err != nil:
		return fmt.Errorf("purge run %s: %w", id, err)
	case !r.Status.Terminal():
		return Errorf(EConflict, "run %s is %s; only terminal runs are purged", id, r.Status)
	}
	// Blobs first: if the row delete then fails, the run stays in the due
	// index and the next sweep retries.
	if err := s.states.DeleteRunStates(ctx, id); err != nil {
		return fmt.Errorf("purge run %s: delete blobs: %w", id, err)
	}
	err = s.rows.DeleteRun(ctx, id, r.TokenHashes)
	s.watch.changed(id)
	if err != nil {
		return fmt.Errorf("purge run %s: delete rows: %w", id, err)
	}
	return nil
}

// terminal returns cur moved to a terminal status at now.
func (s *Store) terminal(cur *Run, st Status, reason loop.TerminationReason, now time.Time) *Run {
	next := cur.Clone()
	next.Status = st
	next.Reason = reason
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.State, next.Checkpoint = StateRef{}, StateRef{}
	next.RetainUntil = now.Add(s.opts.Retention)
	return next
}

// finish commits a terminal transition and then deletes the state blobs.
func (s *Store) finish(ctx context.Context, cur, next *Run, ev Event) (*Run, error) {
	r, err := s.commit(ctx, cur, next, Write{Events: []Event{ev}})
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID, blobsOf(cur))
	return r, nil
}

// dropStates deletes the blobs a run that just ended pointed at (blobsOf
// the row before its terminal write), best effort, by key: no LIST (which
// S3 prices as a PUT; deletes are free). Blobs that earlier suspensions
// and checkpoints left, and anything a failure here leaves, go with the
// run's prefix at purge (retention) and the bucket's lifecycle backstop.
func (s *Store) dropStates(ctx context.Context, id string, blobs []StateRef) {
	if len(blobs) == 0 {
		return
	}
	if err := s.states.DeleteStates(ctx, blobs...); err != nil {
		s.opts.Logger.WarnContext(ctx, "delete state blobs of a settled run", "run_id", id, "err", err)
	}
}

// blobsOf returns the blobs r points at: its suspended state, its
// checkpoint and its submitted client-tool results.
func blobsOf(r *Run) []StateRef {
	var out []StateRef
	for _, b := range []StateRef{r.State, r.Checkpoint} {
		if !b.IsZero() {
			out = append(out, b)
		}
	}
	if r.HandOver != nil && !r.HandOver.Results.IsZero() {
		out = append(out, r.HandOver.Results)
	}
	return out
}

// FinalOutput is the output of a run the loop ended: the model's final
// text, the reason and its detail, as JSON within MaxOutputSize. A final
// text too long for the row is cut (whole characters) and marked with
// text_truncated and its whole size, text_size, so settling never fails
// on what the model wrote.
func FinalOutput(text string, reason loop.TerminationReason, detail string) json.RawMessage {
	type output struct {
		Text          string                 `json:"text,omitempty"`
		TextTruncated bool                   `json:"text_truncated,omitempty"`
		TextSize      int                    `json:"text_size,omitempty"`
		Reason        loop.TerminationReason `json:"reason"`
		Detail        string                 `json:"detail,omitempty"`
	}
	o := output{Text: text, Reason: reason, Detail: cutText(detail, 2000, "…")}
	b, err := json.Marshal(o)
	if err == nil && len(b) <= MaxOutputSize {
		return b
	}
	// Keep as much of the text as fits, escapes included: the largest cut
	// (in bytes of the text) whose JSON is within the limit.
	o.TextTruncated, o.TextSize = true, len(text)
	encode := func(n int) []byte {
		o.Text = cutText(text, n, "…")
		b, err := json.Marshal(o)
		if err != nil || len(b) > MaxOutputSize {
			return nil
		}
		return b
	}
	lo, hi := 0, min(len(text), MaxOutputSize)
	for lo < hi {
		if mid := (lo + hi + 1) / 2; encode(mid) != nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return encode(lo)
}

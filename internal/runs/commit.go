package runs

import (
	"context"
	"fmt"
	"time"
)

// commit writes next in place of cur (conditional on cur's status and
// version) with w's events numbered after cur.LastSeq.
func (s *Store) commit(ctx context.Context, cur, next *Run, w Write) (*Run, error) {
	r, _, err := s.write(ctx, cur, next, w)
	return r, err
}

// commitRow writes next in place of cur like commit, but without the
// events cur holds unwritten (its claim's event, the loop steps since the
// segment's last write): the returned row still holds them, in order, for
// the segment's next write, which records them before its own. Every other
// write carries them; only StampFence uses this, for a fence that must be
// durable before its tool call while nothing it would carry must (see
// there): a write of the row alone is one conditional PutItem on DynamoDB
// (1 write unit for a row under 1 KB), one with events a transaction
// (2 units per item).
func (s *Store) commitRow(ctx context.Context, cur, next *Run) (*Run, error) {
	u := cur.unwritten
	if u == nil || len(u.events) == 0 {
		return s.commit(ctx, cur, next, Write{})
	}
	r, _, err := s.writeHolding(ctx, cur, next, Write{}, true)
	if err != nil {
		return nil, err
	}
	held := u.clone()
	held.status = r.Status // the claim, if it was held, is written now
	held.claim = false
	held.writeID = "" // the snapshot's write is no longer the stored one
	r.unwritten = held
	return r, nil
}

// write is commit that also returns the run as read back after a refused
// write (nil otherwise).
func (s *Store) write(ctx context.Context, cur, next *Run, w Write) (*Run, *Run, error) {
	return s.writeHolding(ctx, cur, next, w, false)
}

// writeHolding is write; with hold, the events cur holds unwritten are
// left out of the write (commitRow).
func (s *Store) writeHolding(ctx context.Context, cur, next *Run, w Write, hold bool) (*Run, *Run, error) {
	if !ValidRunID(cur.ID) {
		return nil, nil, Errorf(ENotFound, "run %q not found", cur.ID)
	}
	if next.Status != cur.Status && !CanTransition(cur.Status, next.Status) {
		return nil, nil, Errorf(EConflict, "run %s cannot go from %s to %s", cur.ID, cur.Status, next.Status)
	}
	now := s.now()
	w.ExpectStatus = cur.Status
	stored := cur.Status
	if u := cur.unwritten; u != nil {
		stored = u.status
		// The segment's steps since its last write go first, in order.
		w.ExpectStatus = u.status
		w.ExpectWriteID = u.writeID
		if !hold {
			w.Events = append(u.copyEvents(), w.Events...)
		}
	}
	leaveInbox(cur, next, &w)
	leaveQuorumCheck(cur, next)
	if next.Status == StatusRunning && (stored == StatusQueued || stored == StatusResuming) {
		s.leaseToDispatchDeadline(cur, next, now)
	}
	next.Version = cur.Version + 1
	next.UpdatedAt = now
	scheduled := s.schedule(cur, next, &w, now)
	for _, ev := range w.Events {
		// An event that takes a kept number is stored alone (on DynamoDB
		// an event item is sorted under the last number it holds).
		if ev.Seq != 0 && (len(w.Events) != 1 || ev.Seq > cur.LastSeq) {
			return nil, nil, Errorf(EInvalid, "event %d of run %s takes a kept number: it must be its write's only event", ev.Seq, cur.ID)
		}
	}
	for i := range w.Events {
		w.Events[i].RunID = cur.ID
		w.Events[i].At = now
		if w.Events[i].Seq != 0 {
			continue // it takes the number a suspension kept for it
		}
		next.LastSeq++
		w.Events[i].Seq = next.LastSeq
	}
	if w.keepNotice {
		next.LastSeq++
		next.NoticeSeq = next.LastSeq
	}
	next.DueAt = s.dueAt(next) // after NoticeSeq: a first mail not yet recorded is due (Run.FirstNoticeDue)
	SealWriteID(next)
	w.Run = next
	w.ExpectVersion = cur.Version
	err := s.rows.Write(ctx, w)
	s.watch.changed(cur.ID)
	if err != nil {
		fresh, err := s.explain(ctx, cur, w, err)
		// Unless our own write landed and only its response was lost (an
		// SDK retry then failed its condition), which is success.
		if fresh == nil || fresh.WriteID != next.WriteID {
			return nil, fresh, err
		}
	}
	if scheduled {
		s.notifyScheduled(next)
	}
	return next.Clone(), nil, nil
}

// explain turns a failed conditional write into the error the caller needs,
// reading the run (and token) back; it also returns the fresh run, if any.
func (s *Store) explain(ctx context.Context, cur *Run, w Write, err error) (*Run, error) {
	if ErrorCode(err) != EConflict {
		return nil, fmt.Errorf("write run %s: %w", cur.ID, err)
	}
	fresh, gerr := s.rows.GetRun(ctx, cur.ID)
	switch {
	case ErrorCode(gerr) == ENotFound:
		return nil, Errorf(ENotFound, "run %s not found", cur.ID)
	case gerr != nil:
		return nil, fmt.Errorf("write run %s: %w (re-read: %v)", cur.ID, err, gerr) //nolint:errorlint // the re-read's error is context; its code must not be found by errors.As
	case fresh.Version != w.ExpectVersion || fresh.Status != w.ExpectStatus || (w.ExpectWriteID != "" && fresh.WriteID != w.ExpectWriteID):
		return fresh, Errorf(EConflict, "run %s changed meanwhile: now %s at version %d, not %s at version %d",
			cur.ID, fresh.Status, fresh.Version, w.ExpectStatus, w.ExpectVersion)
	}
	if w.UseToken != nil {
		t, terr := s.rows.Token(ctx, w.UseToken.Hash)
		switch {
		case ErrorCode(terr) == ENotFound:
			return fresh, Errorf(ENotFound, "approval link not found")
		case terr == nil:
			if uerr := t.Usable(w.UseToken.At); uerr != nil {
				return fresh, uerr
			}
			if t.RunID != w.UseToken.RunID || t.SuspensionID != w.UseToken.SuspensionID {
				return fresh, Errorf(EConflict, "approval link is for another suspension")
			}
		}
	}
	return fresh, Errorf(EConflict, "run %s: write refused: %s", cur.ID, ErrorMessage(err))
}

// retry runs a caller-intent transition: build computes the next row from
// the latest run; when the write fails only because the version moved and
// again(fresh) still holds, it runs again on the fresh row.
func (s *Store) retry(ctx context.Context, cur *Run, build func(cur *Run, now time.Time) (*Run, Write, error), again func(fresh *Run) bool) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	limit := maxRetries
	if cur.Voting() {
		// Each landed vote moves the version under the others: a voter may
		// have to rebuild once per vote that can land before its own.
		limit = maxVoteRetries
	}
	for attempt := 0; ; attempt++ {
		next, w, err := build(cur, s.now())
		if err != nil {
			return nil, err
		}
		r, fresh, err := s.write(ctx, cur, next, w)
		if err == nil || ErrorCode(err) != EConflict || attempt == limit {
			return r, err
		}
		if fresh == nil || fresh.Version == cur.Version || !again(fresh) {
			return nil, err
		}
		cur = fresh
	}
}

// leaseToDispatchDeadline lets the write that claims a QUEUED or RESUMING
// run (Claim, or the first write of a ClaimOnWrite segment) end the lease
// at the run's dispatch deadline (UpdatedAt + DispatchGrace, its due time
// while it waited: LifecycleDue) when that leaves at least half a lease
// and no more than the write gives: the run's due time, the due index's
// key, then stays where it was (a key that moves costs DynamoDB an index
// delete and put). A live worker renews such a lease as any other: its
// heartbeat renews once less than half is left (and a segment that has not
// written its claim writes it by Worker.claimBy), so the sweep does not
// find the lease of a live worker expired.
func (s *Store) leaseToDispatchDeadline(cur, next *Run, now time.Time) {
	deadline := cur.UpdatedAt.Add(s.opts.DispatchGrace)
	if deadline.Before(now.Add(s.opts.LeaseTTL/2)) || deadline.After(next.LeaseUntil) {
		return
	}
	next.LeaseUntil = deadline
}

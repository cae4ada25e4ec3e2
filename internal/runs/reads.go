package runs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Get returns the run. Codes: ENotFound.
func (s *Store) Get(ctx context.Context, id string) (*Run, error) {
	if !ValidRunID(id) {
		return nil, Errorf(ENotFound, "run %q not found", id)
	}
	r, err := s.rows.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// Events returns up to limit (1 to 1000, default 100) events of the run with
// Seq > after, in order; pass the last Seq as after to read the next page.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	if !ValidRunID(runID) || after < 0 {
		return nil, nil
	}
	evs, err := s.rows.Events(ctx, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return evs, nil
}

// LookupToken returns the approval token with the given hash, used or
// expired alike (see ApprovalToken.Usable). Codes: ENotFound.
func (s *Store) LookupToken(ctx context.Context, hash string) (*ApprovalToken, error) {
	if !ValidTokenHash(hash) {
		return nil, Errorf(ENotFound, "approval link not found")
	}
	t, err := s.rows.Token(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("lookup token: %w", err)
	}
	return t, nil
}

// Due returns up to limit (default 100) runs whose next deadline (DueAt) is
// at or before now, and a cursor for the next page ("" at the end).
func (s *Store) Due(ctx context.Context, now time.Time, limit int, cursor string) ([]*Run, string, error) {
	if limit <= 0 {
		limit = 100
	}
	rs, next, err := s.rows.Due(ctx, ms(now), limit, cursor)
	if err != nil {
		return nil, "", fmt.Errorf("due runs: %w", err)
	}
	return rs, next, nil
}

// LoadState returns the suspended state the run's state ref points at,
// verified against its SHA-256; the run is never changed. Codes: ENotFound
// (the run has no state), EGone (blob missing), EInternal (corrupted).
func (s *Store) LoadState(ctx context.Context, r *Run) ([]byte, error) {
	if r.State.IsZero() {
		return nil, Errorf(ENotFound, "run %s has no suspended state", r.ID)
	}
	b, err := s.states.LoadState(ctx, r.State)
	if err != nil {
		return nil, fmt.Errorf("load state of run %s: %w", r.ID, err)
	}
	return b, nil
}

// HeldCall returns, read from the state blob, the whole of a call the run
// holds: what the row's bounded summary may have shortened. While r waits
// for approval it is the pending call callID of the current suspension
// with its whole preview ("" when the tool gives none); while r waits for
// tool results, the handed-over client call callID with its whole final
// (possibly edited) input, and no preview. Codes: EConflict (r waits for
// neither), ENotFound (no such call), EGone (state blob missing),
// EInternal (corrupted).
func (s *Store) HeldCall(ctx context.Context, r *Run, callID string) (loop.PendingCall, string, error) {
	var held bool
	switch r.Status {
	case StatusWaiting:
		held = slices.ContainsFunc(r.PendingCalls, func(c CallSummary) bool { return c.ID == callID })
	case StatusWaitingForToolResults:
		held = r.HandOver != nil && slices.ContainsFunc(r.HandOver.Calls, func(c ClientCallSummary) bool { return c.ID == callID })
	default:
		return loop.PendingCall{}, "", Errorf(EConflict, "run %s is %s: only a run waiting for approval or for tool results holds calls", r.ID, r.Status)
	}
	if !held {
		return loop.PendingCall{}, "", Errorf(ENotFound, "call %q is not held by run %s", callID, r.ID)
	}
	blob, err := s.LoadState(ctx, r)
	if err != nil {
		return loop.PendingCall{}, "", err
	}
	st, err := loop.DecodeState(blob)
	if err != nil {
		return loop.PendingCall{}, "", Errorf(EInternal, "the suspended state of run %s cannot be read: %v", r.ID, err)
	}
	if r.Status == StatusWaitingForToolResults {
		if st.HandOver == nil || st.SuspensionID != r.HandOver.ID {
			return loop.PendingCall{}, "", Errorf(EInternal, "the state of run %s is not of its hand-over %s", r.ID, r.HandOver.ID)
		}
		for _, c := range st.HandOver.Calls {
			if c.ID == callID {
				return loop.PendingCall{ID: c.ID, Name: c.Name, Input: c.Input}, "", nil
			}
		}
		return loop.PendingCall{}, "", Errorf(EInternal, "the state of run %s does not hold client call %q", r.ID, callID)
	}
	if st.SuspensionID != r.SuspensionID {
		return loop.PendingCall{}, "", Errorf(EInternal, "the suspended state of run %s is of suspension %s, not %s", r.ID, st.SuspensionID, r.SuspensionID)
	}
	for _, c := range st.PendingCalls {
		if c.ID == callID {
			return c, st.Previews[c.ID], nil
		}
	}
	return loop.PendingCall{}, "", Errorf(EInternal, "the suspended state of run %s does not hold call %q", r.ID, callID)
}

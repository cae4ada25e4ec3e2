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

// HeldCall returns the whole pending call callID of r's current suspension
// and its whole preview ("" when the tool gives none), read from the
// suspended state: what the row's summary may have shortened. r must be
// waiting for approval. Codes: EConflict (r is not waiting), ENotFound (no
// such pending call), EGone (state blob missing), EInternal (corrupted).
func (s *Store) HeldCall(ctx context.Context, r *Run, callID string) (loop.PendingCall, string, error) {
	if r.Status != StatusWaiting {
		return loop.PendingCall{}, "", Errorf(EConflict, "run %s is %s: only a run waiting for approval has held calls", r.ID, r.Status)
	}
	if !slices.ContainsFunc(r.PendingCalls, func(c CallSummary) bool { return c.ID == callID }) {
		return loop.PendingCall{}, "", Errorf(ENotFound, "call %q is not pending in run %s", callID, r.ID)
	}
	blob, err := s.LoadState(ctx, r)
	if err != nil {
		return loop.PendingCall{}, "", err
	}
	st, err := loop.DecodeState(blob)
	if err != nil {
		return loop.PendingCall{}, "", Errorf(EInternal, "the suspended state of run %s cannot be read: %v", r.ID, err)
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

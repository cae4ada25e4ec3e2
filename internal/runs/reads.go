package runs

import (
	"context"
	"fmt"
	"time"
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

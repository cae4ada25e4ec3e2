package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/identity"
)

// MaxIdempotencyKeyBytes is the longest idempotency key a caller may give
// when it starts a run (the Idempotency-Key header of POST /runs).
const MaxIdempotencyKeyBytes = 255

// ValidIdempotencyKey reports whether k is a key a caller may start a run
// under: 1 to MaxIdempotencyKeyBytes visible ASCII characters ('!' to '~':
// no space, no control character, nothing outside ASCII), so that no proxy
// trims, folds or re-encodes it on its way.
func ValidIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyBytes {
		return false
	}
	for i := range len(k) {
		if k[i] < '!' || k[i] > '~' {
			return false
		}
	}
	return true
}

// IdempotencyKey is a stored idempotency key: the run the first request
// under it created, and the digest of that request. Adapters store it in
// the write that creates the run (Write.IdempotencyKey) and delete it with
// the run (RowStore.DeleteRun), so a key names its run for as long as the
// run is kept.
type IdempotencyKey struct {
	// Hash names the key: IdempotencyKeyHash of the caller and the key.
	Hash string `json:"hash"`
	// RunID is the run the key started.
	RunID string `json:"run_id"`
	// RequestSHA256 is the digest of the request that started it
	// (NewRun.RequestSHA256); a later request under the key must match it.
	RequestSHA256 string `json:"request_sha256"`
	// CreatedAt is when the run was created.
	CreatedAt time.Time `json:"created_at"`
}

// IdempotencyKeyHash names the key a caller started a run under: the
// SHA-256 (hex) of the caller as agentgate compares principals
// (identity.Principal.Key: an assumed-role session is its role, e-mail
// addresses ignore case) and of the key. Two callers never share a key; a
// caller's sessions of one role do. A caller that is no principal (the
// API refuses it before any key is stored) is taken as given.
func IdempotencyKeyHash(initiator, key string) string {
	scope := "raw:" + initiator
	if p, err := identity.Parse(initiator); err == nil {
		scope = p.Key()
	}
	h := sha256.New()
	h.Write([]byte("agentgate idempotency key v1\x00"))
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// KeyedRun returns the run initiator started under key, if requestSHA256
// is the digest of the request that started it: the answer to a request
// sent again. Codes: ENotFound (the key names no run: never used, or its
// run has been purged), EInvalid (the key started a run of another
// request; the message names the run).
func (s *Store) KeyedRun(ctx context.Context, initiator, key, requestSHA256 string) (*Run, error) {
	k, err := s.rows.IdempotencyKey(ctx, IdempotencyKeyHash(initiator, key))
	if err != nil {
		return nil, err
	}
	r, err := s.rows.GetRun(ctx, k.RunID)
	if err != nil {
		return nil, err // ENotFound: a key left behind by its run names no run
	}
	if k.RequestSHA256 != requestSHA256 {
		return nil, keyReused(key, k.RunID)
	}
	return r, nil
}

// keyReused is the refusal of a request under a key that started a run of
// another request.
func keyReused(key, runID string) error {
	return Errorf(EInvalid, "idempotency key %q started run %s with a different request: send that request unchanged to get run %s, or use a new key for a new run", key, runID, runID)
}

// keyAttempts bounds how often Start writes a run under a key whose item
// another request is writing at the same moment (DynamoDB cancels both
// transactions of a conflict; neither may have committed when the loser
// reads the key).
const keyAttempts = 5

// startKeyed writes w, the creation of r under an idempotency key, first,
// and reads the key only when the write is refused: it returns the run
// the key names when another request stored the key first, r when its own
// write landed (the answer was lost), and writes again when the key is not
// (yet) stored or names a run that is no longer stored (the key is taken
// over). Codes as Start.
func (s *Store) startKeyed(ctx context.Context, in NewRun, r *Run, w Write) (*Run, bool, error) {
	for attempt := 1; ; attempt++ {
		err := s.rows.Write(ctx, w)
		s.watch.changed(r.ID)
		if err == nil {
			return r.Clone(), false, nil
		}
		if ErrorCode(err) != EConflict {
			return nil, false, fmt.Errorf("create run %s: %w", r.ID, err)
		}
		k, kerr := s.rows.IdempotencyKey(ctx, w.IdempotencyKey.Hash)
		switch {
		case kerr == nil && k.RunID == r.ID:
			// Our write landed; its response was lost. The row as stored
			// (its write id is the one that landed) is the answer.
			fresh, gerr := s.rows.GetRun(ctx, r.ID)
			if gerr != nil {
				return nil, false, fmt.Errorf("create run %s: read it back: %w", r.ID, gerr)
			}
			return fresh, false, nil
		case kerr == nil:
			held, gerr := s.rows.GetRun(ctx, k.RunID)
			switch {
			case gerr == nil && k.RequestSHA256 != in.RequestSHA256:
				return nil, false, keyReused(in.IdempotencyKey, k.RunID)
			case gerr == nil:
				return held, true, nil
			case ErrorCode(gerr) != ENotFound:
				return nil, false, fmt.Errorf("create run %s: read the run of its idempotency key: %w", r.ID, gerr)
			}
			// The key outlived its run (DynamoDB's TTL backstop deleted
			// the row): the key is free again; take it over.
			w.ReplaceKeyOf = k.RunID
		case ErrorCode(kerr) == ENotFound:
			// The write that stores the key has not committed yet, or
			// failed; or the run's id is taken (a caller-chosen id).
			if _, gerr := s.rows.GetRun(ctx, r.ID); gerr == nil {
				return nil, false, Errorf(EConflict, "run %s already exists", r.ID)
			}
			w.ReplaceKeyOf = ""
		default:
			return nil, false, fmt.Errorf("create run %s: read its idempotency key: %w", r.ID, kerr)
		}
		if attempt == keyAttempts {
			return nil, false, Errorf(EConflict, "another request with idempotency key %q is being answered; send this one again", in.IdempotencyKey)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
		// A new write id: it is the transaction's request token, and this
		// write may differ from the last (ReplaceKeyOf).
		SealWriteID(r)
	}
}

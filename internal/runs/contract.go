package runs

import (
	"context"
	"time"
)

// RowStore persists run rows, their events and approval tokens, and keeps the
// due index. It is the contract Store needs from a database adapter
// (runs/dynamo, runs/embedded); adapters hold no domain rules beyond the
// conditions spelled out in Write.
type RowStore interface {
	// GetRun returns the run row. Codes: ENotFound.
	GetRun(ctx context.Context, id string) (*Run, error)
	// Write applies w atomically: all of it or, if any condition fails,
	// none of it. Codes: EConflict when a condition fails.
	Write(ctx context.Context, w Write) error
	// PutEvent stores one event of a run without writing or locking its
	// row: an event whose number a write of the row kept for it
	// (Run.NoticeSeq), which no other write gives an event (so an event
	// stored alone under that number is the only one that can hold it).
	// The caller has read the run; an adapter need not check that it still
	// exists (an event put for a run deleted meanwhile is never read: its
	// readers get the run's 404). Codes: EConflict when an event with
	// ev.Seq exists (ENotFound from an adapter that checks the run).
	PutEvent(ctx context.Context, ev Event) error
	// Events returns up to limit events of the run with Seq > after, in
	// Seq order (none for an unknown run). The numbers may skip one kept
	// and not (yet) taken.
	Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error)
	// Token returns the approval token with the given hash. Codes: ENotFound.
	Token(ctx context.Context, hash string) (*ApprovalToken, error)
	// Due returns up to limit runs whose DueAt is at or before now, and a
	// cursor for the next page ("" when there is none). Its cost grows with
	// the number of due runs, never with the number of runs.
	Due(ctx context.Context, now time.Time, limit int, cursor string) ([]*Run, string, error)
	// DeleteRun deletes the run row, all its events, every approval token
	// a Write issued to the run (found through the run, not through a list
	// on its row), the given tokens (Run.TokenHashes of rows written
	// before) and the idempotency key the run was created under, unless
	// that key names another run by now (Write.ReplaceKeyOf). Deleting
	// what does not exist is not an error.
	DeleteRun(ctx context.Context, runID string, tokenHashes []string) error
	// IdempotencyKey returns the idempotency key with the given hash
	// (IdempotencyKeyHash), read strongly consistently. Codes: ENotFound.
	IdempotencyKey(ctx context.Context, hash string) (*IdempotencyKey, error)
	// Inbox returns up to limit entries indexed under the approver key, in
	// InboxKey order (newest suspension first, then run id), and a cursor
	// for the next page ("" when there is none). Its cost grows with that
	// approver's entries, never with the number of runs or other
	// approvers' entries. Codes: EInvalid (a malformed cursor, or one of
	// another approver's inbox).
	Inbox(ctx context.Context, approver string, limit int, cursor string) ([]InboxEntry, string, error)
}

// RowPrimer is implemented by a RowStore that remembers something of the
// rows it read or wrote, to make later writes cheaper (runs/dynamo: which
// parts a row stores in items of their own, so that a write leaves out
// those that did not change). PrimeRow tells it of a row it did not read:
// r is the row as stored at r.Version, as the write that committed it
// returned it (Store.ClaimSnapshot). What it remembers must only ever make
// a write cheaper when the stored row is r, never make it wrong when it is
// not: the first write from r is conditional on r's status, version and
// WriteID, and a write that relies on more (runs/dynamo: that the stored
// row names a part item it leaves out) must check that in its condition.
type RowPrimer interface {
	PrimeRow(r *Run)
}

// Write is one atomic change: the new run row, the events appended with it,
// tokens issued and a token consumed.
type Write struct {
	// Run is the complete new row.
	Run *Run
	// Create requires that no row with Run.ID exists. Otherwise the stored
	// row must have ExpectStatus and ExpectVersion.
	Create        bool
	ExpectStatus  Status
	ExpectVersion int64
	// ExpectWriteID, when set, also requires the stored row's WriteID: the
	// first write of a worker that claimed from a snapshot instead of a
	// read (Store.ClaimSnapshot) writes only over the very row the
	// snapshot is, not over another row of the same version and status.
	ExpectWriteID string
	// Events are appended; their (RunID, Seq) must not exist yet. They
	// are in Seq order; an event that takes a kept number (Run.NoticeSeq)
	// is the only event of its write.
	Events []Event
	// NewTokens are stored; their hashes must not exist yet. The adapter
	// records them under the run (Run.ID) in the same write, so that
	// DeleteRun finds them: the row itself lists no tokens, and its size
	// does not grow with suspensions and reminders.
	NewTokens []ApprovalToken
	// UseToken, when set, marks a token used; it must exist, be bound to the
	// same run and suspension, be unused and expire after UseToken.At.
	UseToken *TokenUse
	// NewInbox entries are stored (the approver's inbox index), each
	// replacing a stored entry of the same key (a vote rewrites them).
	NewInbox []InboxEntry
	// DropInbox entries are deleted; deleting what does not exist is not
	// an error. Each key at most once (DynamoDB refuses two operations on
	// one item of a transaction; the embedded store refuses it too, so the
	// unit tests find it).
	DropInbox []InboxKey
	// IdempotencyKey, only with Create (and its run_started event), is
	// stored naming the new run (its RunID is Run.ID); no key with its
	// hash may be stored yet, unless ReplaceKeyOf is set and the stored
	// key names that run (one no longer stored: the key outlived it). The
	// adapter records it under the run, so that DeleteRun finds it. A
	// write without it stores nothing more.
	IdempotencyKey *IdempotencyKey
	ReplaceKeyOf   string

	// keepNotice, set by Suspend, has the write keep the number after its
	// events for the suspension's notified event (Run.NoticeSeq). The
	// Store's own: adapters cannot read it and have nothing to do for it.
	keepNotice bool
}

// TokenUse consumes one approval token inside a Write.
type TokenUse struct {
	Hash         string
	RunID        string
	SuspensionID string
	At           time.Time
}

// StateStore keeps suspended-state blobs, content-addressed under the run's
// prefix. It is the contract Store needs from a blob adapter (runs/s3state,
// runs/embedded); adapters encode with EncodeBlob and decode with
// DecodeBlob (the blob codec; loop.DecodeState reads the JSON inside) so every adapter compresses, hashes and verifies alike.
type StateStore interface {
	// PutState stores the state JSON of a run and returns where it went.
	// Codes: EInvalid when the compressed state exceeds MaxStateSize.
	PutState(ctx context.Context, runID string, state []byte) (StateRef, error)
	// LoadState returns the state JSON ref points at, verified against
	// ref.SHA256. Codes: EGone when the blob is missing, EInternal when it
	// is corrupted.
	LoadState(ctx context.Context, ref StateRef) ([]byte, error)
	// DeleteStates deletes the blobs refs point at (zero refs are skipped);
	// deleting what does not exist is not an error.
	DeleteStates(ctx context.Context, refs ...StateRef) error
	// DeleteRunStates deletes every blob under the run's prefix.
	DeleteRunStates(ctx context.Context, runID string) error
}

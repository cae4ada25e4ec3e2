package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentgate/agentgate/internal/runs"
)

// Bucket names.
var (
	bucketRuns   = []byte("runs")   // run id -> Run JSON
	bucketEvents = []byte("events") // run id -> nested bucket: big-endian seq -> Event JSON
	bucketTokens = []byte("tokens") // token hash -> ApprovalToken JSON
	bucketDue    = []byte("due")    // big-endian unix ms + run id -> run id
	bucketBlobs  = []byte("blobs")  // blob key -> gzip'd state
	bucketInbox  = []byte("inbox")  // inboxKey -> InboxEntry JSON
	// bucketRunTokens lists the tokens issued to each run, for DeleteRun:
	// run id -> nested bucket: token hash -> empty.
	bucketRunTokens = []byte("runtokens")
	// bucketKeys holds the idempotency keys runs were started under: key
	// hash -> IdempotencyKey JSON; bucketRunKeys names each such run's key,
	// for DeleteRun: run id -> key hash.
	bucketKeys    = []byte("idemkeys")
	bucketRunKeys = []byte("runidemkeys")
)

// DB is a bbolt file holding every run, event, token and state blob, and
// the document store's idempotency markers (docmarkers.go). It implements
// runs.RowStore, runs.StateStore and docstore.MarkerStore.
type DB struct {
	bolt *bolt.DB
	// group commits concurrent writes in shared transactions (group.go).
	group *groupCommit
	// rows keeps recently read rows decoded (rowcache.go).
	rows rowCache
}

var (
	_ runs.RowStore   = (*DB)(nil)
	_ runs.StateStore = (*DB)(nil)
)

// ErrInUse is Open's error (wrapped) for a file another process holds
// open: bbolt locks the file for one process.
var ErrInUse = errors.New("the store is in use by another process")

// openTimeout is how long Open waits for another process's lock.
const openTimeout = time.Second

// Open opens (creating if needed) the database file at path. It waits at
// most a second for another process holding the file, then returns an
// error wrapping ErrInUse.
//
// The free page list is not written to the file (NoFreelistSync): every
// commit would otherwise write it too, a page or more per transaction
// besides the data; Open rebuilds it by scanning the file instead, which
// costs a moment at start for a large file. The data and meta pages are
// fsync'd as before, so a write is on disk when it is acknowledged. The
// hashmap free list finds free pages without scanning an array.
func Open(path string) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        openTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w (it holds the file's lock; waited %s for it)", path, ErrInUse, openTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketRuns, bucketEvents, bucketTokens, bucketDue, bucketBlobs, bucketInbox, bucketRunTokens, bucketDocMarkers, bucketKeys, bucketRunKeys} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	return &DB{bolt: b, group: &groupCommit{db: b}}, nil
}

// OpenStore opens the database at path and returns a runs.Store over it; close
// the returned DB when done.
func OpenStore(path string, opts runs.Options) (*runs.Store, *DB, error) {
	db, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	return runs.NewStore(db, db, opts), db, nil
}

// Close closes the database file.
func (db *DB) Close() error { return db.bolt.Close() }

// GetRun implements runs.RowStore.
func (db *DB) GetRun(_ context.Context, id string) (*runs.Run, error) {
	var r *runs.Run
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		r, err = db.getRun(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, runs.Errorf(runs.ENotFound, "run %s not found", id)
	}
	return r, nil
}

// getRun returns a copy of the run stored under id, nil if there is none.
func (db *DB) getRun(tx *bolt.Tx, id string) (*runs.Run, error) {
	v := tx.Bucket(bucketRuns).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	return db.rows.decode(id, v)
}

func getToken(tx *bolt.Tx, hash string) (*runs.ApprovalToken, error) {
	v := tx.Bucket(bucketTokens).Get([]byte(hash))
	if v == nil {
		return nil, nil
	}
	var t runs.ApprovalToken
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, fmt.Errorf("decode token: %w", err)
	}
	return &t, nil
}

func put(b *bolt.Bucket, key []byte, v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, buf)
}

func seqKey(seq int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(seq)) //nolint:gosec // sequence numbers start at 1
}

func dueKey(at time.Time, id string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(at.UnixMilli())), id...)
}

// inboxPrefix starts the keys of an approver's inbox entries. Approver keys
// are ASCII without control characters (identity.Parse), so the NUL ends
// the prefix unambiguously.
func inboxPrefix(approver string) []byte { return append([]byte(approver), 0) }

// inboxKey orders an approver's entries newest suspension first (the
// inverted unix ms), then by run id.
func inboxKey(k runs.InboxKey) []byte {
	b := binary.BigEndian.AppendUint64(inboxPrefix(k.Approver), ^uint64(k.SuspendedAt.UnixMilli()))
	return append(b, k.RunID...)
}

func dropInbox(tx *bolt.Tx, keys []runs.InboxKey) error {
	b := tx.Bucket(bucketInbox)
	for _, k := range keys {
		if err := b.Delete(inboxKey(k)); err != nil {
			return err
		}
	}
	return nil
}

// rowHeader is what a write needs of the row it replaces: the condition
// (status, version and, for a write that expects it, the write id) and the
// due index entry to move. Taking only these fields (from the row cache
// when it holds the row, else decoding just them) keeps the committing
// goroutine, which every concurrent writer waits on, from building the
// whole row.
type rowHeader struct {
	Status  runs.Status `json:"status"`
	Version int64       `json:"version"`
	DueAt   time.Time   `json:"due_at,omitzero"`
	WriteID string      `json:"write_id,omitempty"`
}

func (db *DB) getRowHeader(tx *bolt.Tx, id string) (*rowHeader, error) {
	v := tx.Bucket(bucketRuns).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	return db.rows.header(id, v)
}

// encodedWrite is a runs.Write with its values already encoded, so the
// transaction, which runs on the group commit's one goroutine, only checks
// conditions and copies bytes.
type encodedWrite struct {
	row    []byte
	events [][]byte
	tokens [][]byte
	inbox  [][]byte
	key    []byte
}

func encodeWrite(w runs.Write) (*encodedWrite, error) {
	for i, k := range w.DropInbox {
		for _, other := range w.DropInbox[:i] {
			if other.Approver == k.Approver && other.RunID == k.RunID {
				// As DynamoDB would: the write names one item twice.
				return nil, fmt.Errorf("inbox entry of %s dropped twice in one write", k.Approver)
			}
		}
	}
	var e encodedWrite
	var err error
	if e.row, err = json.Marshal(w.Run); err != nil {
		return nil, fmt.Errorf("encode run %s: %w", w.Run.ID, err)
	}
	for _, ev := range w.Events {
		buf, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode event %d of run %s: %w", ev.Seq, w.Run.ID, err)
		}
		e.events = append(e.events, buf)
	}
	for _, t := range w.NewTokens {
		buf, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("encode token of run %s: %w", w.Run.ID, err)
		}
		e.tokens = append(e.tokens, buf)
	}
	for _, in := range w.NewInbox {
		buf, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode inbox entry of run %s: %w", w.Run.ID, err)
		}
		e.inbox = append(e.inbox, buf)
	}
	if k := w.IdempotencyKey; k != nil {
		if !w.Create || k.RunID != w.Run.ID {
			return nil, fmt.Errorf("an idempotency key is stored only by the write that creates its run (run %s)", w.Run.ID)
		}
		if e.key, err = json.Marshal(k); err != nil {
			return nil, fmt.Errorf("encode idempotency key of run %s: %w", w.Run.ID, err)
		}
	}
	return &e, nil
}

func getKey(tx *bolt.Tx, hash string) (*runs.IdempotencyKey, error) {
	v := tx.Bucket(bucketKeys).Get([]byte(hash))
	if v == nil {
		return nil, nil
	}
	var k runs.IdempotencyKey
	if err := json.Unmarshal(v, &k); err != nil {
		return nil, fmt.Errorf("decode idempotency key: %w", err)
	}
	return &k, nil
}

// putKey stores the idempotency key of a write that creates its run, if
// no key with its hash is stored (or the stored one names the run the
// write takes it over from), and records it under the run.
func putKey(tx *bolt.Tx, w runs.Write, enc []byte) error {
	k := w.IdempotencyKey
	old, err := getKey(tx, k.Hash)
	if err != nil {
		return err
	}
	if old != nil && (w.ReplaceKeyOf == "" || old.RunID != w.ReplaceKeyOf) {
		return runs.Errorf(runs.EConflict, "idempotency key of run %s exists", old.RunID)
	}
	if err := tx.Bucket(bucketKeys).Put([]byte(k.Hash), enc); err != nil {
		return err
	}
	return tx.Bucket(bucketRunKeys).Put([]byte(w.Run.ID), []byte(k.Hash))
}

// deleteKey deletes the idempotency key run runID was created under,
// unless it names another run by now.
func deleteKey(tx *bolt.Tx, runID string) error {
	hash := tx.Bucket(bucketRunKeys).Get([]byte(runID))
	if hash == nil {
		return nil
	}
	k, err := getKey(tx, string(hash))
	if err != nil {
		return err
	}
	if k != nil && k.RunID == runID {
		if err := tx.Bucket(bucketKeys).Delete(hash); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketRunKeys).Delete([]byte(runID))
}

// IdempotencyKey implements runs.RowStore.
func (db *DB) IdempotencyKey(_ context.Context, hash string) (*runs.IdempotencyKey, error) {
	var k *runs.IdempotencyKey
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		k, err = getKey(tx, hash)
		return err
	})
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, runs.Errorf(runs.ENotFound, "idempotency key not found")
	}
	return k, nil
}

// Write implements runs.RowStore in one bbolt transaction (shared with the
// writes of concurrent callers, group.go). The values are encoded before
// the write joins the queue.
func (db *DB) Write(_ context.Context, w runs.Write) error {
	id := w.Run.ID
	enc, err := encodeWrite(w)
	if err != nil {
		return err
	}
	return db.group.update(func(tx *bolt.Tx) error {
		old, err := db.getRowHeader(tx, id)
		if err != nil {
			return err
		}
		switch {
		case w.Create && old != nil:
			return runs.Errorf(runs.EConflict, "run %s exists", id)
		case !w.Create && old == nil:
			return runs.Errorf(runs.EConflict, "run %s does not exist", id)
		case !w.Create && (old.Status != w.ExpectStatus || old.Version != w.ExpectVersion):
			return runs.Errorf(runs.EConflict, "run %s is %s at version %d", id, old.Status, old.Version)
		case !w.Create && w.ExpectWriteID != "" && old.WriteID != w.ExpectWriteID:
			return runs.Errorf(runs.EConflict, "run %s at version %d is not the row expected", id, old.Version)
		}
		if len(w.Events) > 0 {
			evb, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			for i, ev := range w.Events {
				k := seqKey(ev.Seq)
				if evb.Get(k) != nil {
					return runs.Errorf(runs.EConflict, "event %d of run %s exists", ev.Seq, id)
				}
				if err := evb.Put(k, enc.events[i]); err != nil {
					return err
				}
			}
		}
		tokens := tx.Bucket(bucketTokens)
		for i, t := range w.NewTokens {
			if tokens.Get([]byte(t.Hash)) != nil {
				return runs.Errorf(runs.EConflict, "token exists")
			}
			if err := tokens.Put([]byte(t.Hash), enc.tokens[i]); err != nil {
				return err
			}
			issued, err := tx.Bucket(bucketRunTokens).CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			if err := issued.Put([]byte(t.Hash), []byte{}); err != nil {
				return err
			}
		}
		if u := w.UseToken; u != nil {
			t, err := getToken(tx, u.Hash)
			if err != nil {
				return err
			}
			if t == nil || t.RunID != u.RunID || t.SuspensionID != u.SuspensionID || !t.UsedAt.IsZero() || !u.At.Before(t.ExpiresAt) {
				return runs.Errorf(runs.EConflict, "approval token is not usable")
			}
			t.UsedAt = u.At
			if err := put(tokens, []byte(u.Hash), t); err != nil {
				return err
			}
		}
		if w.IdempotencyKey != nil {
			if err := putKey(tx, w, enc.key); err != nil {
				return err
			}
		}
		if err := dropInbox(tx, w.DropInbox); err != nil {
			return err
		}
		for i, e := range w.NewInbox {
			if err := tx.Bucket(bucketInbox).Put(inboxKey(e.Key()), enc.inbox[i]); err != nil {
				return err
			}
		}
		due := tx.Bucket(bucketDue)
		if old != nil && !old.DueAt.IsZero() {
			if err := due.Delete(dueKey(old.DueAt, id)); err != nil {
				return err
			}
		}
		if !w.Run.DueAt.IsZero() {
			if err := due.Put(dueKey(w.Run.DueAt, id), []byte(id)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketRuns).Put([]byte(id), enc.row)
	})
}

// PutEvent implements runs.RowStore in one bbolt transaction (shared as
// Write's are); the row is read, never written.
func (db *DB) PutEvent(_ context.Context, ev runs.Event) error {
	buf, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %d of run %s: %w", ev.Seq, ev.RunID, err)
	}
	return db.group.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRuns).Get([]byte(ev.RunID)) == nil {
			return runs.Errorf(runs.ENotFound, "run %s not found", ev.RunID)
		}
		evb, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(ev.RunID))
		if err != nil {
			return err
		}
		k := seqKey(ev.Seq)
		if evb.Get(k) != nil {
			return runs.Errorf(runs.EConflict, "event %d of run %s exists", ev.Seq, ev.RunID)
		}
		return evb.Put(k, buf)
	})
}

// Events implements runs.RowStore.
func (db *DB) Events(_ context.Context, runID string, after int64, limit int) ([]runs.Event, error) {
	var evs []runs.Event
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents).Bucket([]byte(runID))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && len(evs) < limit; k, v = c.Next() {
			var ev runs.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decode event of run %s: %w", runID, err)
			}
			evs = append(evs, ev)
		}
		return nil
	})
	return evs, err
}

// Token implements runs.RowStore.
func (db *DB) Token(_ context.Context, hash string) (*runs.ApprovalToken, error) {
	var t *runs.ApprovalToken
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		t, err = getToken(tx, hash)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, runs.Errorf(runs.ENotFound, "approval link not found")
	}
	return t, nil
}

// Due implements runs.RowStore; the cursor is the hex of the last due key
// returned.
func (db *DB) Due(_ context.Context, now time.Time, limit int, cursor string) ([]*runs.Run, string, error) {
	var start []byte
	if cursor != "" {
		k, err := hex.DecodeString(cursor)
		if err != nil || len(k) < 8 {
			return nil, "", runs.Errorf(runs.EInvalid, "due cursor is malformed")
		}
		start = append(k, 0) // the smallest key after the cursor
	}
	type dueRun struct {
		*runs.Run
		dueKey []byte
	}
	var out []*dueRun
	var next string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDue).Cursor()
		k, v := c.First()
		if start != nil {
			k, v = c.Seek(start)
		}
		end := binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli()))
		for ; k != nil && bytes.Compare(k[:8], end) <= 0; k, v = c.Next() {
			if len(out) == limit {
				next = hex.EncodeToString(out[len(out)-1].dueKey)
				return nil
			}
			r, err := db.getRun(tx, string(v))
			if err != nil {
				return err
			}
			if r != nil {
				out = append(out, &dueRun{r, append([]byte(nil), k...)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	rs := make([]*runs.Run, len(out))
	for i, d := range out {
		rs[i] = d.Run
	}
	return rs, next, nil
}

// DeleteRun implements runs.RowStore.
func (db *DB) DeleteRun(_ context.Context, runID string, tokenHashes []string) error {
	return db.group.update(func(tx *bolt.Tx) error {
		r, err := db.getRun(tx, runID)
		if err != nil {
			return err
		}
		if r != nil && !r.DueAt.IsZero() {
			if err := tx.Bucket(bucketDue).Delete(dueKey(r.DueAt, runID)); err != nil {
				return err
			}
		}
		if r != nil {
			// A terminal run's entries went with its last transition; this
			// only matters for a row that somehow kept them.
			var keys []runs.InboxKey
			for _, k := range r.InboxKeys {
				keys = append(keys, runs.InboxKey{Approver: k, RunID: runID, SuspendedAt: r.SuspendedAt})
			}
			if err := dropInbox(tx, keys); err != nil {
				return err
			}
		}
		if err := deleteKey(tx, runID); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRuns).Delete([]byte(runID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketEvents).DeleteBucket([]byte(runID)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		for _, h := range tokenHashes {
			if err := tx.Bucket(bucketTokens).Delete([]byte(h)); err != nil {
				return err
			}
		}
		issued := tx.Bucket(bucketRunTokens).Bucket([]byte(runID))
		if issued == nil {
			return nil
		}
		err = issued.ForEach(func(h, _ []byte) error { return tx.Bucket(bucketTokens).Delete(h) })
		if err != nil {
			return err
		}
		return tx.Bucket(bucketRunTokens).DeleteBucket([]byte(runID))
	})
}

// Inbox implements runs.RowStore: a cursor over the approver's key prefix,
// so it reads only that approver's entries. The cursor is the hex of the
// last key returned.
func (db *DB) Inbox(_ context.Context, approver string, limit int, cursor string) ([]runs.InboxEntry, string, error) {
	prefix := inboxPrefix(approver)
	var after []byte
	if cursor != "" {
		k, err := hex.DecodeString(cursor)
		if err != nil || !bytes.HasPrefix(k, prefix) || len(k) < len(prefix)+8 {
			return nil, "", runs.Errorf(runs.EInvalid, "inbox cursor is malformed")
		}
		after = k
	}
	out := []runs.InboxEntry{}
	var next string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketInbox).Cursor()
		k, v := c.Seek(prefix)
		if after != nil {
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		var last []byte
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(out) == limit {
				next = hex.EncodeToString(last)
				return nil
			}
			var e runs.InboxEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode inbox entry: %w", err)
			}
			out = append(out, e)
			last = append(last[:0], k...)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// PutState implements runs.StateStore.
func (db *DB) PutState(_ context.Context, runID string, state []byte) (runs.StateRef, error) {
	ref, blob, err := runs.EncodeBlob(runID, state)
	if err != nil {
		return runs.StateRef{}, err
	}
	err = db.group.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).Put([]byte(ref.Key), blob)
	})
	if err != nil {
		return runs.StateRef{}, fmt.Errorf("put state %s: %w", ref.Key, err)
	}
	return ref, nil
}

// LoadState implements runs.StateStore.
func (db *DB) LoadState(_ context.Context, ref runs.StateRef) ([]byte, error) {
	var blob []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		blob = bytes.Clone(tx.Bucket(bucketBlobs).Get([]byte(ref.Key)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load state %s: %w", ref.Key, err)
	}
	if blob == nil {
		return nil, runs.Errorf(runs.EGone, "state blob %s is missing", ref.Key)
	}
	return runs.DecodeBlob(ref, blob)
}

// DeleteStates implements runs.StateStore.
func (db *DB) DeleteStates(_ context.Context, refs ...runs.StateRef) error {
	if !slices.ContainsFunc(refs, func(r runs.StateRef) bool { return !r.IsZero() }) {
		return nil
	}
	return db.group.update(func(tx *bolt.Tx) error {
		for _, r := range refs {
			if r.IsZero() {
				continue
			}
			if err := tx.Bucket(bucketBlobs).Delete([]byte(r.Key)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRunStates implements runs.StateStore.
func (db *DB) DeleteRunStates(_ context.Context, runID string) error {
	return db.deletePrefix(runs.RunPrefix(runID))
}

func (db *DB) deletePrefix(prefix string) error {
	return db.group.update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		p := []byte(prefix)
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Seek(p) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// EachRun calls fn with every run in the database, in run id order, and
// whether the due index holds it. It is for tools that audit a store
// offline (the soak's census); fn must not write to the database.
func (db *DB) EachRun(fn func(r *runs.Run, indexed bool) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		indexed := map[string]bool{}
		if err := tx.Bucket(bucketDue).ForEach(func(_, v []byte) error {
			indexed[string(v)] = true
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			var r runs.Run
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode run %s: %w", k, err)
			}
			return fn(&r, indexed[string(k)])
		})
	})
}

package embedded

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketDocMarkers holds the document store's idempotency markers (see
// docstore.MarkerStore): marker (hex SHA-256 of an idempotency key) ->
// record. Markers are never deleted, as the marker files they replace were
// not: a marker answers a retry of its call for as long as the database is
// kept.
var bucketDocMarkers = []byte("docmarkers")

// Applied returns the record stored under a document store's idempotency
// marker, and false when there is none. It implements docstore.MarkerStore
// (the application wires the two; this package does not import docstore).
func (db *DB) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var rec []byte
	var ok bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		// A cursor rather than Get, so that an empty record is told from
		// a missing one; the bytes are copied out of the transaction.
		key := []byte(marker)
		k, v := tx.Bucket(bucketDocMarkers).Cursor().Seek(key)
		if ok = bytes.Equal(k, key); ok {
			rec = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read document marker %s: %w", marker, err)
	}
	return rec, ok, nil
}

// MarkApplied stores record under a document store's idempotency marker,
// replacing any record already there. The write joins the group commit
// (group.go): it returns once the transaction holding it is committed and
// fsync'd, so the marker is durable when the tool reports its effect. The
// caller (docstore's DirBackend) has made the effect durable before.
func (db *DB) MarkApplied(ctx context.Context, marker string, record []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, val := []byte(marker), bytes.Clone(record)
	if val == nil {
		val = []byte{}
	}
	err := db.group.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDocMarkers).Put(key, val)
	})
	if err != nil {
		return fmt.Errorf("write document marker %s: %w", marker, err)
	}
	return nil
}

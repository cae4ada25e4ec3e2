package embedded

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// inFile reports whether the file holds the blob at key.
func inFile(t *testing.T, db *DB, key string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, db.bolt.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketBlobs).Get([]byte(key)) != nil
		return nil
	}))
	return ok
}

// TestBlobsRideOnRowWrites: a blob put is readable at once and reaches the
// file with its run's next row write (one transaction, no commit of its
// own); a refused row write keeps it queued, and deleting it then means it
// is never written; a blob deleted is gone for readers at once and from
// the file with the next row write of any run, or at Close.
func TestBlobsRideOnRowWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentgate.db")
	db, err := Open(path)
	require.NoError(t, err)
	e := runstest.NewEnv(t, runstest.Harness{Rows: db, States: db})
	e.Store = runs.NewStore(db, db, runs.Options{Now: e.Clock.Now})
	ctx := t.Context()
	commits := func() int64 { return db.group.commits.Load() }

	r := e.Queued(t)
	before := commits()
	ref, err := db.PutState(ctx, r.ID, []byte(`{"state":1}`))
	require.NoError(t, err)
	assert.Equal(t, before, commits(), "a put commits nothing of its own")
	got, err := db.LoadState(ctx, ref)
	require.NoError(t, err)
	assert.JSONEq(t, `{"state":1}`, string(got), "readable before its row write")
	assert.False(t, inFile(t, db, ref.Key))

	// A refused row write (a stale version) leaves the blob queued.
	stale := r.Clone()
	stale.Version += 5
	next := stale.Clone()
	next.Version++
	require.Error(t, db.Write(ctx, runs.Write{Run: next, ExpectStatus: stale.Status, ExpectVersion: stale.Version}))
	assert.False(t, inFile(t, db, ref.Key))
	_, err = db.LoadState(ctx, ref)
	require.NoError(t, err, "still queued")

	// The run's next row write carries it.
	next = r.Clone()
	next.Version++
	next.WriteID = "with-blob"
	require.NoError(t, db.Write(ctx, runs.Write{Run: next, ExpectStatus: r.Status, ExpectVersion: r.Version}))
	assert.True(t, inFile(t, db, ref.Key), "written with the row")

	// A put deleted before any row write is never written.
	orphan, err := db.PutState(ctx, r.ID, []byte(`{"state":2}`))
	require.NoError(t, err)
	require.NoError(t, db.DeleteStates(ctx, orphan))
	_, err = db.LoadState(ctx, orphan)
	assert.Equal(t, runs.EGone, runs.ErrorCode(err))

	// A delete: gone for readers at once, from the file with the next
	// row write of another run.
	require.NoError(t, db.DeleteStates(ctx, ref))
	_, err = db.LoadState(ctx, ref)
	assert.Equal(t, runs.EGone, runs.ErrorCode(err))
	assert.True(t, inFile(t, db, ref.Key))
	e.Queued(t)
	assert.False(t, inFile(t, db, ref.Key), "deleted with the next row write")
	assert.False(t, inFile(t, db, orphan.Key), "never written")

	// And at Close.
	last, err := db.PutState(ctx, r.ID, []byte(`{"state":3}`))
	require.NoError(t, err)
	cur, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	next = cur.Clone()
	next.Version++
	require.NoError(t, db.Write(ctx, runs.Write{Run: next, ExpectStatus: cur.Status, ExpectVersion: cur.Version}))
	require.NoError(t, db.DeleteStates(ctx, last))
	require.NoError(t, db.Close())
	db, err = Open(path)
	require.NoError(t, err)
	defer db.Close()
	assert.False(t, inFile(t, db, last.Key), "a queued delete is written at Close")
}

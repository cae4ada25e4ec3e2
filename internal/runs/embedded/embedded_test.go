package embedded

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

func newHarness(t *testing.T) runstest.Harness {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "agentgate.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return runstest.Harness{
		Rows:   db,
		States: db,
		PutBlob: func(t *testing.T, key string, body []byte) {
			require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketBlobs).Put([]byte(key), body) }))
		},
		DeleteBlob: func(t *testing.T, key string) {
			require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketBlobs).Delete([]byte(key)) }))
		},
		BlobKeys: func(t *testing.T, prefix string) []string {
			var keys []string
			require.NoError(t, db.bolt.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(bucketBlobs).Cursor()
				for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
					keys = append(keys, string(k))
				}
				return nil
			}))
			return keys
		},
		DropRow: func(t *testing.T, runID string) {
			require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketRuns).Delete([]byte(runID)) }))
		},
		RowSize: func(t *testing.T, runID string) int {
			n := -1
			require.NoError(t, db.bolt.View(func(tx *bolt.Tx) error {
				if v := tx.Bucket(bucketRuns).Get([]byte(runID)); v != nil {
					n = len(v)
				}
				return nil
			}))
			require.GreaterOrEqual(t, n, 0, "run %s has a row", runID)
			return n
		},
	}
}

func TestConformance(t *testing.T) {
	runstest.Run(t, newHarness)
}

//agentgate:megabytes
func TestConformanceMegabytes(t *testing.T) {
	runstest.RunMegabytes(t, newHarness)
}

func TestOpenLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentgate.db")
	db, err := Open(path)
	require.NoError(t, err)
	defer db.Close()
	_, err = Open(path)
	require.Error(t, err, "a second open of a held file fails instead of hanging")
	require.True(t, strings.Contains(err.Error(), path))
}

// TestReopenKeepsRunsAcrossFreelistModes opens a file whose free page list
// was written to it (bbolt's default, which earlier versions of this store
// used) and one whose list was not (Open's NoFreelistSync): both reopen with
// their runs, events and free pages intact, and take writes afterwards.
func TestReopenKeepsRunsAcrossFreelistModes(t *testing.T) {
	for _, tt := range []struct {
		name string
		open func(t *testing.T, path string) *DB
	}{
		{"synced free list (earlier files)", func(t *testing.T, path string) *DB {
			t.Helper()
			b, err := bolt.Open(path, 0o600, nil)
			require.NoError(t, err)
			require.NoError(t, b.Close())
			db, err := Open(path) // creates the buckets
			require.NoError(t, err)
			require.NoError(t, db.Close())
			b, err = bolt.Open(path, 0o600, nil)
			require.NoError(t, err)
			return &DB{bolt: b, group: &groupCommit{db: b}}
		}},
		{"free list not synced", func(t *testing.T, path string) *DB {
			t.Helper()
			db, err := Open(path)
			require.NoError(t, err)
			return db
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agentgate.db")
			db := tt.open(t, path)
			e := runstest.NewEnv(t, runstest.Harness{Rows: db, States: db})
			var ids []string
			for range 20 {
				r := e.Running(t) // several writes each, freeing pages
				ids = append(ids, r.ID)
			}
			require.NoError(t, db.Close())

			db, err := Open(path)
			require.NoError(t, err)
			defer db.Close()
			for _, id := range ids {
				r, err := db.GetRun(t.Context(), id)
				require.NoError(t, err)
				require.Equal(t, runs.StatusRunning, r.Status, "run %s after reopen", id)
				evs, err := db.Events(t.Context(), id, 0, 100)
				require.NoError(t, err)
				require.NotEmpty(t, evs, "events of run %s after reopen", id)
			}
			e = runstest.NewEnv(t, runstest.Harness{Rows: db, States: db})
			e.Running(t)
			st := db.bolt.Stats()
			require.Positive(t, st.FreePageN+st.PendingPageN, "the free pages were found again")
		})
	}
}

// TestOpenSaysTheStoreIsInUse: a file another opener holds is refused after
// the open timeout with ErrInUse, which says so, not bbolt's bare "timeout".
func TestOpenSaysTheStoreIsInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentgate.db")
	db, err := Open(path)
	require.NoError(t, err)
	defer db.Close()
	_, err = Open(path)
	require.ErrorIs(t, err, ErrInUse)
	assert.Contains(t, err.Error(), "the store is in use by another process")
}

package embedded

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

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

func TestOpenLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentgate.db")
	db, err := Open(path)
	require.NoError(t, err)
	defer db.Close()
	_, err = Open(path)
	require.Error(t, err, "a second open of a held file fails instead of hanging")
	require.True(t, strings.Contains(err.Error(), path))
}

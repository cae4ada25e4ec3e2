package embedded

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestEachRunSaysWhichRunsTheDueIndexHolds(t *testing.T) {
	ctx := context.Background()
	store, db, err := OpenStore(filepath.Join(t.TempDir(), "agentgate.db"), runs.Options{})
	require.NoError(t, err)
	defer db.Close()
	var ids []string
	for range 3 {
		r, err := store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: json.RawMessage(`{"prompt":"hi"}`)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	// Drop one run's due entry, as a defect that loses it from the index would.
	require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDue).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if string(v) == ids[1] {
				return c.Delete()
			}
		}
		return nil
	}))
	seen := map[string]bool{}
	require.NoError(t, db.EachRun(func(r *runs.Run, indexed bool) error {
		require.Equal(t, runs.StatusQueued, r.Status)
		seen[r.ID] = indexed
		return nil
	}))
	require.Equal(t, map[string]bool{ids[0]: true, ids[1]: false, ids[2]: true}, seen)
}

package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestCompactRemovesWhatAPurgeLeftInTheFile: a purge deletes a run from
// the store, but bbolt leaves its bytes in the freed pages, so the file
// still holds its prompt; Compact writes a file without them, in which
// every run not purged is as it was.
func TestCompactRemovesWhatAPurgeLeftInTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentgate.db")
	const purgedMarker, keptMarker = "PURGEDSECRET-5f1c0e", "KEPTPROMPT-9a77b2"
	store, db, err := OpenStore(path, runs.Options{})
	require.NoError(t, err)
	newRun := func(marker string) *runs.Run {
		t.Helper()
		r, err := store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Purpose: "password is " + marker,
			Request: json.RawMessage(`{"prompt":"password is ` + marker + `"}`)})
		require.NoError(t, err)
		return r
	}
	purged, kept := newRun(purgedMarker), newRun(keptMarker)
	_, err = store.Cancel(ctx, purged, "alice")
	require.NoError(t, err)
	require.NoError(t, store.Purge(ctx, purged.ID))
	_, err = store.Get(ctx, purged.ID)
	require.Equal(t, runs.ENotFound, runs.ErrorCode(err), "purged")
	require.NoError(t, db.Close())

	file, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(file, []byte(purgedMarker)), "the purge left the prompt in freed pages (if bbolt ever clears them, README's retention text can say so)")

	res, err := compact(path, 0)
	require.NoError(t, err)
	file, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(file, []byte(purgedMarker)), "compacted: the purged run's bytes are gone")
	assert.True(t, bytes.Contains(file, []byte(keptMarker)))
	assert.Equal(t, int64(len(file)), res.After)
	assert.NoFileExists(t, path+".compact")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	store, db, err = OpenStore(path, runs.Options{})
	require.NoError(t, err)
	defer db.Close()
	got, err := store.Get(ctx, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, kept.Purpose, got.Purpose)
	_, err = store.Get(ctx, purged.ID)
	assert.Equal(t, runs.ENotFound, runs.ErrorCode(err))
	// The compacted file takes writes as any other.
	newRun("AFTER")

	// While another process (here: this one) holds the store, no compaction.
	_, err = Compact(path)
	require.ErrorIs(t, err, ErrInUse)
}

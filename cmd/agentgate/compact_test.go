package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// TestCompactCommand: `agentgate compact` refuses a store a running serve
// holds, naming what to do, and otherwise rewrites agentgate.db without
// what a purged run left in its freed pages.
func TestCompactCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, stop := startSeedServer(t, dir, "")
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run(ctx, []string{"compact", "--dir", dir}, &out, &errOut))
	assert.Contains(t, errOut.String(), "the store is in use by another process")
	assert.Contains(t, errOut.String(), "stop the agentgate (serve or demo) running on --dir "+dir+" first")
	stop()

	// A run purged from the store, its prompt still in the file.
	const marker = "PURGEDPROMPT-c0ffee"
	path := filepath.Join(dir, "agentgate.db")
	store, db, err := embedded.OpenStore(path, runs.Options{})
	require.NoError(t, err)
	r, err := store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Purpose: marker, Request: json.RawMessage(`{"prompt":"` + marker + `"}`)})
	require.NoError(t, err)
	_, err = store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	require.NoError(t, store.Purge(ctx, r.ID))
	require.NoError(t, db.Close())
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Contains(file, []byte(marker)), "the purge left it in the file")

	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, run(ctx, []string{"compact", "--dir", dir}, &out, &errOut), errOut.String())
	assert.True(t, strings.HasPrefix(out.String(), "compacted "+path+": "), out.String())
	file, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(file, []byte(marker)), "compacted away")

	// serve starts on the compacted store.
	_, stop = startSeedServer(t, dir, "")
	stop()
}

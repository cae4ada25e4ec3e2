package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSaysTheDirIsInUse: a second server on the same --dir stops at
// start with an error that says another process holds the store, not
// bbolt's bare "timeout".
func TestServeSaysTheDirIsInUse(t *testing.T) {
	dir := t.TempDir()
	startSeedServer(t, dir, "")
	_, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, tokens: linkTokens,
		mailOut: io.Discard, logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the store is in use by another process")
	assert.Contains(t, err.Error(), "is another agentgate (serve or demo) running on --dir "+dir+"?")
}

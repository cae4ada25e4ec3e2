package main

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeStoreTakesEmbeddedOrAWS: --store takes embedded or aws, as
// written; any other value (another case, another store, empty) is a usage
// error naming both, before anything starts, not a silent embedded store.
func TestServeStoreTakesEmbeddedOrAWS(t *testing.T) {
	// A cancelled context: a serve that started anyway stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, bad := range []string{"AWS", "Embedded", "dynamodb", "", " aws"} {
		err := runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--store", bad}, io.Discard)
		var usage *usageError
		require.True(t, errors.As(err, &usage), "--store %q: %v, want a usage error", bad, err)
		assert.Contains(t, err.Error(), "--store")
		assert.Contains(t, err.Error(), "want embedded or aws")
	}
	assert.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--store", "embedded"}, io.Discard))
}

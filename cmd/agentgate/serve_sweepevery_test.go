package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/service"
)

// TestServeSweepEveryRange: --sweep-every takes 1s to 24h. Zero or a
// negative period (one sweep at start-up, then none: no expiry, reminders,
// webhook retries, take-over or retention for the life of the process)
// and periods below a second (the sweep in a hot loop) or above a day are
// usage errors that name the flag and the range, before anything starts.
func TestServeSweepEveryRange(t *testing.T) {
	lo, err := time.ParseDuration(strings.Split(sweepEveryRange, " to ")[0])
	require.NoError(t, err)
	hi, err := time.ParseDuration(strings.Split(sweepEveryRange, " to ")[1])
	require.NoError(t, err)
	assert.Equal(t, minSweepEvery, lo, "the range as said")
	assert.Equal(t, maxSweepEvery, hi, "the range as said")

	// A cancelled context: a serve that started anyway stops at once
	// (and returns nil) instead of holding the test.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, bad := range []string{"0", "0s", "-5s", "1ns", "999ms", "24h0m1s"} {
		err := runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--sweep-every", bad}, io.Discard)
		var usage *usageError
		require.True(t, errors.As(err, &usage), "%s: %v, want a usage error", bad, err)
		assert.Contains(t, err.Error(), "--sweep-every")
		assert.Contains(t, err.Error(), "want a duration from 1s to 24h")
	}

	for _, good := range []string{"1s", "30s", "24h"} {
		assert.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--sweep-every", good}, io.Discard), good)
	}
}

// TestREADMESaysHowServeSweepsAndMakesFirstAttempts: the README gives
// serve's sweep period and its range, and the bounds of its delivery
// goroutines, as the code has them.
func TestREADMESaysHowServeSweepsAndMakesFirstAttempts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	readme := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{
		fmt.Sprintf("(`--sweep-every`, %d s by default, from %d s to %d h", int(defaultSweepEvery.Seconds()), int(minSweepEvery.Seconds()), int(maxSweepEvery.Hours())),
		fmt.Sprintf("each run's on a goroutine of its own, for up to %d runs at the same time", service.DefaultDeliveryConcurrency),
		fmt.Sprintf("unless %d runs' receivers are slow at once", service.DefaultDeliveryConcurrency),
		fmt.Sprintf("If more than %d,%03d runs wait for their attempts", deliveryQueueSize/1000, deliveryQueueSize%1000),
	} {
		assert.Contains(t, readme, want)
	}
}

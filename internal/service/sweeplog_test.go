package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweepDoneIsDebugWhenIdle: a sweep that found nothing to do logs its
// "sweep done" line at debug level (it was info, every period, on a quiet
// server); one that did something logs it at info.
func TestSweepDoneIsDebugWhenIdle(t *testing.T) {
	e := newEnv(t)
	var logs bytes.Buffer
	e.sweeper.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sweepDone := func() map[string]any {
		t.Helper()
		logs.Reset()
		_, err := e.sweeper.Sweep(context.Background())
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			if m["msg"] == "sweep done" {
				return m
			}
		}
		t.Fatalf("no sweep done line in %s", logs.String())
		return nil
	}

	idle := sweepDone()
	assert.Equal(t, "DEBUG", idle["level"], "an idle sweep: %v", idle)

	e.start(t) // QUEUED, its dispatch lost: the sweep re-dispatches it after the grace
	e.clock.Advance(10 * time.Minute)
	busy := sweepDone()
	assert.Equal(t, "INFO", busy["level"], "a sweep that re-dispatched a run: %v", busy)
	assert.EqualValues(t, 1, busy["redispatched"])
}

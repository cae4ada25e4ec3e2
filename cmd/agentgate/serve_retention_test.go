package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestServeRetention: serve's embedded store keeps settled runs for
// --retention, else AGENTGATE_RETENTION, else 30 days; a retention out of
// range is refused before anything starts.
func TestServeRetention(t *testing.T) {
	start := func(t *testing.T, retention time.Duration) *localServer {
		t.Helper()
		s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: t.TempDir(), tokens: map[string]string{"tok": "alice"},
			mailOut: io.Discard, logger: slog.New(slog.DiscardHandler), retention: retention})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Setenv(config.EnvRetention, "")
	assert.Equal(t, runs.DefaultRetention, start(t, 0).App.Store.Retention())
	assert.Equal(t, time.Hour, start(t, time.Hour).App.Store.Retention())
	t.Setenv(config.EnvRetention, "2h")
	assert.Equal(t, 2*time.Hour, start(t, 0).App.Store.Retention())
	assert.Equal(t, time.Hour, start(t, time.Hour).App.Store.Retention(), "the flag over the environment")

	for _, bad := range []string{"-1h", "0", "0s", "500ms"} {
		err := runServe(context.Background(), []string{"--retention", bad}, io.Discard)
		require.Error(t, err, bad)
		assert.True(t, strings.Contains(err.Error(), "--retention"), err.Error())
	}
}

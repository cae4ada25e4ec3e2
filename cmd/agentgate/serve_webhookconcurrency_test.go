package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/service"
)

// TestServeWebhookConcurrency: serve's delivery goroutines make webhook attempts for
// --webhook-concurrency runs at the same time, else
// AGENTGATE_WEBHOOK_CONCURRENCY's, else 8; a value out of range, or the
// flag without webhooks, is refused before anything starts.
func TestServeWebhookConcurrency(t *testing.T) {
	sweeperBound := func(t *testing.T, flag int, env string) int {
		t.Helper()
		getenv := func(k string) string {
			if k == config.EnvWebhookConcurrency {
				return env
			}
			return ""
		}
		hooks, err := serveWebhooks(filepath.Join(t.TempDir(), "whsec"), "", true, "", flag, getenv, io.Discard)
		require.NoError(t, err)
		s, err := startLocal(context.Background(), serveOptions{addr: "127.0.0.1:0", dir: t.TempDir(), tokens: map[string]string{"tok": "alice"},
			mailOut: io.Discard, logger: slog.New(slog.DiscardHandler), webhooks: hooks})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s.App.Sweeper.DeliveryConcurrency
	}
	assert.Equal(t, service.DefaultDeliveryConcurrency, sweeperBound(t, 0, ""))
	assert.Equal(t, 3, sweeperBound(t, 0, "3"))
	assert.Equal(t, 20, sweeperBound(t, 20, ""))
	assert.Equal(t, 20, sweeperBound(t, 20, "3"), "the flag over the environment")

	// A cancelled context: a serve that started anyway stops at once
	// (and returns nil) instead of holding the test.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	secret := filepath.Join(t.TempDir(), "whsec")
	for _, bad := range []string{"0", "-1", "65", "many"} {
		err := runServe(ctx, []string{"--webhook-secret-file", secret, "--webhook-concurrency", bad}, io.Discard)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "webhook-concurrency")
		assert.Contains(t, err.Error(), "want an integer from 1 to 64")
	}
	err := runServe(ctx, []string{"--webhook-concurrency", "4"}, io.Discard)
	require.EqualError(t, err, "--webhook-concurrency needs --webhook-secret-file or --webhook-secret")

	t.Setenv(config.EnvWebhookConcurrency, "0")
	err = runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir()}, io.Discard)
	require.EqualError(t, err, `AGENTGATE_WEBHOOK_CONCURRENCY="0": want an integer from 1 to 64`)
}

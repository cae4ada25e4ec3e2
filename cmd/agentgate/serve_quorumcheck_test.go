package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/service"
)

// TestServeQuorumCheckEveryRange: --quorum-check-every and, when it is not
// given, AGENTGATE_QUORUM_CHECK_EVERY take a Go duration from 1s to 24h;
// anything else is a usage error naming the flag or the variable and the
// range, before anything starts.
func TestServeQuorumCheckEveryRange(t *testing.T) {
	lo, err := time.ParseDuration(strings.Split(quorumCheckEveryRange, " to ")[0])
	require.NoError(t, err)
	hi, err := time.ParseDuration(strings.Split(quorumCheckEveryRange, " to ")[1])
	require.NoError(t, err)
	assert.Equal(t, service.MinQuorumCheckEvery, lo, "the range as said")
	assert.Equal(t, service.MaxQuorumCheckEvery, hi, "the range as said")

	// A cancelled context: a serve that started anyway stops at once (and
	// returns nil) instead of holding the test.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	t.Setenv(config.EnvQuorumCheckEvery, "")
	for _, bad := range []string{"0", "0s", "-1s", "999ms", "24h0m1s", "hourly"} {
		err := runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--quorum-check-every", bad}, io.Discard)
		var usage *usageError
		require.True(t, errors.As(err, &usage), "%s: %v, want a usage error", bad, err)
		assert.Contains(t, err.Error(), "quorum-check-every")
		assert.Contains(t, err.Error(), "want a duration from 1s to 24h")
	}
	for _, good := range []string{"1s", "90s", "24h"} {
		assert.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--quorum-check-every", good}, io.Discard), good)
	}

	err = runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--quorum-check-every", "1s", "--remote", "startrun=http://127.0.0.1:1", "--remote", "resume=http://127.0.0.1:1"}, io.Discard)
	assert.ErrorContains(t, err, "--quorum-check-every does not apply with --remote", "the functions read their own")

	t.Setenv(config.EnvQuorumCheckEvery, "0s")
	err = runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir()}, io.Discard)
	var usage *usageError
	require.True(t, errors.As(err, &usage), "%v, want a usage error", err)
	assert.Contains(t, err.Error(), `AGENTGATE_QUORUM_CHECK_EVERY="0s": want a Go duration from 1s to 24h`)
	assert.NoError(t, runServe(ctx, []string{"--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--quorum-check-every", "1m"}, io.Discard),
		"the flag over the environment: a bad variable is not read")
}

// TestServeDrivesAQuorumCheckWithAShortInterval is what a team testing
// against the local server does to see a run whose quorum became
// impossible end, without waiting hours or editing the store: serve with
// --quorum-check-every 1s (and a sweep every second) holds a run for two
// of finance (bob and carol); restarted with a directory under which bob
// may no longer approve writes (AGENTGATE_QUORUM_CHECK_EVERY=1s this time), its checks find the approval
// lost and, at least a second later, still lost: the run ends EXPIRED with
// approval_unmeetable. No clock is faked and nothing is timed: the test
// polls the API until the run ends, within linkWait.
func TestServeDrivesAQuorumCheckWithAShortInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for two quorum checks a second apart")
	}
	dir := t.TempDir()
	files := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(files, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return path
	}
	directory := func(bobTools string) string {
		return `{"version": 1, "persons": [
  {"id": "alice", "aliases": ["alice"]},
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"], "tools": ` + bobTools + `},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}],
 "groups": [{"name": "finance", "members": ["bob", "carol"]}]}`
	}
	whole := write("whole.json", directory(`["*"]`))
	// bob may no longer approve writes (a policy needs its rule's
	// approvers to be two persons to load, so the directory keeps him).
	shrunk := write("shrunk.json", directory(`["read_document"]`))
	policy := write("policy.json", `{"version": 1, "rules": [
  {"id": "pricing", "tools": ["write_document"], "outcome": "require_approval", "approvers": ["group:finance"], "required_approvals": 2}]}`)
	model := "scripted:" + writeScript(t, files, `{"turns":[{"content":[{"type":"tool_use","id":"w1","name":"write_document","input":{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}}]},
	 {"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn"}]}`)

	serve := func(extra ...string) (url string, stop func()) {
		t.Helper()
		return startServe(t, append([]string{"--addr", "127.0.0.1:0", "--dir", dir, "--model", model, "--policy", policy,
			"--token", "alice=" + linkAliceToken, "--sweep-every", "1s"}, extra...))
	}

	t.Setenv(config.EnvQuorumCheckEvery, "")
	url, stop := serve("--directory", whole, "--quorum-check-every", "1s")
	alice := &apiClient{t: t, base: url, token: linkAliceToken}
	var run runJSON
	alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "Raise the Team plan to 12 EUR", "approvers": []string{"group:finance"}}, http.StatusAccepted, &run)
	run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
	stop()

	// bob may not approve writes now: carol alone cannot give two approvals.
	t.Setenv(config.EnvQuorumCheckEvery, "1s")
	url, _ = serve("--directory", shrunk)
	alice = &apiClient{t: t, base: url, token: linkAliceToken}
	ended := alice.waitStatus(run.ID, "EXPIRED")
	assert.Equal(t, "approval_unmeetable", ended.Reason)
	expired := alice.waitEvent(run.ID, "expired")
	assert.Contains(t, string(expired.Data), "approval can no longer be given")
}

// TestAWSServeConfigFlagsOverTheEnvironment: with --store aws, as on the
// embedded store, a flag stands for its variable, which is then not read:
// a malformed AGENTGATE_QUORUM_CHECK_EVERY (or RETENTION, PUBLIC_BASE_URL,
// WEBHOOK_CONCURRENCY) does not stop a start-up whose flag is given, and
// still does without the flag (tester helper-109 P3-4).
func TestAWSServeConfigFlagsOverTheEnvironment(t *testing.T) {
	env := map[string]string{
		config.EnvTable:              "t",
		config.EnvBucket:             "b",
		config.EnvQuorumCheckEvery:   "abc",
		config.EnvRetention:          "abc",
		config.EnvPublicBaseURL:      "ftp://x",
		config.EnvWebhookConcurrency: "abc",
	}
	getenv := func(name string) string { return env[name] }
	flags := serveOptions{publicURL: "http://x", retention: time.Hour, quorumCheckEvery: 2 * time.Second, webhooks: &app.Webhooks{DeliveryConcurrency: 3}}
	cfg, err := awsServeConfig(flags, "http://x", getenv)
	require.NoError(t, err, "every variable overridden by its flag")
	assert.Equal(t, 2*time.Second, cfg.QuorumCheckEvery)
	assert.Equal(t, time.Hour, cfg.Retention)
	assert.Equal(t, "http://x", cfg.PublicBaseURL)
	assert.Equal(t, 3, cfg.DeliveryConcurrency)

	for _, name := range []string{config.EnvQuorumCheckEvery, config.EnvRetention, config.EnvPublicBaseURL, config.EnvWebhookConcurrency} {
		without := flags
		switch name {
		case config.EnvQuorumCheckEvery:
			without.quorumCheckEvery = 0
		case config.EnvRetention:
			without.retention = 0
		case config.EnvPublicBaseURL:
			without.publicURL = ""
		case config.EnvWebhookConcurrency:
			without.webhooks = nil
		}
		_, err := awsServeConfig(without, "http://x", getenv)
		assert.ErrorContains(t, err, name, "without its flag, a malformed %s is refused", name)
	}
}

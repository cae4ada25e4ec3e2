package awswire_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/awsenv"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/service"
)

// fakeDynamoDB answers every DynamoDB call with an empty result and records
// the operations and the credential that signed them.
type fakeDynamoDB struct {
	mu    sync.Mutex
	ops   []string
	creds []string
}

func (f *fakeDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.ops = append(f.ops, r.Header.Get("X-Amz-Target"))
	auth := r.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		auth, _, _ = strings.Cut(auth[i+len("Credential="):], "/")
	}
	f.creds = append(f.creds, auth)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write([]byte(`{"Items":[],"Count":0}`))
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func purgeEnv(endpoint string) map[string]string {
	return map[string]string{
		"AGENTGATE_TABLE": "runs", "AGENTGATE_BUCKET": "state", "AGENTGATE_STARTRUN_FUNCTION": "startrun",
		"AGENTGATE_RESUME_FUNCTION": "resume", "AGENTGATE_MAIL_FROM": "approvals@example.com",
		"AGENTGATE_PUBLIC_BASE_URL": "https://approvals.example.com", "AGENTGATE_DUE_SHARDS": "3",
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDPURGE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_ENDPOINT_URL": endpoint,
	}
}

func TestPurgeSweepsWithTheEnvironmentsConfiguration(t *testing.T) {
	ddb := &fakeDynamoDB{}
	srv := httptest.NewServer(ddb)
	t.Cleanup(srv.Close)
	entry, err := awswire.Purge(context.Background(), env(purgeEnv(srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	event, err := os.ReadFile(filepath.Join("..", "lambdaentry", "testdata", "scheduled-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := entry.Handle(context.Background(), event); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	ddb.mu.Lock()
	defer ddb.mu.Unlock()
	if len(ddb.ops) < 3 {
		t.Errorf("DynamoDB operations %v, want at least one due-index query per shard (3)", ddb.ops)
	}
	for i, op := range ddb.ops {
		if op != "DynamoDB_20120810.Query" || ddb.creds[i] != "AKIDPURGE" {
			t.Errorf("call %d: %s signed by %s, want queries signed by AKIDPURGE", i, op, ddb.creds[i])
		}
	}
}

func TestPurgeStartUpErrorsNameTheProblem(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"no table", func(m map[string]string) { delete(m, "AGENTGATE_TABLE") }, "AGENTGATE_TABLE"},
		{"no credentials", func(m map[string]string) { delete(m, "AWS_SECRET_ACCESS_KEY") }, "AWS_SECRET_ACCESS_KEY"},
		{"mail without link base", func(m map[string]string) { delete(m, "AGENTGATE_PUBLIC_BASE_URL") }, "AGENTGATE_PUBLIC_BASE_URL"},
		{"missing directory", func(m map[string]string) { m["AGENTGATE_DIRECTORY"] = filepath.Join(t.TempDir(), "none.json") }, "none.json"},
		{"allow list without secret", func(m map[string]string) { m["AGENTGATE_WEBHOOK_ALLOW"] = "10.0.0.0/8" }, "AGENTGATE_WEBHOOK_SECRET"},
		{"delivery concurrency 0", func(m map[string]string) { m["AGENTGATE_WEBHOOK_CONCURRENCY"] = "0" }, `AGENTGATE_WEBHOOK_CONCURRENCY="0": want an integer from 1 to 64`},
		{"unknown SES API", func(m map[string]string) { m["AGENTGATE_SES_API"] = "v3" }, `AGENTGATE_SES_API="v3": want v2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := purgeEnv("http://127.0.0.1:1")
			tt.edit(m)
			if _, err := awswire.Purge(context.Background(), env(m)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestPurgeSweeperDeliveryConcurrency: the purge function's sweep delivers
// webhooks for AGENTGATE_WEBHOOK_CONCURRENCY runs at the same time (8 when
// unset).
func TestPurgeSweeperDeliveryConcurrency(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  int
	}{{"", service.DefaultDeliveryConcurrency}, {"3", 3}, {"64", 64}} {
		m := purgeEnv("http://127.0.0.1:1")
		m["AGENTGATE_WEBHOOK_SECRET"] = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hooks"
		if tt.value != "" {
			m["AGENTGATE_WEBHOOK_CONCURRENCY"] = tt.value
		}
		s := purgeSweeper(t, m)
		if s.DeliveryConcurrency != tt.want || s.Webhooks == nil {
			t.Errorf("AGENTGATE_WEBHOOK_CONCURRENCY=%q: sweeper delivers for %d runs at once (webhooks on: %t), want %d", tt.value, s.DeliveryConcurrency, s.Webhooks != nil, tt.want)
		}
	}
}

// TestPurgeSweeperChecksQuorumsWithTheDirectory: the purge function's
// sweep has the deployment's directory (AGENTGATE_DIRECTORY), against which
// it checks waiting runs' quorums again; without one it has none. Either
// way it mails those a check newly asks their links, as it mails
// reminders (Revise).
func TestPurgeSweeperChecksQuorumsWithTheDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "directory.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"persons":[{"id":"ann","aliases":["ann@example.com"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"", path} {
		m := purgeEnv("http://127.0.0.1:1")
		if file != "" {
			m["AGENTGATE_DIRECTORY"] = file
		}
		s := purgeSweeper(t, m)
		if got := s.Directory != nil; got != (file != "") {
			t.Errorf("AGENTGATE_DIRECTORY=%q: the sweep has a directory: %t", file, got)
		}
		if s.Revise == nil || s.Remind == nil {
			t.Errorf("AGENTGATE_DIRECTORY=%q: the sweep mails no links to those a quorum check asks (Revise set: %t) or no reminders (Remind set: %t)", file, s.Revise != nil, s.Remind != nil)
		}
	}
}

// purgeSweeper builds the purge function's sweep from the environment m.
func purgeSweeper(t *testing.T, m map[string]string) *service.Sweeper {
	t.Helper()
	cfg, err := config.Load(env(m), awswire.PurgeRequired...)
	if err != nil {
		t.Fatal(err)
	}
	awsCfg, err := awsenv.Load(env(m))
	if err != nil {
		t.Fatal(err)
	}
	s, err := awswire.NewSweeper(cfg, awsCfg, env(m), "purge/test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPurgeSweeperTakesTheQuorumCheckInterval: the purge function's sweep
// checks quorums at AGENTGATE_QUORUM_CHECK_EVERY (an hour when unset), the
// interval the workers schedule a hold's first check by; a malformed value
// stops start-up naming the variable.
func TestPurgeSweeperTakesTheQuorumCheckInterval(t *testing.T) {
	for value, want := range map[string]time.Duration{"": service.DefaultQuorumCheckEvery, "90s": 90 * time.Second} {
		m := purgeEnv("http://127.0.0.1:1")
		m[config.EnvQuorumCheckEvery] = value
		if got := purgeSweeper(t, m).QuorumCheckEvery; got != want {
			t.Errorf("AGENTGATE_QUORUM_CHECK_EVERY=%q: the sweep checks every %s, want %s", value, got, want)
		}
	}
	m := purgeEnv("http://127.0.0.1:1")
	m[config.EnvQuorumCheckEvery] = "0s"
	if _, err := awswire.Purge(context.Background(), env(m)); err == nil || !strings.Contains(err.Error(), config.EnvQuorumCheckEvery) {
		t.Errorf("AGENTGATE_QUORUM_CHECK_EVERY=0s: start-up error %v, want one naming the variable", err)
	}
}

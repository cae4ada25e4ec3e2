package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentgate/agentgate/internal/service"
)

// TestCLIStartTTLRanges: runs start --ttl and --tool-results-ttl outside
// the server's bounds (service.MinApprovalTTL to MaxApprovalTTL,
// MinToolResultsTTL to MaxToolResultsTTL) are usage errors (exit 2) that
// name the flag and the range, found before any request; the bounds
// themselves pass the check and reach the server.
func TestCLIStartTTLRanges(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, `{"error":{"code":"internal","message":"test server"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	start := func(extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--endpoint", srv.URL, "--token", "a-token-of-sixteen-chars"}, extra...)
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return run(ctx, args, &out, &errOut), errOut.String()
	}
	clientTools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(clientTools, []byte(`[{"name":"t","description":"d","input_schema":{"type":"object"},"effect":"read"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flag, value, want string
	}{
		{"--ttl", (service.MinApprovalTTL - time.Second).String(), "want a duration from 1m to 168h"},
		{"--ttl", (service.MaxApprovalTTL + time.Second).String(), "want a duration from 1m to 168h"},
		{"--ttl", "-1h", "want a duration from 1m to 168h"},
		{"--tool-results-ttl", (service.MinToolResultsTTL - time.Second).String(), "want a duration from 10s to 168h"},
		{"--tool-results-ttl", (service.MaxToolResultsTTL + time.Second).String(), "want a duration from 10s to 168h"},
		{"--tool-results-ttl", "-10s", "want a duration from 10s to 168h"},
		// An explicit 0 is out of range too, not the default an unset
		// flag leaves (tester helper-109 P3-2).
		{"--ttl", "0", "want a duration from 1m to 168h"},
		{"--ttl", "0s", "want a duration from 1m to 168h"},
		{"--tool-results-ttl", "0", "want a duration from 10s to 168h"},
	}
	for _, tt := range tests {
		code, serr := start(tt.flag, tt.value, "--client-tools", clientTools)
		if code != 2 || !strings.Contains(serr, tt.flag+" ") || !strings.Contains(serr, tt.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want exit 2 naming the flag and %q", tt.flag, tt.value, code, serr, tt.want)
		}
	}
	assert.Zero(t, requests.Load(), "a usage error sends no request")

	// The bounds pass the check: the request reaches the server (which
	// answers 500 here).
	for _, ok := range [][]string{
		{"--ttl", service.MinApprovalTTL.String()},
		{"--ttl", service.MaxApprovalTTL.String()},
		{"--tool-results-ttl", service.MinToolResultsTTL.String(), "--client-tools", clientTools},
		{"--tool-results-ttl", service.MaxToolResultsTTL.String(), "--client-tools", clientTools},
	} {
		before := requests.Load()
		code, serr := start(ok...)
		assert.Equal(t, 1, code, "%v: %s", ok, serr)
		assert.Greater(t, requests.Load(), before, "%v reaches the server", ok)
	}
}

// TestCLIStartClientToolFlagsNeedClientTools: --tool-executor and
// --tool-results-ttl without client tools do not go together, a usage
// error (exit 2) found before any request, as the server would refuse the
// body (tester helper-109 P3-3); client tools from --body count.
func TestCLIStartClientToolFlagsNeedClientTools(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, `{"error":{"code":"internal","message":"test server"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"client_tools":[{"name":"t","description":"d","input_schema":{"type":"object"},"effect":"read"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"runs", "start", "--prompt", "x", "--approver", "bob", "--endpoint", srv.URL, "--token", "a-token-of-sixteen-chars"}, extra...)
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return run(ctx, args, &out, &errOut), errOut.String()
	}
	for _, extra := range [][]string{{"--tool-results-ttl", "1h"}, {"--tool-executor", "svc"}} {
		code, serr := start(extra...)
		if code != 2 || !strings.Contains(serr, extra[0]+" needs --client-tools") {
			t.Errorf("%v without client tools: exit %d, stderr %q; want exit 2 saying it needs --client-tools", extra, code, serr)
		}
	}
	assert.Zero(t, requests.Load(), "a usage error sends no request")
	code, serr := start("--tool-executor", "svc", "--body", body)
	assert.Equal(t, 1, code, "client tools from --body: %s", serr)
	assert.NotZero(t, requests.Load(), "client tools from --body: the request reaches the server")
}

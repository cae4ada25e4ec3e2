package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/client"
)

// TestCLIEndpointMustBeAnHTTPURL: an endpoint that is not an http(s) URL
// (no scheme, say) is a usage error (exit 2) that says what to give,
// whether it came from --endpoint or from the environment (tester
// helper-112 P3).
func TestCLIEndpointMustBeAnHTTPURL(t *testing.T) {
	for _, tt := range []struct {
		endpoint, env string
		want          string
	}{
		{"127.0.0.1:18801", "", `--endpoint "127.0.0.1:18801" is not an http(s) URL: give the scheme, as in http://127.0.0.1:18801`},
		{"localhost:8080", "", `--endpoint "localhost:8080" is not an http(s) URL: give the scheme, as in http://localhost:8080`},
		{"ftp://example.com", "", `--endpoint "ftp://example.com" is not an http(s) URL with a host`},
		{"http://127.0.0.1:8080/?stage=prod", "", "without a query or fragment"},
		{"", "127.0.0.1:18801", `AGENTGATE_ENDPOINT "127.0.0.1:18801" is not an http(s) URL: give the scheme`},
	} {
		t.Setenv(EnvEndpoint, tt.env)
		args := []string{"runs", "get", "r1", "--token", "a-token-of-sixteen-chars"}
		if tt.endpoint != "" {
			args = append(args, "--endpoint", tt.endpoint)
		}
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("endpoint %q (env %q): exit %d, stderr %q; want exit 2 and %q", tt.endpoint, tt.env, code, errOut.String(), tt.want)
		}
	}
}

// TestCLIStartFlagsFillWhatTheBodyLeavesOut: with --body, a flag sets a
// field the body does not give (a flag for one it gives is refused:
// TestConflictingOrInvalidFlagsAreRefused), and the request carries both.
func TestCLIStartFlagsFillWhatTheBodyLeavesOut(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = b
		mu.Unlock()
		http.Error(w, `{"error":{"code":"internal","message":"test server"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	require.NoError(t, os.WriteFile(body, []byte(`{"prompt":"from the body","required_approvals":1}`), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"runs", "start", "--body", body, "--approver", "bob", "--system", "be brief",
		"--endpoint", srv.URL, "--token", "a-token-of-sixteen-chars"}, &out, &errOut)
	assert.Equal(t, 1, code, "the test server's 500: %s", errOut.String())
	mu.Lock()
	defer mu.Unlock()
	var req client.StartRunRequest
	require.NoError(t, json.Unmarshal(sent, &req), "the request reached the server: %s", sent)
	assert.Equal(t, "from the body", req.Prompt)
	assert.Equal(t, []string{"bob"}, req.Approvers)
	assert.Equal(t, "be brief", req.System)
	assert.Equal(t, 1, req.RequiredApprovals)
}

// TestBodyFieldsAreFieldsOfTheRequest: the JSON names bodyFields gives
// are the tags of client.StartRunRequest, and its flags are flags of
// `runs start`.
func TestBodyFieldsAreFieldsOfTheRequest(t *testing.T) {
	var tags []string
	rt := reflect.TypeFor[client.StartRunRequest]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		tags = append(tags, name)
	}
	var s startFlags
	fs := flag.NewFlagSet("runs start", flag.ContinueOnError)
	s.register(fs)
	covered := map[string]bool{}
	for _, bf := range bodyFields {
		assert.NotNil(t, fs.Lookup(bf.flag), "--%s is a flag of runs start", bf.flag)
		for _, f := range bf.fields {
			assert.True(t, slices.Contains(tags, f), "%s (of --%s) is a field of the request", f, bf.flag)
			covered[f] = true
		}
	}
	for _, f := range tags {
		assert.True(t, covered[f], "the request's %s has a flag of runs start (add it, and to bodyFields)", f)
	}
}

// TestCLIStartQuorumAndRequireApproval: --required-approvals and
// --require-approval (repeatable) are the request's required_approvals and
// require_approval: the read the policy lets run is held, and the held turn
// needs two approvals.
func TestCLIStartQuorumAndRequireApproval(t *testing.T) {
	e := startCLIEnv(t)
	r := e.waiting("--approver", "carol", "--required-approvals", "2", "--require-approval", "read_document", "--require-approval", "list_*")
	require.NotNil(t, r.VotesNeeded)
	assert.Equal(t, 2, *r.VotesNeeded, "two approvals needed")
	held := map[string]bool{}
	for _, c := range r.Pending.Calls {
		held[c.Tool] = c.NeedsApproval
	}
	assert.Equal(t, map[string]bool{"search_documents": false, "read_document": true}, held, "the read is held, the search runs")
}

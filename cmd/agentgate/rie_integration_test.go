//go:build integration

package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/s3state"
	"github.com/agentgate/agentgate/internal/webhook"
)

func endpoint() string {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		return e
	}
	return "http://localhost:4566"
}

// freePorts picks n distinct loopback addresses for processes that bind
// them themselves: the listeners are all held until every port is picked
// (a port closed and picked again could be handed out twice), then closed.
// Another process can still take one before its owner binds it; startRIE
// starts again on new ports when that happens.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// The bootstraps and the RIE are built once per test binary, into a folder
// TestMain removes: the two tests that run them (TestLambdasUnderRIE and
// TestLambdaWithoutCELRefusesConditions) run the same binaries, and each
// build links four of them again (about 7 s of lane 2 of scripts/test.sh).
var bootstraps struct {
	once sync.Once
	dir  string
	bins map[string]string
	err  error
}

// TestMain removes the folder of the bootstraps built for this test binary.
// It changes no test: it only runs them and cleans up after them.
func TestMain(m *testing.M) {
	code := m.Run()
	if bootstraps.dir != "" {
		_ = os.RemoveAll(bootstraps.dir)
	}
	os.Exit(code)
}

// buildBootstraps returns the three functions (linux/amd64) and the Runtime
// Interface Emulator, built on the first call. It builds the way `make
// build` does for amd64 (same tags, -trimpath, -ldflags) in one go build of
// the three packages, so the test and `make build`/`make bench-lambda` share
// one set of build-cache entries instead of each compiling the whole
// dependency graph again. AGENTGATE_E2E_BOOTSTRAPS names a folder of ready
// <fn>/bootstrap files (dist/lambda/amd64 after `make build
// LAMBDA_ARCHES=amd64`) to use instead. The callers only run the files.
func buildBootstraps(t *testing.T) map[string]string {
	t.Helper()
	bootstraps.once.Do(func() {
		bootstraps.bins, bootstraps.err = build(t)
	})
	require.NoError(t, bootstraps.err)
	return bootstraps.bins
}

func build(t *testing.T) (map[string]string, error) {
	out := map[string]string{}
	fns := []string{"startrun", "resume", "purge"}
	dir, err := os.MkdirTemp("", "agentgate-bootstraps-")
	if err != nil {
		return nil, err
	}
	bootstraps.dir = dir
	if ready := os.Getenv("AGENTGATE_E2E_BOOTSTRAPS"); ready != "" {
		for _, fn := range fns {
			out[fn] = filepath.Join(ready, fn, "bootstrap")
			if _, err := os.Stat(out[fn]); err != nil {
				return nil, fmt.Errorf("AGENTGATE_E2E_BOOTSTRAPS=%s: %w", ready, err)
			}
		}
	} else {
		bin := filepath.Join(dir, "bin")
		if err := os.MkdirAll(bin, 0o750); err != nil {
			return nil, err
		}
		// The tags of mk/build.mk's default (LAMBDA_PROVIDER=bedrock); the
		// test runs the scripted model, which every build links.
		args := []string{"build", "-tags", "lambda.norpc,bedrock", "-trimpath", "-ldflags=-s -w", "-o", bin + "/"}
		for _, fn := range fns {
			args = append(args, "../../functions/"+fn)
		}
		start := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the functions: %w: %s", err, b)
		}
		t.Logf("built the three bootstraps in %v", time.Since(start).Round(time.Millisecond))
		for _, fn := range fns {
			out[fn] = filepath.Join(bin, fn)
		}
	}
	rie := filepath.Join(dir, "aws-lambda-rie")
	if b, err := exec.Command("go", "build", "-o", rie, "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build RIE: %w: %s", err, b)
	}
	out["rie"] = rie
	return out, nil
}

// startRIE runs one bootstrap under the emulator, on two ports of its own
// (the invoke address and the runtime API's), and returns the invoke
// address once the emulator answers there. An emulator that stops before
// it answers because a port was taken in between (it panics with "address
// already in use") is started again on two other ports; any other early
// stop fails the test with the emulator's output.
func startRIE(t *testing.T, rie, bootstrap string, env []string, logs io.Writer) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		addr := ports[0]
		var own syncBuffer
		cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", ports[1], bootstrap)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout = io.MultiWriter(logs, &own)
		cmd.Stderr = cmd.Stdout
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		if answered(addr, exited) {
			return addr
		}
		if !strings.Contains(own.String(), "address already in use") || attempt == 3 {
			t.Fatalf("RIE for %s stopped, or did not answer, on %s (attempt %d):\n%s", filepath.Base(bootstrap), addr, attempt, own.String())
		}
		t.Logf("RIE for %s: a port was taken before it bound it; starting it on other ports", filepath.Base(bootstrap))
	}
}

// answered waits until addr accepts a connection; false when the emulator
// that is to listen there stopped first. (A process that took the port
// would answer too; the emulator then stops at once, and the test fails
// with its "address already in use" in the function logs.)
func answered(addr string, exited <-chan struct{}) bool {
	for i := 0; i < 100; i++ {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// TestLambdasUnderRIE runs the three real bootstrap binaries under the Lambda
// Runtime Interface Emulator against moto (or LocalStack), fronted by the
// local server in remote mode: start -> suspend -> decide -> resume ->
// complete, then an approval that expires and a purge that deletes it.
func TestLambdasUnderRIE(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bins := buildBootstraps(t)

	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"), awsconfig.WithBaseEndpoint(endpoint()),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	require.NoError(t, err)
	// A deployed stack's table and bucket (CI deploys the CDK stack onto the
	// emulator and names them here), or fresh ones.
	table, bucket := os.Getenv("AGENTGATE_E2E_TABLE"), os.Getenv("AGENTGATE_E2E_BUCKET")
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if table == "" || bucket == "" {
		suffix := fmt.Sprintf("%d", time.Now().UnixNano())
		table, bucket = "agentgate-e2e-"+suffix, "agentgate-e2e-"+suffix
		_, err = dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), table)
		require.NoError(t, err)
		_, err = s3state.CreateBucket(ctx, s3c, bucket, "us-east-1", "", 7)
		require.NoError(t, err)
	}
	t.Logf("table %s, bucket %s", table, bucket)
	_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md"),
		Body: strings.NewReader(demoDocuments["pages/pricing.md"])})
	require.NoError(t, err)
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, demoScript, 0o600))

	// Webhooks: the signing secret in Secrets Manager on the emulator, and
	// an https receiver on this machine whose certificate the functions
	// trust (SSL_CERT_FILE), verifying with the reference library.
	whSecret, err := webhook.GenerateSecret()
	require.NoError(t, err)
	secretOut, err := secretsmanager.NewFromConfig(awsCfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(fmt.Sprintf("agentgate-e2e-webhooks-%d", time.Now().UnixNano())), SecretString: aws.String(whSecret)})
	require.NoError(t, err)
	verifier, err := standardwebhooks.NewWebhook(whSecret)
	require.NoError(t, err)
	type delivery struct {
		id string
		p  webhook.Payload
	}
	hooks := make(chan delivery, 16)
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		if verifier.Verify(body, r.Header) == nil && json.Unmarshal(body, &p) == nil {
			hooks <- delivery{r.Header.Get("webhook-id"), p}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	certFile := filepath.Join(dir, "receiver.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: receiver.Certificate().Raw}), 0o600))

	// The server's port is bound here and handed to it: the functions'
	// environment names it before the server starts.
	serverLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serverAddr := serverLn.Addr().String()
	// The emulators' output and the server's log go here from several
	// goroutines (one copier per process stream): a locked buffer.
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	})
	env := []string{
		"AGENTGATE_TABLE=" + table, "AGENTGATE_BUCKET=" + bucket,
		"AGENTGATE_STARTRUN_FUNCTION=startrun", "AGENTGATE_RESUME_FUNCTION=resume",
		"AGENTGATE_MODEL=scripted:" + script, "AGENTGATE_RETENTION=2s",
		"AGENTGATE_PUBLIC_BASE_URL=http://" + serverAddr,
		"AWS_ENDPOINT_URL=" + endpoint(), "AWS_ENDPOINT_URL_LAMBDA=http://" + serverAddr,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AGENTGATE_WEBHOOK_SECRET=" + *secretOut.ARN, "AGENTGATE_WEBHOOK_ALLOW=127.0.0.1", "SSL_CERT_FILE=" + certFile,
	}
	addrs := map[string]string{}
	for _, fn := range []string{"startrun", "resume", "purge"} {
		addrs[fn] = startRIE(t, bins["rie"], bins[fn], append(env, "AWS_LAMBDA_FUNCTION_NAME="+fn), &logs)
	}
	alice, bob := "alice-token-0123456789", "bob-token-0123456789ab"
	s, err := startLocal(ctx, serveOptions{
		listener: serverLn, tokens: map[string]string{alice: "alice", bob: "bob"},
		logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		remote: map[string]string{"startrun": "http://" + addrs["startrun"], "resume": "http://" + addrs["resume"], "purge": "http://" + addrs["purge"]},
	})
	require.NoError(t, err)
	defer s.Close()
	a := &apiClient{t: t, base: s.URL, token: alice}
	b := &apiClient{t: t, base: s.URL, token: bob}

	// A run left to expire, started first, with a 60-second approval
	// window (the shortest allowed); its deadline is moved into the past
	// below rather than waited out.
	var exp runJSON
	a.do("POST", "/runs", map[string]any{"prompt": "again", "approvers": []string{"bob"}, "approval_ttl_seconds": 60}, http.StatusAccepted, &exp)
	expID := exp.ID
	a.waitStatus(expID, "WAITING_FOR_APPROVAL")

	// start -> suspend
	var started runJSON
	a.do("POST", "/runs", map[string]any{"prompt": "Raise the Team price to 12 EUR.", "approvers": []string{"bob"}}, http.StatusAccepted, &started)
	id := started.ID
	run := a.waitStatus(id, "WAITING_FOR_APPROVAL")
	requireNotModifiedThroughTheFunction(t, a, id)
	require.Len(t, run.Pending.Calls, 1)
	require.Equal(t, "write_document", run.Pending.Calls[0].Tool)
	doc, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md")})
	require.NoError(t, err)
	text, _ := io.ReadAll(doc.Body)
	require.Contains(t, string(text), "10 EUR", "nothing written before the decision")

	// decide -> resume -> complete
	b.do("POST", "/runs/"+id+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	a.waitStatus(id, "COMPLETED")
	doc, err = s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md")})
	require.NoError(t, err)
	text, _ = io.ReadAll(doc.Body)
	require.Contains(t, string(text), "12 EUR")
	require.Equal(t, 1, toolExecutions(t, a.events(id), "write_document"), "the write ran exactly once")

	// A run with a webhook: the workers make the first attempts when their
	// jobs end (no purge runs here until the expiry below), signed with the
	// secret they read from Secrets Manager.
	// Delivery is at least once: a receiver deduplicates on webhook-id, as
	// this one does (a decision taken while startrun's attempt is being
	// recorded leaves it to resume, which sends it again).
	seen := map[string]bool{}
	hookTold := func(want string) webhook.Payload {
		t.Helper()
		for {
			select {
			case d := <-hooks:
				if seen[d.id] {
					continue
				}
				seen[d.id] = true
				require.Equal(t, want, string(d.p.Type))
				return d.p
			case <-time.After(time.Minute): // a guard against hanging, not a speed check
				t.Fatalf("no verified %s delivery from the workers", want)
				return webhook.Payload{}
			}
		}
	}
	var withHook runJSON
	a.do("POST", "/runs", map[string]any{"prompt": "Raise the Team price to 12 EUR.", "approvers": []string{"bob"},
		"webhook_url": receiver.URL + "/hooks"}, http.StatusAccepted, &withHook)
	require.Equal(t, withHook.ID, hookTold("run.waiting_for_approval").Data.RunID, "from startrun")
	run = a.waitStatus(withHook.ID, "WAITING_FOR_APPROVAL")
	b.do("POST", "/runs/"+withHook.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	require.Equal(t, withHook.ID, hookTold("run.completed").Data.RunID, "from resume")
	// A cancel ends a waiting run in the API request, which no worker job
	// follows: the request dispatches a deliver job to resume.
	var toCancel runJSON
	a.do("POST", "/runs", map[string]any{"prompt": "Raise the Team price to 12 EUR.", "approvers": []string{"bob"},
		"webhook_url": receiver.URL + "/hooks"}, http.StatusAccepted, &toCancel)
	require.Equal(t, toCancel.ID, hookTold("run.waiting_for_approval").Data.RunID, "from startrun")
	a.waitStatus(toCancel.ID, "WAITING_FOR_APPROVAL")
	a.do("POST", "/runs/"+toCancel.ID+"/cancel", nil, http.StatusOK, nil)
	require.Equal(t, toCancel.ID, hookTold("run.cancelled").Data.RunID, "from the deliver job")

	// expire and purge: the first run's window passes without a decision.
	// The purge finds it through the due index and expires it.
	backdateApproval(ctx, t, dynamodb.NewFromConfig(awsCfg), table, expID)
	_, err = s.Invoke.Functions["purge"].Invoke(ctx, scheduledEvent())
	require.NoError(t, err)
	gone := a.run(expID)
	require.Equal(t, "EXPIRED", gone.Status)
	require.Equal(t, "approval_expired", gone.Reason)
	time.Sleep(3 * time.Second) // retention is 2 s in this test
	_, err = s.Invoke.Functions["purge"].Invoke(ctx, scheduledEvent())
	require.NoError(t, err)
	a.do("GET", "/runs/"+expID, nil, http.StatusNotFound, nil)
	a.do("GET", "/runs/"+id, nil, http.StatusNotFound, nil)
}

// backdateApproval moves the approval deadline of the waiting run id, and
// with it the run's due time, a second into the past, in its row on the
// emulator, as if its window had run out: the test does not wait out the
// shortest window a request may ask for (60 s; the deadline a window
// gives is the unit and conformance tests' matter). It writes the row as
// the functions do, conditional on the version it read.
func backdateApproval(ctx context.Context, t *testing.T, ddb *dynamodb.Client, table, id string) {
	t.Helper()
	rows := dynamo.NewTable(ddb, table, dynamo.Options{})
	for attempt := 1; ; attempt++ {
		r, err := rows.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, runs.StatusWaiting, r.Status)
		require.True(t, time.Now().Before(r.ApprovalDeadline), "the window has not run out yet")
		read := r.Version
		r.Version++
		r.ApprovalDeadline = time.Now().Add(-time.Second)
		r.DueAt = r.ApprovalDeadline
		runs.SealWriteID(r)
		// WriteRow: an answer the emulator lost is recovered as the store
		// recovers it (README, "Answers lost on the way back").
		err = runstest.WriteRow(ctx, rows, runs.Write{Run: r, ExpectStatus: runs.StatusWaiting, ExpectVersion: read})
		if runs.ErrorCode(err) == runs.EConflict && attempt < 3 {
			continue // the run moved meanwhile (a function recorded its mail): read it again
		}
		require.NoError(t, err)
		return
	}
}

// requireNotModifiedThroughTheFunction: GET /runs/{id} answered by the
// resume function (its answer crossing the emulator as JSON, then the
// gateway) tags the run, and If-None-Match with the tag gets 304 without a
// body, as from the in-process handler. The run may still change once
// (the worker records the approval mail): the tag is read again then.
func requireNotModifiedThroughTheFunction(t *testing.T, a *apiClient, id string) {
	t.Helper()
	for range 5 {
		first := a.caller().Call(t, http.MethodGet, "/runs/"+id, "", "")
		tag := first.Header.Get("ETag")
		require.Equal(t, http.StatusOK, first.Status, string(first.Body))
		require.NotEmpty(t, tag, "a 200 of GET /runs/{id} without an ETag")
		conditional := a.caller()
		conditional.Header = http.Header{"If-None-Match": {tag}}
		r := conditional.Call(t, http.MethodGet, "/runs/"+id, "", "")
		if r.Status == http.StatusOK {
			continue // the run changed meanwhile
		}
		require.Equal(t, http.StatusNotModified, r.Status, string(r.Body))
		require.Equal(t, tag, r.Header.Get("ETag"))
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		require.Empty(t, r.Body)
		return
	}
	t.Fatalf("run %s: no 304 in five conditional GETs", id)
}

//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

func endpoint() string {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		return e
	}
	return "http://localhost:4566"
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// buildBootstraps builds the three functions (linux/amd64, as shipped but for
// this machine) and the Runtime Interface Emulator.
func buildBootstraps(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fn := range []string{"startrun", "resume", "purge"} {
		bin := filepath.Join(dir, fn, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "../../functions/"+fn)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "build %s: %s", fn, b)
		out[fn] = bin
	}
	rie := filepath.Join(dir, "aws-lambda-rie")
	b, err := exec.Command("go", "build", "-o", rie, "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie").CombinedOutput()
	require.NoError(t, err, "build RIE: %s", b)
	out["rie"] = rie
	return out
}

// startRIE runs one bootstrap under the emulator and waits until it answers.
func startRIE(t *testing.T, rie, bootstrap, addr, runtimeAPI string, env []string, logs io.Writer) {
	t.Helper()
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", runtimeAPI, bootstrap)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("RIE on %s did not start", addr)
}

type client struct {
	t     *testing.T
	base  string
	token string
}

func (c *client) do(method, path string, body any, want int) map[string]any {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(c.t, want, resp.StatusCode, "%s %s: %s", method, path, b)
	var out map[string]any
	require.NoError(c.t, json.Unmarshal(b, &out), string(b))
	return out
}

func (c *client) waitFor(id, status string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.do("GET", "/runs/"+id, nil, http.StatusOK)
		if r["status"] == status {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s is %v, want %s: %v", id, r["status"], status, r)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLambdasUnderRIE runs the three real bootstrap binaries under the Lambda
// Runtime Interface Emulator against moto (or LocalStack), fronted by the
// local server in remote mode: start -> suspend -> decide -> resume ->
// complete, then an approval that expires and a purge that deletes it.
func TestLambdasUnderRIE(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bins := buildBootstraps(t, dir)

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

	serverAddr := freePort(t)
	addrs := map[string]string{"startrun": freePort(t), "resume": freePort(t), "purge": freePort(t)}
	var logs bytes.Buffer
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
	}
	for fn, addr := range addrs {
		startRIE(t, bins["rie"], bins[fn], addr, freePort(t), append(env, "AWS_LAMBDA_FUNCTION_NAME="+fn), &logs)
	}
	alice, bob := "alice-token-0123456789", "bob-token-0123456789ab"
	s, err := startLocal(ctx, serveOptions{
		addr: serverAddr, tokens: map[string]string{alice: "alice", bob: "bob"},
		logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		remote: map[string]string{"startrun": "http://" + addrs["startrun"], "resume": "http://" + addrs["resume"], "purge": "http://" + addrs["purge"]},
	})
	require.NoError(t, err)
	defer s.Close()
	a := &client{t: t, base: s.URL, token: alice}
	b := &client{t: t, base: s.URL, token: bob}

	// start -> suspend
	run := a.do("POST", "/runs", map[string]any{"prompt": "Raise the Team price to 12 EUR.", "approvers": []string{"bob"}}, http.StatusAccepted)
	id := run["id"].(string)
	run = a.waitFor(id, "WAITING_FOR_APPROVAL", 60*time.Second)
	pending := run["pending"].(map[string]any)
	require.Contains(t, fmt.Sprint(pending["calls"]), "write_document")
	doc, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md")})
	require.NoError(t, err)
	text, _ := io.ReadAll(doc.Body)
	require.Contains(t, string(text), "10 EUR", "nothing written before the decision")

	// decide -> resume -> complete
	b.do("POST", "/runs/"+id+"/decision", map[string]any{"turn_digest": pending["turn_digest"], "action": "approve"}, http.StatusAccepted)
	run = a.waitFor(id, "COMPLETED", 60*time.Second)
	doc, err = s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md")})
	require.NoError(t, err)
	text, _ = io.ReadAll(doc.Body)
	require.Contains(t, string(text), "12 EUR")
	evs := a.do("GET", "/runs/"+id+"/events", nil, http.StatusOK)["events"].([]any)
	writes := 0
	for _, e := range evs {
		if e.(map[string]any)["type"] == "tool_executed" && strings.Contains(fmt.Sprint(e), "write_document") {
			writes++
		}
	}
	require.Equal(t, 1, writes, "the write ran exactly once")

	// expire and purge: a 60-second window passes without a decision.
	exp := a.do("POST", "/runs", map[string]any{"prompt": "again", "approvers": []string{"bob"}, "approval_ttl_seconds": 60}, http.StatusAccepted)
	expID := exp["id"].(string)
	a.waitFor(expID, "WAITING_FOR_APPROVAL", 60*time.Second)
	time.Sleep(61 * time.Second)
	_, err = s.Invoke.Functions["purge"].Invoke(ctx, scheduledEvent())
	require.NoError(t, err)
	gone := a.do("GET", "/runs/"+expID, nil, http.StatusOK)
	require.Equal(t, "EXPIRED", gone["status"])
	require.Equal(t, "approval_expired", gone["termination_reason"])
	time.Sleep(3 * time.Second) // retention is 2 s in this test
	_, err = s.Invoke.Functions["purge"].Invoke(ctx, scheduledEvent())
	require.NoError(t, err)
	a.do("GET", "/runs/"+expID, nil, http.StatusNotFound)
	a.do("GET", "/runs/"+id, nil, http.StatusNotFound)
}

//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

// TestCLIStoryOnMoto runs the CLI story on DynamoDB+S3 (moto): start, the
// approver's inbox, show with the diff, approve the digest shown (the inbox
// empties), wait, events, a start rerun under its idempotency key; every exchange
// validated against openapi.yaml, so the AWS adapters' answers are held to
// the same contract as the embedded store's.
func TestCLIStoryOnMoto(t *testing.T) {
	ctx := context.Background()
	awsCfg, table, bucket := motoNames(t, "agentgate-cli-")
	if _, err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), table); err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3state.CreateBucket(ctx, s3c, bucket, "us-east-1", "", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("content/pages/pricing.md"),
		Body: strings.NewReader(demoDocuments["pages/pricing.md"])}); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AGENTGATE_TABLE": table, "AGENTGATE_BUCKET": bucket, "AGENTGATE_PUBLIC_BASE_URL": "",
	} {
		t.Setenv(k, v)
	}
	e := startCLIEnvOn(t, "aws")
	r := e.waiting("--meta", "ticket=OPS-7")
	code, out, serr := e.cli("bob", "approvals", "show", r.ID)
	if code != 0 || !strings.Contains(out, "+- Team: 12 EUR") || !strings.Contains(out, r.Pending.TurnDigest) {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, serr)
	}
	if code, out, serr := e.cli("bob", "approvals", "list"); code != 0 || !strings.Contains(out, r.ID+"  from alice  write_document") {
		t.Fatalf("inbox: exit %d\n%s\n%s", code, out, serr)
	}
	if code, _, serr := e.cli("bob", "approvals", "approve", r.ID, "--digest", r.Pending.TurnDigest); code != 0 {
		t.Fatalf("approve: %s", serr)
	}
	if code, out, serr := e.cli("bob", "approvals", "list"); code != 0 || !strings.Contains(out, "nothing waits for your decision") {
		t.Fatalf("inbox after the decision: exit %d\n%s\n%s", code, out, serr)
	}
	done := e.runJSON("alice", "runs", "wait", r.ID)
	if done.Status != client.StatusCompleted || done.Metadata["ticket"] != "OPS-7" {
		t.Fatalf("done: %+v", done)
	}
	if code, out, serr := e.cli("alice", "runs", "events", r.ID, "--json"); code != 0 || !strings.Contains(out, `"settled"`) {
		t.Fatalf("events: exit %d\n%s\n%s", code, out, serr)
	}
	if code, _, serr := e.cli("alice", "runs", "cancel", r.ID); code != 1 || !strings.Contains(serr, "HTTP 409") {
		t.Fatalf("cancel a completed run: exit %d %s", code, serr)
	}
	// A start rerun under its key (its answer lost) prints the run the
	// first started: the key item is read back from the table.
	keyed := []string{"runs", "start", "--prompt", "update the Team price", "--approver", "bob", "--idempotency-key", "cli-story-1"}
	if first, again := e.runJSON("alice", keyed...), e.runJSON("alice", keyed...); again.ID != first.ID {
		t.Fatalf("runs start rerun under its key: run %s, then %s; want one run", first.ID, again.ID)
	}
}

// TestServeRefusesAMissingTableOrBucket: `serve --store aws` checks at start
// that its table and bucket exist; before, it started and every request
// that touched the missing one answered 500.
func TestServeRefusesAMissingTableOrBucket(t *testing.T) {
	ctx := context.Background()
	awsCfg, table, bucket := motoNames(t, "agentgate-missing-")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AGENTGATE_TABLE": table, "AGENTGATE_BUCKET": bucket, "AGENTGATE_PUBLIC_BASE_URL": "",
	} {
		t.Setenv(k, v)
	}
	serve := func() error {
		s, err := startLocal(ctx, serveOptions{addr: "127.0.0.1:0", dir: t.TempDir(), tokens: cliTokens, mailOut: io.Discard, store: "aws",
			logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err == nil {
			_ = s.Close()
		}
		return err
	}
	if err := serve(); err == nil || !strings.Contains(err.Error(), `table "`+table+`" (AGENTGATE_TABLE) does not exist`) || !strings.Contains(err.Error(), "agentgate init") {
		t.Fatalf("serve without the table: %v", err)
	}
	// Without --token, a start that fails hands out no generated token
	// (before, serve printed one and then refused to start).
	var out bytes.Buffer
	err := runServe(ctx, []string{"--store", "aws", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--sweep-every", "1h"}, &out)
	if err == nil || !strings.Contains(err.Error(), "(AGENTGATE_TABLE) does not exist") {
		t.Fatalf("serve --store aws without the table: %v", err)
	}
	if strings.Contains(out.String(), "bearer token") {
		t.Fatalf("serve printed a token before refusing to start:\n%s", out.String())
	}
	if _, err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), table); err != nil {
		t.Fatal(err)
	}
	if err := serve(); err == nil || !strings.Contains(err.Error(), `bucket "`+bucket+`" (AGENTGATE_BUCKET) does not exist`) {
		t.Fatalf("serve without the bucket: %v", err)
	}
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3state.CreateBucket(ctx, s3c, bucket, "us-east-1", "", 7); err != nil {
		t.Fatal(err)
	}
	if err := serve(); err != nil {
		t.Fatalf("serve with both: %v", err)
	}
	// Its banner says the documents are in the bucket (they are, as the
	// Lambdas keep them) and --dir holds the outbox only.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var banner syncBuffer
	served := make(chan error, 1)
	go func() {
		served <- runServe(sctx, []string{"--store", "aws", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--sweep-every", "1h", "--token", "alice=" + cliToken("alice")}, &banner)
	}()
	for !strings.Contains(banner.String(), "agentgate serving on") {
		select {
		case err := <-served:
			t.Fatalf("serve --store aws with both ended: %v\n%s", err, banner.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if want := "documents in s3://" + bucket + "/content/, outbox in "; !strings.Contains(banner.String(), want) {
		t.Errorf("banner %q, want it to say %q", banner.String(), want)
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("serve after its context ended: %v", err)
	}
}

// motoNames returns the emulator's AWS configuration and a table and a
// bucket name of this test's own (prefix and the time), neither created.
func motoNames(t *testing.T, prefix string) (aws.Config, string, string) {
	t.Helper()
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion("us-east-1"), awsconfig.WithBaseEndpoint(endpoint()),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		t.Fatal(err)
	}
	name := prefix + fmt.Sprintf("%d", time.Now().UnixNano())
	return awsCfg, name, name
}

//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/ses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/approval/approvaltest"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

// TestApprovalLinkOnEmulator runs the local server on DynamoDB+S3 with SES
// on the emulator (moto or LocalStack): the run suspends, the approval mail
// is read back from the emulator (approvaltest.SentMail), the link's page
// decides nothing, the POST approves, the run resumes and completes with
// the write done once in S3, and the audit trail names the approver's
// address. The server mails through AGENTGATE_SES_API's API (SES v2 by
// default), through SES v1 on an emulator without SES v2 (LocalStack
// Community).
//
// It creates its own table, bucket and sender identity and deletes none of
// them. On moto it reads data.json, which answers 500 once per S3 object
// of a deleted bucket: it needs a moto on which no suite has deleted
// buckets with objects yet (run it first, on a fresh moto).
func TestApprovalLinkOnEmulator(t *testing.T) {
	ctx := context.Background()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"), awsconfig.WithBaseEndpoint(endpoint()),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	require.NoError(t, err)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	table, bucket := "agentgate-link-"+suffix, "agentgate-link-"+suffix
	sender := "agentgate-" + suffix + "@example.com"
	// A fresh approver address per run: the emulator keeps every mail it
	// was sent, and this one picks out ours.
	approver := "ops-" + suffix + "@example.com"

	_, err = dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), table)
	require.NoError(t, err)
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	_, err = s3state.CreateBucket(ctx, s3c, bucket, "us-east-1", "", 7)
	require.NoError(t, err)
	const docKey = "content/pages/pricing.md"
	_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(docKey),
		Body: strings.NewReader(demoDocuments["pages/pricing.md"])})
	require.NoError(t, err)
	// SES v1's VerifyEmailIdentity: moto and LocalStack Community both
	// serve it (LocalStack Community has no SES v2).
	_, err = ses.NewFromConfig(awsCfg).VerifyEmailIdentity(ctx, &ses.VerifyEmailIdentityInput{EmailAddress: aws.String(sender)})
	require.NoError(t, err)
	if v2, err := approvaltest.ServesSESv2(ctx, endpoint()); err != nil {
		t.Fatalf("ask the emulator for its services: %v", err)
	} else if !v2 {
		t.Log("the emulator has no SES v2 (LocalStack Community): the server mails through SES v1")
		t.Setenv("AGENTGATE_SES_API", "v1")
	}
	readDoc := func() string {
		t.Helper()
		out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(docKey)})
		require.NoError(t, err)
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		require.NoError(t, err)
		return string(b)
	}

	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AGENTGATE_TABLE": table, "AGENTGATE_BUCKET": bucket, "AGENTGATE_MAIL_FROM": sender,
		"AGENTGATE_PUBLIC_BASE_URL": "", // the server's own address
	} {
		t.Setenv(k, v)
	}
	ls := startLinkServer(t, linkServerOptions{store: "aws"})

	// Suspend: the mail goes out through SES once the suspension is durable.
	id := ls.startRun(map[string]any{"approvers": []string{"bob", approver}})
	ls.alice.waitStatus(id, "WAITING_FOR_APPROVAL")
	notified := ls.alice.waitEvent(id, "notified")
	run := ls.alice.run(id) // after the notification was recorded
	require.NotNil(t, run.Pending)
	require.Contains(t, string(notified.Data), `"sent":1`, "the notified event: %s", notified.Data)
	require.Empty(t, ls.mail.String(), "with a sender configured nothing goes to the local outbox")

	msg := sentMailTo(t, approver)
	assert.Equal(t, sender, msg.From)
	assert.Contains(t, msg.Body(), id, "the mail names the run")
	assert.Contains(t, msg.Body(), "write_document", "the mail lists the pending call")
	link, ok := approvaltest.ExtractLink(msg.Body(), ls.url)
	require.True(t, ok, "no approval link under %s in the mail:\n%s", ls.url, msg.Body())

	// The page decides nothing.
	evCount := len(ls.alice.events(id))
	for range 3 {
		requirePage(t, getPage(t, http.MethodHead, link), http.StatusOK)
	}
	p := getPage(t, http.MethodGet, link)
	requirePage(t, p, http.StatusOK, "write_document", approver, id)
	require.Equal(t, run.Pending.TurnDigest, p.digest())
	ls.requireUnchanged(run, evCount)
	require.Contains(t, readDoc(), "Team: 10 EUR", "nothing written before the decision")

	// Approve: WAITING -> RESUMING -> RUNNING -> COMPLETED.
	requirePage(t, decideForm(t, link, p.digest(), "approve", nil), http.StatusOK, "Your decision was recorded", "Approved.")
	done := ls.alice.waitStatus(id, "COMPLETED")
	require.NotNil(t, done.Decision)
	assert.Equal(t, approver, done.Decision.By)
	assert.Equal(t, "link", done.Decision.Via)

	evs := ls.alice.events(id)
	require.Equal(t, 1, toolExecutions(t, evs, "write_document"), "the write ran exactly once")
	require.Contains(t, readDoc(), "Team: 12 EUR", "the document in S3 changed")
	decisions := eventsOf(evs, "decision")
	require.Len(t, decisions, 1)
	assert.Equal(t, approver, decisions[0].Actor, "the audit event names the approver")
	assert.Contains(t, string(decisions[0].Data), `"via":"link"`)
	// The decision moved the run to RESUMING; the resume worker then ran it
	// to the end, in this order.
	requireOrder(t, evs, "suspended", "notified", "decision", "resumed", "tool_executed", "settled")
	assert.Contains(t, string(eventsOf(evs, "settled")[0].Data), "COMPLETED")

	// The link is used up.
	requirePage(t, getPage(t, http.MethodGet, link), http.StatusConflict, "already approved by "+approver)
	requirePage(t, decideForm(t, link, p.digest(), "approve", nil), http.StatusConflict, "already approved by "+approver)
	assert.Equal(t, done.Version, ls.alice.run(id).Version)
}

// sentMailTo polls the emulator for the one approval mail to approver. moto
// 5.2 answers data.json with a 500 once per S3 object of a deleted bucket
// (other suites delete buckets), and approvaltest.SentMail retries a
// bounded number of times; so a failed read is retried here too until
// motoMailWait. A moto that served suites deleting buckets can hold
// thousands of such objects (each one 500): run the mail suites first, on
// a fresh moto.
func sentMailTo(t *testing.T, approver string) approvaltest.SentMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), motoMailWait)
	defer cancel()
	var lastErr error
	for {
		all, err := approvaltest.SentMail(ctx, endpoint())
		lastErr = err
		var mine []approvaltest.SentMessage
		for _, m := range all {
			if slices.Contains(m.To, approver) {
				mine = append(mine, m)
			}
		}
		if len(mine) > 0 {
			require.Len(t, mine, 1, "one mail to %s", approver)
			return mine[0]
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				t.Fatalf("no approval mail to %s in moto after %s: %v\n"+
					"moto 5.2's data.json answers 500 once per S3 object of a deleted bucket; this moto holds too many "+
					"(suites that delete buckets ran before): run the mail suites first, on a fresh moto", approver, motoMailWait, lastErr)
			}
			t.Fatalf("no approval mail to %s on the emulator after %s", approver, motoMailWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// motoMailWait bounds the read of the approval mail from moto.
const motoMailWait = 3 * time.Minute

// requireOrder checks that events of the types appear in that order (the
// first of each type after the previous one).
func requireOrder(t *testing.T, evs []eventJSON, types ...string) {
	t.Helper()
	i := 0
	for _, e := range evs {
		if i < len(types) && e.Type == types[i] {
			i++
		}
	}
	if i < len(types) {
		var got []string
		for _, e := range evs {
			got = append(got, e.Type)
		}
		t.Fatalf("events %v lack %q in the order %v", got, types[i], types)
	}
}

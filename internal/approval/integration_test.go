//go:build integration

package approval_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approval/approvaltest"
	"github.com/agentgate/agentgate/internal/awscall"
)

func endpoint() string {
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		return strings.TrimRight(e, "/")
	}
	return "http://localhost:4566"
}

func sesClient(t *testing.T) *sesv2.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		t.Fatalf("load aws config: %v", err)
	}
	return sesv2.NewFromConfig(cfg, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(endpoint()) })
}

// mailClient is the signed SES v2 caller the functions build
// (awswire.NewMailer), on the emulator.
func mailClient(t *testing.T) *awscall.Client {
	t.Helper()
	c, err := awscall.New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, awscall.SESv2)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifySender creates the sender identity; moto rejects mail from
// addresses (or domains) that are not identities.
func verifySender(t *testing.T, client *sesv2.Client, from string) {
	t.Helper()
	_, err := client.CreateEmailIdentity(context.Background(), &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)})
	var exists *sestypes.AlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		t.Fatalf("create email identity %s: %v", from, err)
	}
}

func TestSESMailerMoto(t *testing.T) {
	// data.json serializes all of moto's state: slow on a busy shared server.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := sesClient(t)
	const from = "approvals@agentgate.test"
	verifySender(t, client, from)

	raw, _, err := approval.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://gate.example.com/prod"
	// A unique recipient finds this test's mail among everybody else's.
	approver := "approver-" + strings.ToLower(raw[:10]) + "@example.com"
	m := sampleMessage()
	m.Approver = approver
	m.Link = approval.Link(base, raw)

	if err := approval.NewSESMailer(mailClient(t), from).Send(ctx, m); err != nil {
		t.Fatalf("Send: %v", err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		sent, err := approvaltest.SentMail(ctx, endpoint())
		if err != nil {
			t.Fatalf("SentMail: %v", err)
		}
		var mine []approvaltest.SentMessage
		for _, s := range sent {
			for _, to := range s.To {
				if to == approver {
					mine = append(mine, s)
				}
			}
		}
		if len(mine) == 1 {
			got := mine[0]
			if got.From != from {
				t.Errorf("From = %q, want %q", got.From, from)
			}
			if !strings.HasPrefix(got.Subject, "Approval needed: ") {
				t.Errorf("Subject = %q, want an approval subject", got.Subject)
			}
			link, ok := approvaltest.ExtractLink(got.Body(), base)
			if !ok || link != m.Link {
				t.Errorf("ExtractLink = %q, %v; want %q, true", link, ok, m.Link)
			}
			return
		}
		if len(mine) > 1 || time.Now().After(deadline) {
			t.Fatalf("found %d mails to %s in moto, want 1", len(mine), approver)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSESMailerUnverifiedSender(t *testing.T) {
	m := sampleMessage()
	err := approval.NewSESMailer(mailClient(t), "nobody@unverified-"+strings.ToLower(m.RunID)+".test").Send(context.Background(), m)
	if err == nil {
		t.Fatal("Send from an unverified sender: got nil error, want one")
	}
	if strings.Contains(err.Error(), m.Link) {
		t.Errorf("error %q contains the link", err)
	}
}

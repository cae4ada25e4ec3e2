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
	"github.com/aws/aws-sdk-go-v2/service/ses"

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

// sesClient is the SDK's client of SES's first API, whose
// VerifyEmailIdentity moto and LocalStack Community both serve (LocalStack
// Community has no SES v2).
func sesClient(t *testing.T) *ses.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		t.Fatalf("load aws config: %v", err)
	}
	return ses.NewFromConfig(cfg, func(o *ses.Options) { o.BaseEndpoint = aws.String(endpoint()) })
}

// mailClient is the signed SES caller the functions build for api
// (awswire.NewMailer), on the emulator.
func mailClient(t *testing.T, api approval.SESAPI) *awscall.Client {
	t.Helper()
	c, err := awscall.New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, api.Service())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verifySender makes the sender an identity; the emulators reject mail
// from addresses (or domains) that are not.
func verifySender(t *testing.T, client *ses.Client, from string) {
	t.Helper()
	if _, err := client.VerifyEmailIdentity(context.Background(), &ses.VerifyEmailIdentityInput{EmailAddress: aws.String(from)}); err != nil {
		t.Fatalf("verify email identity %s: %v", from, err)
	}
}

// sesAPIs runs f for each SES API the mailer sends through, skipping SES v2
// where the emulator has none (LocalStack Community).
func sesAPIs(t *testing.T, f func(t *testing.T, api approval.SESAPI)) {
	for _, api := range []approval.SESAPI{approval.SESv2, approval.SESv1} {
		t.Run(string(api), func(t *testing.T) {
			if api == approval.SESv2 {
				served, err := approvaltest.ServesSESv2(context.Background(), endpoint())
				if err != nil {
					t.Fatalf("ask the emulator for its services: %v", err)
				}
				if !served {
					t.Skip("the emulator has no SES v2 (LocalStack Community: SES v2 is a Pro feature); the SES v1 path runs")
				}
			}
			f(t, api)
		})
	}
}

// TestSESMailerOnEmulator sends an approval mail through each SES API and
// reads it back from the emulator (moto or LocalStack).
func TestSESMailerOnEmulator(t *testing.T) {
	client := sesClient(t)
	const from = "approvals@agentgate.test"
	verifySender(t, client, from)
	sesAPIs(t, func(t *testing.T, api approval.SESAPI) {
		// data.json serializes all of moto's state: slow on a busy shared server.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
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

		if err := approval.NewSESMailer(mailClient(t, api), from, api).Send(ctx, m); err != nil {
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
				subject, _, _, _ := approval.Compose(m)
				if got.Subject != subject {
					t.Errorf("Subject = %q, want %q", got.Subject, subject)
				}
				link, ok := approvaltest.ExtractLink(got.Body(), base)
				if !ok || link != m.Link {
					t.Errorf("ExtractLink = %q, %v; want %q, true", link, ok, m.Link)
				}
				return
			}
			if len(mine) > 1 || time.Now().After(deadline) {
				t.Fatalf("found %d mails to %s on the emulator, want 1", len(mine), approver)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// TestSESMailerUnverifiedSender: the emulator refuses mail from an
// unverified sender; the error names the service's code (SES v1's is an
// XML answer) and never holds the link.
func TestSESMailerUnverifiedSender(t *testing.T) {
	sesAPIs(t, func(t *testing.T, api approval.SESAPI) {
		m := sampleMessage()
		err := approval.NewSESMailer(mailClient(t, api), "nobody@unverified-"+strings.ToLower(m.RunID)+".test", api).Send(context.Background(), m)
		if err == nil {
			t.Fatal("Send from an unverified sender: got nil error, want one")
		}
		if strings.Contains(err.Error(), sampleToken) {
			t.Errorf("error %q contains the link's token", err)
		}
		var ae *awscall.APIError
		if !errors.As(err, &ae) || ae.Code != "MessageRejected" || ae.Message == "" {
			t.Errorf("error %v, want the service's MessageRejected with its message", err)
		}
	})
}

package webhook_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentgate/agentgate/internal/webhook"
)

// headersFor signs body as the Sender does and returns the request headers.
func headersFor(t *testing.T, s *webhook.Signer, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	sig, err := s.Sign(id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(webhook.HeaderSignature, sig)
	return h
}

func TestSignatureVerifiesWithReferenceLibrary(t *testing.T) {
	s, err := webhook.NewSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	id, body, err := completedEvent("run_1").Render()
	if err != nil {
		t.Fatal(err)
	}
	h := headersFor(t, s, id, time.Now(), body)
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("reference Verify: %v", err)
	}
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] ^= 1
	if err := wh.Verify(tampered, h); err == nil {
		t.Error("reference Verify accepted a tampered body")
	}
	other, _ := webhook.GenerateSecret()
	wrong, _ := standardwebhooks.NewWebhook(other)
	if err := wrong.Verify(body, h); err == nil {
		t.Error("reference Verify accepted the signature under another secret")
	}
	h.Set(webhook.HeaderID, "msg_other")
	if err := wh.Verify(body, h); err == nil {
		t.Error("reference Verify accepted the signature with another webhook-id")
	}
}

func TestRotationSignsWithEverySecret(t *testing.T) {
	next, err := webhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	s, err := webhook.NewSigner(testSecret + "\n" + next + "\n")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"run.completed"}`)
	h := headersFor(t, s, "msg_1", time.Now(), body)
	if n := len(strings.Fields(h.Get(webhook.HeaderSignature))); n != 2 {
		t.Errorf("webhook-signature has %d signatures, want 2", n)
	}
	for _, secret := range []string{testSecret, next} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("a receiver on one of the two secrets cannot verify: %v", err)
		}
	}
}

func TestNewSignerRefusesBadSecrets(t *testing.T) {
	tests := []struct{ name, secret string }{
		{"empty", "  "},
		{"no prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwOTk0MjY0NTY="},
		{"not base64", "whsec_not*base64"},
		{"too short", "whsec_c2hvcnQ="},
		{"too long", "whsec_" + strings.Repeat("QUFB", 30)},
		{"second one bad", testSecret + " whsec_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.NewSigner(tt.secret)
			if err == nil {
				t.Fatal("NewSigner accepted it")
			}
			if body := strings.TrimPrefix(strings.TrimSpace(tt.secret), "whsec_"); len(body) > 4 && strings.Contains(err.Error(), body) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestSignerPrintsNoKey(t *testing.T) {
	s, err := webhook.NewSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := sprintf(verb, s); strings.Contains(out, "MfKQ") || !strings.Contains(out, "1 secrets") {
			t.Errorf("%s of a Signer = %q", verb, out)
		}
	}
}

func TestGenerateSecret(t *testing.T) {
	a, err := webhook.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := webhook.GenerateSecret()
	if a == b || !strings.HasPrefix(a, webhook.SecretPrefix) {
		t.Errorf("GenerateSecret = %q, %q", a, b)
	}
	if _, err := webhook.NewSigner(a); err != nil {
		t.Errorf("own secret refused: %v", err)
	}
	if _, err := standardwebhooks.NewWebhook(a); err != nil {
		t.Errorf("reference library refuses the secret: %v", err)
	}
}

package webhook_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/webhook"
)

// TestREADMEWithoutASecret: the README's "Without a secret" paragraph gives
// the code's postponement, the default schedule's span and the errors of a
// delivery given up.
func TestREADMEWithoutASecret(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(b), "\nWithout a secret. ")
	if !ok {
		t.Fatal(`README has no "Without a secret." paragraph`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	span := webhook.DefaultSchedule.Span()
	for _, want := range []string{
		fmt.Sprintf("postponed by %d minutes", int(webhook.NoSecretRetry.Minutes())),
		fmt.Sprintf("within %d minutes", int(webhook.NoSecretRetry.Minutes())),
		fmt.Sprintf("(%d h %d min,", int(span.Hours()), int(span.Minutes())%60),
		"`webhook_given_up`", "`error: not_configured`", "`error: secret_unavailable`",
	} {
		if !strings.Contains(para, want) {
			t.Errorf("README's Without a secret paragraph does not say %q", want)
		}
	}
}

// receiverHarness wraps the README's receiver snippet into a program that
// serves one request, given by the environment (RECEIVE_ID, RECEIVE_TS,
// RECEIVE_SIGNATURE, RECEIVE_BODY), through the handler the snippet
// registers, and prints the status it answers.
const receiverHarness = `package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
%s
	req := httptest.NewRequest(http.MethodPost, "/hooks/agentgate", strings.NewReader(os.Getenv("RECEIVE_BODY")))
	req.Header.Set("webhook-id", os.Getenv("RECEIVE_ID"))
	req.Header.Set("webhook-timestamp", os.Getenv("RECEIVE_TS"))
	req.Header.Set("webhook-signature", os.Getenv("RECEIVE_SIGNATURE"))
	rec := httptest.NewRecorder()
	http.DefaultServeMux.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
}

var _ = io.EOF
var _ = log.Fatal
`

// TestREADMEReceiverVerifiesDuringARotation builds the README's receiver
// snippet and runs it on deliveries this package signs: it reads its own
// WEBHOOK_SECRET (not AGENTGATE_WEBHOOK_SECRET, which on Lambda names a
// Secrets Manager secret), and verifies under any of several secrets, as
// a receiver that holds both secrets of a rotation must (tester
// helper-112 P3: the snippet passed the variable's whole value to
// NewWebhook, which takes one secret).
func TestREADMEReceiverVerifiesDuringARotation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "Verify a delivery on the receiving side")
	if !ok {
		t.Fatal("README has no receiver example")
	}
	_, rest, _ = strings.Cut(rest, "```go\n")
	snippet, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README's receiver example has no Go block")
	}
	if strings.Contains(snippet, "AGENTGATE_WEBHOOK_SECRET") {
		t.Error("the receiver reads AGENTGATE_WEBHOOK_SECRET, which on Lambda names a Secrets Manager secret, not its value")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, fmt.Appendf(nil, receiverHarness, snippet), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "receiver")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("the README's receiver does not build: %v\n%s", err, out)
	}
	secret := func(b byte) string {
		return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
	}
	older, newer, other := secret(1), secret(2), secret(3)
	for _, tt := range []struct {
		name, signWith, receiverHolds string
		want                          string
	}{
		{"mid-rotation sender, receiver on the new secret", older + " " + newer, newer, "204"},
		{"mid-rotation sender, receiver on the old secret", older + " " + newer, older, "204"},
		{"rotated sender, receiver holding both", newer, older + " " + newer, "204"},
		{"a secret the receiver does not hold", newer, older + " " + other, "401"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			signer, err := webhook.NewSigner(tt.signWith)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"type":"run.completed","timestamp":"2026-12-05T09:00:00Z","data":{"run_id":"r1","status":"COMPLETED"}}`)
			now := time.Now()
			sig, err := signer.Sign("msg_1", now, body)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+tt.receiverHolds, "RECEIVE_ID=msg_1",
				"RECEIVE_TS="+strconv.FormatInt(now.Unix(), 10), "RECEIVE_SIGNATURE="+sig, "RECEIVE_BODY="+string(body))
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tt.want {
				t.Errorf("the receiver answered %q (%v), want %s", out, err, tt.want)
			}
		})
	}
}

package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/webhook"
)

func TestEnsureSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhook-secret")
	s, created, err := webhook.EnsureSecretFile(path)
	if err != nil || !created || s == nil {
		t.Fatalf("EnsureSecretFile on a missing file = %v, %v, %v; want a new secret", s, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("secret file mode %v, want 0600", mode)
	}
	raw, _ := os.ReadFile(path)
	again, created, err := webhook.EnsureSecretFile(path)
	if err != nil || created {
		t.Fatalf("second EnsureSecretFile = %v, %v; want the existing file loaded", created, err)
	}
	// The file's secret is what a receiver configures.
	wh, err := standardwebhooks.NewWebhook(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify([]byte("{}"), headersFor(t, again, "msg_1", time.Now(), []byte("{}"))); err != nil {
		t.Errorf("receiver with the file's secret cannot verify: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not-a-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := webhook.EnsureSecretFile(bad); err == nil {
		t.Error("EnsureSecretFile accepted a malformed file (and must not overwrite it)")
	}
	if b, _ := os.ReadFile(bad); string(b) != "not-a-secret" {
		t.Error("EnsureSecretFile overwrote an existing file")
	}
}

// fakeSecrets serves one secret value and counts reads; fail makes reads
// fail (with err, when set).
type fakeSecrets struct {
	mu    sync.Mutex
	value string
	fail  bool
	err   error
	reads int
}

func (f *fakeSecrets) SecretString(_ context.Context, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail {
		if f.err != nil {
			return "", f.err
		}
		return "", errors.New("service unavailable")
	}
	return f.value, nil
}

func (f *fakeSecrets) set(value string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.value, f.fail = value, fail
}

func TestSecretsManagerSourceRefreshes(t *testing.T) {
	next, _ := webhook.GenerateSecret()
	fake := &fakeSecrets{value: testSecret}
	now := eventTime
	src := webhook.NewSecretsManagerSource(fake, "agentgate/webhook", func() time.Time { return now })
	ctx := context.Background()
	verifiesWith := func(secret string) bool {
		t.Helper()
		s, err := src.CurrentSigner(ctx)
		if err != nil {
			t.Fatalf("CurrentSigner: %v", err)
		}
		wh, _ := standardwebhooks.NewWebhook(secret)
		return wh.Verify([]byte("{}"), headersFor(t, s, "msg_1", time.Now(), []byte("{}"))) == nil
	}
	if !verifiesWith(testSecret) {
		t.Fatal("signature under the stored secret does not verify")
	}
	fake.set(testSecret+" "+next, false) // rotation starts
	now = now.Add(webhook.SecretRefresh - time.Second)
	if verifiesWith(next) || fake.reads != 1 {
		t.Errorf("the secret was re-read before SecretRefresh (%d reads)", fake.reads)
	}
	now = now.Add(2 * time.Second)
	if !verifiesWith(next) || !verifiesWith(testSecret) || fake.reads != 2 {
		t.Errorf("after SecretRefresh both secrets must sign (%d reads)", fake.reads)
	}
	fake.set("", true) // Secrets Manager fails: the last good secret keeps signing
	now = now.Add(webhook.SecretRefresh + time.Minute)
	if !verifiesWith(next) {
		t.Error("a failed re-read dropped the last good secret at once")
	}
	now = now.Add(2 * time.Hour)
	_, err := src.CurrentSigner(ctx)
	var unavailable *webhook.SecretUnavailableError
	if !errors.As(err, &unavailable) {
		t.Errorf("a secret that could not be re-read for hours: error %v, want a *SecretUnavailableError", err)
	}
}

// errDeniedRead is the error of a GetSecretValue its caller may not make, as
// awscall returns it (wrapped): the service's message names the caller's
// role.
var errDeniedRead = fmt.Errorf("get secret value: %w", &awscall.APIError{Status: 400, Code: "AccessDeniedException",
	Message:   "User: arn:aws:sts::123456789012:assumed-role/agentgate-purge/fn is not authorized to perform: secretsmanager:GetSecretValue",
	RequestID: "4f1c"})

// TestSecretUnavailableSaysWhyWithoutTheDetail: a secret that cannot be
// read or used is a *SecretUnavailableError naming the secret and a short
// reason (the service's error code, not its message; what is wrong with a
// value, never the value), and wraps the error it stands for.
func TestSecretUnavailableSaysWhyWithoutTheDetail(t *testing.T) {
	const id = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/webhook-AbCdEf"
	tests := []struct {
		name   string
		value  string
		err    error
		reason string
		hidden string
	}{
		{"access denied", "", errDeniedRead, "AccessDeniedException", "assumed-role"},
		{"deleted", "", &awscall.APIError{Status: 400, Code: "InvalidRequestException", Message: "marked deleted"}, "InvalidRequestException", "marked deleted"},
		{"throttled", "", &awscall.APIError{Status: 400, Code: "ThrottlingException", Message: "Rate exceeded"}, "ThrottlingException", "Rate exceeded"},
		{"timed out", "", fmt.Errorf("get secret value: %w", context.DeadlineExceeded), "timeout", "get secret value"},
		{"no answer", "", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, "connection", "refused"},
		{"something else", "", errors.New("credentials of profile x"), "read failed", "profile x"},
		{"not a secret", "whsec_tooshort", nil, "invalid value: webhook secret 1: ", "tooshort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeSecrets{value: tt.value, fail: tt.err != nil, err: tt.err}
			_, err := webhook.NewSecretsManagerSource(fake, id, nil).CurrentSigner(context.Background())
			var unavailable *webhook.SecretUnavailableError
			if !errors.As(err, &unavailable) {
				t.Fatalf("error %v (%T), want a *SecretUnavailableError", err, err)
			}
			if unavailable.SecretID != id || !strings.HasPrefix(unavailable.Reason, tt.reason) {
				t.Errorf("secret %q, reason %q; want %q, %q", unavailable.SecretID, unavailable.Reason, id, tt.reason)
			}
			msg := err.Error()
			if !strings.Contains(msg, id) || !strings.Contains(msg, tt.reason) || strings.Contains(msg, tt.hidden) {
				t.Errorf("message %q: want the secret and %q, and not %q", msg, tt.reason, tt.hidden)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
		})
	}
}

func TestSecretsManagerSourceErrorsHideTheValue(t *testing.T) {
	fake := &fakeSecrets{value: "whsec_tooshort"}
	_, err := webhook.NewSecretsManagerSource(fake, "agentgate/webhook", nil).CurrentSigner(context.Background())
	if err == nil || strings.Contains(err.Error(), "tooshort") || !strings.Contains(err.Error(), webhook.EnvSecret) {
		t.Errorf("error = %v; want one naming %s and not the value", err, webhook.EnvSecret)
	}
}

func TestLoadConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := webhook.LoadConfig(env(nil))
	if err != nil || c.Enabled() {
		t.Errorf("no variables: %+v, %v; want webhooks off", c, err)
	}
	c, err = webhook.LoadConfig(env(map[string]string{webhook.EnvSecret: "agentgate/webhook", webhook.EnvAllow: "10.1.0.0/16"}))
	if err != nil || !c.Enabled() || len(c.Policy.Allow) != 1 || c.Policy.AllowHTTP {
		t.Errorf("secret and allow-list: %+v, %v", c, err)
	}
	for name, m := range map[string]map[string]string{
		"bad allow-list":            {webhook.EnvSecret: "s", webhook.EnvAllow: "10.1.2.3/16"},
		"allow-list without secret": {webhook.EnvAllow: "10.1.0.0/16"},
	} {
		if _, err := webhook.LoadConfig(env(m)); err == nil || !strings.Contains(err.Error(), "AGENTGATE_WEBHOOK_") {
			t.Errorf("%s: error %v, want one naming the variable", name, err)
		}
	}
}

package webhook_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

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
// fail.
type fakeSecrets struct {
	mu    sync.Mutex
	value string
	fail  bool
	reads int
}

func (f *fakeSecrets) SecretString(_ context.Context, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail {
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
	if _, err := src.CurrentSigner(ctx); err == nil {
		t.Error("a secret that could not be re-read for hours still signs")
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

package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/webhook"
)

// reachable returns a Sender that may reach the local receiver rc under the
// name hooks.example.com (and only 127.0.0.1 among internal addresses).
func reachable(t *testing.T, rc *receiver, res *fakeResolver) *webhook.Sender {
	t.Helper()
	if res == nil {
		res = resolverFor("hooks.example.com", "127.0.0.1")
	}
	return newSender(t, webhook.SenderConfig{
		Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: res, RootCAs: rc.pool(),
	})
}

func TestDeliveryVerifiesOnTheReceivingSide(t *testing.T) {
	rc := newReceiver(t, testSecret)
	s := reachable(t, rc, nil)
	d := newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com"))

	a := send(t, s, d)
	if a.Outcome != webhook.OutcomeDelivered || a.StatusCode != http.StatusOK || a.Error != "" {
		t.Fatalf("attempt = %+v, want delivered 200", a)
	}
	got := rc.got()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.VerifyOK != nil {
		t.Errorf("reference library Verify on the receiver: %v", r.VerifyOK)
	}
	if !bytes.Equal(r.Body, d.Body) {
		t.Errorf("receiver got body %s, want %s", r.Body, d.Body)
	}
	if id := r.Header.Get(webhook.HeaderID); id != d.ID {
		t.Errorf("webhook-id = %q, want %q", id, d.ID)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

// TestAnIPv4MappedAnswerIsJudgedAsItsIPv4Address: Go's resolver answers
// names from /etc/hosts (localhost, container host aliases) with
// IPv4-mapped IPv6 addresses; an allow-list that names 127.0.0.1 reaches
// a name that resolves to ::ffff:127.0.0.1.
func TestAnIPv4MappedAnswerIsJudgedAsItsIPv4Address(t *testing.T) {
	rc := newReceiver(t, testSecret)
	s := reachable(t, rc, resolverFor("hooks.example.com", "::ffff:127.0.0.1"))
	a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
	if a.Outcome != webhook.OutcomeDelivered || len(rc.got()) != 1 {
		t.Fatalf("attempt = %+v, receiver got %d, want delivered once", a, len(rc.got()))
	}
}

// TestNoAttemptWithoutAReadableSecret: a Sender whose secret cannot be
// read makes no attempt (nothing reaches the receiver) and says so with a
// *SecretUnavailableError, not a failed Attempt, as Ready says beforehand;
// once the secret can be read, the same delivery is sent and verifies.
func TestNoAttemptWithoutAReadableSecret(t *testing.T) {
	rc := newReceiver(t, testSecret)
	fake := &fakeSecrets{value: testSecret, fail: true, err: errDeniedRead}
	s := newSender(t, webhook.SenderConfig{Signer: webhook.NewSecretsManagerSource(fake, "agentgate/webhook", nil),
		Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: resolverFor("hooks.example.com", "127.0.0.1"), RootCAs: rc.pool()})
	d := newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com"))

	var unavailable *webhook.SecretUnavailableError
	if err := s.Ready(context.Background()); !errors.As(err, &unavailable) || unavailable.Reason != "AccessDeniedException" {
		t.Fatalf("Ready = %v; want the *SecretUnavailableError Send gives", err)
	}
	a, err := s.Send(context.Background(), d)
	if !errors.As(err, &unavailable) || a != (webhook.Attempt{}) {
		t.Fatalf("Send = %+v, %v; want no attempt and a *SecretUnavailableError", a, err)
	}
	if unavailable.SecretID != "agentgate/webhook" || unavailable.Reason != "AccessDeniedException" {
		t.Errorf("error names %q, %q; want the secret and the service's error code", unavailable.SecretID, unavailable.Reason)
	}
	if n := len(rc.got()); n != 0 {
		t.Fatalf("receiver got %d requests without a secret, want none", n)
	}

	fake.set(testSecret, false)
	if err := s.Ready(context.Background()); err != nil {
		t.Fatalf("Ready once the secret is readable = %v, want nil", err)
	}
	if a := send(t, s, d); a.Outcome != webhook.OutcomeDelivered {
		t.Fatalf("attempt once the secret is readable = %+v, want delivered", a)
	}
	if got := rc.got(); len(got) != 1 || got[0].VerifyOK != nil {
		t.Fatalf("receiver got %d requests (%+v), want 1 that verifies", len(got), got)
	}
}

func TestReceiverFailingTwiceGetsTheThirdWithTheSameID(t *testing.T) {
	rc := newReceiver(t, testSecret, http.StatusInternalServerError, http.StatusServiceUnavailable)
	s := reachable(t, rc, nil)
	d := newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com"))

	var codes []int
	for d.State == webhook.DeliveryPending {
		a := send(t, s, d)
		codes = append(codes, a.StatusCode)
		a.At = d.NextAttemptAt // the sweep's clock: the attempt ran when due
		d.Record(a, webhook.DefaultSchedule)
	}
	if d.State != webhook.DeliveryDelivered || d.Attempts != 3 {
		t.Fatalf("delivery %s after %d attempts (codes %v), want delivered after 3", d.State, d.Attempts, codes)
	}
	got := rc.got()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	for i, r := range got {
		if r.VerifyOK != nil {
			t.Errorf("request %d: reference Verify: %v", i+1, r.VerifyOK)
		}
		if id := r.Header.Get(webhook.HeaderID); id != d.ID {
			t.Errorf("request %d: webhook-id %q, want %q on every attempt", i+1, id, d.ID)
		}
		if !bytes.Equal(r.Body, got[0].Body) {
			t.Errorf("request %d: body differs from the first attempt's", i+1)
		}
	}
}

// TestRefusedTargetsReceiveNothing points deliveries at a live receiver on
// 127.0.0.1 (or at internal addresses) by every route a caller could try;
// none may reach it.
func TestRefusedTargetsReceiveNothing(t *testing.T) {
	rc := newReceiver(t, testSecret)
	port := rc.port()
	tests := []struct {
		name     string
		policy   webhook.Policy
		resolver *fakeResolver
		url      string
		class    string
	}{
		{"loopback literal", webhook.Policy{}, nil, "https://127.0.0.1:" + port + "/", webhook.ErrClassRefusedURL},
		{"ipv6 loopback literal", webhook.Policy{}, nil, "https://[::1]:" + port + "/", webhook.ErrClassRefusedURL},
		{"ipv4-mapped literal", webhook.Policy{}, nil, "https://[::ffff:127.0.0.1]:" + port + "/", webhook.ErrClassRefusedURL},
		{"decimal literal", webhook.Policy{}, resolverFor("2130706433", "127.0.0.1"), "https://2130706433:" + port + "/", webhook.ErrClassRefusedURL},
		{"private literal", webhook.Policy{}, nil, "https://10.0.0.7:" + port + "/", webhook.ErrClassRefusedURL},
		{"metadata literal", webhook.Policy{AllowHTTP: true}, nil, "http://169.254.169.254/latest/meta-data/", webhook.ErrClassRefusedURL},
		{"plain http", webhook.Policy{Allow: loopbackOnly}, resolverFor("hooks.example.com", "127.0.0.1"), "http://hooks.example.com:" + port + "/", webhook.ErrClassRefusedURL},
		{"localhost", webhook.Policy{}, resolverFor("localhost", "127.0.0.1", "localhost", "::1"), "https://localhost:" + port + "/", webhook.ErrClassRefusedAddress},
		{"name resolving to loopback", webhook.Policy{}, resolverFor("hooks.example.com", "127.0.0.1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to ipv4-mapped loopback", webhook.Policy{}, resolverFor("hooks.example.com", "::ffff:127.0.0.1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to nat64 loopback", webhook.Policy{}, resolverFor("hooks.example.com", "64:ff9b::7f00:1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to private", webhook.Policy{}, resolverFor("hooks.example.com", "10.0.0.7"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to CGNAT", webhook.Policy{}, resolverFor("hooks.example.com", "100.64.1.1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to link-local", webhook.Policy{}, resolverFor("hooks.example.com", "fe80::1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to IMDS", webhook.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}, resolverFor("hooks.example.com", "169.254.169.254"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to IMDS over IPv6", webhook.Policy{}, resolverFor("hooks.example.com", "fd00:ec2::254"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to unique local", webhook.Policy{}, resolverFor("hooks.example.com", "fd12::1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to unspecified", webhook.Policy{}, resolverFor("hooks.example.com", "0.0.0.0"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"name resolving to multicast", webhook.Policy{}, resolverFor("hooks.example.com", "224.0.0.1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
		{"allow-list names another address", webhook.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}, resolverFor("hooks.example.com", "127.0.0.1"), rc.url("hooks.example.com"), webhook.ErrClassRefusedAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.resolver
			if res == nil {
				res = resolverFor()
			}
			s := newSender(t, webhook.SenderConfig{Policy: tt.policy, Resolver: res, RootCAs: rc.pool()})
			a := send(t, s, newDelivery(t, completedEvent("run_1"), tt.url))
			if a.Outcome != webhook.OutcomeRefused || a.Error != tt.class {
				t.Errorf("attempt = %+v, want refused (%s)", a, tt.class)
			}
			if n := len(rc.got()); n != 0 {
				t.Fatalf("the receiver got %d requests, want none", n)
			}
		})
	}
}

func TestMixedAnswerDialsOnlyAcceptedAddresses(t *testing.T) {
	rc := newReceiver(t, testSecret)
	s := reachable(t, rc, resolverFor("hooks.example.com", "10.0.0.7", "hooks.example.com", "127.0.0.1"))
	if a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com"))); a.Outcome != webhook.OutcomeDelivered {
		t.Fatalf("attempt = %+v, want delivered to the allow-listed address", a)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			target := newReceiver(t, testSecret)
			rc := newReceiver(t, testSecret)
			rc.handler = func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.url("other.example.com"), code)
			}
			s := reachable(t, rc, resolverFor("hooks.example.com", "127.0.0.1", "other.example.com", "127.0.0.1"))
			a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
			if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassRedirect || a.StatusCode != code {
				t.Errorf("attempt = %+v, want failed redirect %d", a, code)
			}
			if n := len(target.got()); n != 0 {
				t.Errorf("redirect target got %d requests, want none", n)
			}
		})
	}
}

func TestAttemptOutcomes(t *testing.T) {
	t.Run("410 gone", func(t *testing.T) {
		rc := newReceiver(t, testSecret, http.StatusGone)
		a := send(t, reachable(t, rc, nil), newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeGone || a.StatusCode != http.StatusGone {
			t.Errorf("attempt = %+v, want gone", a)
		}
	})
	t.Run("400 is retried", func(t *testing.T) {
		rc := newReceiver(t, testSecret, http.StatusBadRequest)
		a := send(t, reachable(t, rc, nil), newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassStatus || a.StatusCode != http.StatusBadRequest {
			t.Errorf("attempt = %+v, want failed http_status 400", a)
		}
	})
	t.Run("unknown host", func(t *testing.T) {
		rc := newReceiver(t, testSecret)
		a := send(t, reachable(t, rc, resolverFor()), newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassDNS {
			t.Errorf("attempt = %+v, want failed dns", a)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		rc := newReceiver(t, testSecret)
		s := newSender(t, webhook.SenderConfig{Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: resolverFor("hooks.example.com", "127.0.0.1")})
		a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassTLS {
			t.Errorf("attempt = %+v, want failed tls", a)
		}
		if n := len(rc.got()); n != 0 {
			t.Errorf("receiver with an untrusted certificate got %d requests", n)
		}
	})
	t.Run("certificate for another name", func(t *testing.T) {
		rc := newReceiver(t, testSecret)
		s := reachable(t, rc, resolverFor("hooks.example.org", "127.0.0.1"))
		a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.org")))
		if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassTLS {
			t.Errorf("attempt = %+v, want failed tls", a)
		}
	})
	t.Run("receiver that never answers", func(t *testing.T) {
		rc := newReceiver(t, testSecret)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		rc.handler = func(w http.ResponseWriter, r *http.Request) { <-release }
		s := newSender(t, webhook.SenderConfig{
			Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: resolverFor("hooks.example.com", "127.0.0.1"),
			RootCAs: rc.pool(), Timeout: 200 * time.Millisecond,
		})
		a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeFailed || a.Error != webhook.ErrClassTimeout {
			t.Errorf("attempt = %+v, want failed timeout", a)
		}
	})
	t.Run("endless answer is not read", func(t *testing.T) {
		rc := newReceiver(t, testSecret)
		rc.handler = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
		// With a generous timeout: reading the whole answer would end in a
		// timeout instead of a delivery.
		s := newSender(t, webhook.SenderConfig{
			Policy: webhook.Policy{Allow: loopbackOnly}, Resolver: resolverFor("hooks.example.com", "127.0.0.1"),
			RootCAs: rc.pool(), Timeout: time.Minute,
		})
		a := send(t, s, newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
		if a.Outcome != webhook.OutcomeDelivered {
			t.Errorf("attempt = %+v, want delivered", a)
		}
	})
}

func TestSenderIgnoresProxyEnvironment(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	rc := newReceiver(t, testSecret)
	a := send(t, reachable(t, rc, nil), newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")))
	if a.Outcome != webhook.OutcomeDelivered {
		t.Errorf("attempt = %+v, want delivered directly, not through the proxy", a)
	}
}

func TestAttemptRecordHoldsNoSecretOrAddress(t *testing.T) {
	rc := newReceiver(t, testSecret, http.StatusInternalServerError)
	d := newDelivery(t, completedEvent("run_1"), rc.url("hooks.example.com")+"?token=caller-secret")
	a := send(t, reachable(t, rc, nil), d)
	d.Record(a, webhook.DefaultSchedule)
	out := sprintf("%+v", *d.Last)
	for _, leak := range []string{"127.0.0.1", "caller-secret", "hooks.example.com", strings.TrimPrefix(testSecret, "whsec_")} {
		if strings.Contains(out, leak) {
			t.Errorf("attempt record %s contains %q", out, leak)
		}
	}
}

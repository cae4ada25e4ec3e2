package webhook_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// testSecret is a fixed whsec_ secret (32 bytes of key).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwOTk0MjY0NTY="

// fakeResolver answers from a table and counts lookups; unknown names do
// not resolve.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups int
}

func resolverFor(pairs ...string) *fakeResolver {
	r := &fakeResolver{answers: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		r.answers[pairs[i]] = append(r.answers[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// received is one request as the receiver saw it, with the verdict of the
// reference library's Verify.
type received struct {
	Header   http.Header
	Body     []byte
	VerifyOK error
}

// receiver is a TLS server that verifies every request with the Standard
// Webhooks reference library, records it, and answers with the next status
// of its script (200 once the script is used up).
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	wh  *standardwebhooks.Webhook

	mu       sync.Mutex
	requests []received
	statuses []int
	handler  http.HandlerFunc // replaces the scripted answer when set
}

func newReceiver(t *testing.T, secret string, statuses ...int) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("reference library refuses the secret: %v", err)
	}
	rc := &receiver{t: t, wh: wh, statuses: statuses}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.requests = append(rc.requests, received{Header: r.Header.Clone(), Body: body, VerifyOK: rc.wh.Verify(body, r.Header)})
	status := http.StatusOK
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	h := rc.handler
	rc.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	w.WriteHeader(status)
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.requests...)
}

// port is the receiver's port.
func (rc *receiver) port() string {
	u, _ := url.Parse(rc.srv.URL)
	return u.Port()
}

// url is the receiver's URL under a host name (the test certificate covers
// *.example.com).
func (rc *receiver) url(host string) string {
	return "https://" + host + ":" + rc.port() + "/hooks/agentgate"
}

func (rc *receiver) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.srv.Certificate())
	return p
}

// loopbackOnly is the allow-list that lets tests reach their local
// receivers, and nothing else internal.
var loopbackOnly = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func newSender(t *testing.T, cfg webhook.SenderConfig) *webhook.Sender {
	t.Helper()
	if cfg.Signer == nil {
		s, err := webhook.NewSigner(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Signer = s
	}
	s, err := webhook.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// send makes one attempt of d with s; it fails the test when s could not
// make one (its signing secret could not be had).
func send(t *testing.T, s *webhook.Sender, d *webhook.Delivery) webhook.Attempt {
	t.Helper()
	a, err := s.Send(context.Background(), d)
	if err != nil {
		t.Fatalf("Send: no attempt made: %v", err)
	}
	return a
}

var eventTime = time.Date(2026, 12, 2, 19, 30, 0, 0, time.UTC)

func completedEvent(runID string) webhook.Event {
	return webhook.Event{
		Type: webhook.EventCompleted,
		At:   eventTime,
		Run: webhook.RunData{
			RunID: runID, Status: runs.StatusCompleted, Reason: loop.ReasonCompleted,
			Links: map[string]string{"self": "/runs/" + runID, "events": "/runs/" + runID + "/events"},
		},
	}
}

func newDelivery(t *testing.T, e webhook.Event, target string) *webhook.Delivery {
	t.Helper()
	d, err := webhook.NewDelivery(e, target)
	if err != nil {
		t.Fatal(err)
	}
	return &d
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

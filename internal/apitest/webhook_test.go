package apitest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// receiver verifies every delivery with the Standard Webhooks reference
// library (not agentgate's signing code) and fails the first `fail` ones.
// Every delivery must also be what openapi.yaml's webhooks entry of its
// type describes (headers and body); one that is not fails the test.
type receiver struct {
	t      *testing.T
	hook   *standardwebhooks.Webhook
	fail   int32
	mu     sync.Mutex
	got    []delivered
	served atomic.Int32
}

type delivered struct {
	ID       string
	Verified bool
	Status   int
	Payload  webhook.Payload
	Body     string
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := rv.served.Add(1)
	body, _ := io.ReadAll(r.Body)
	d := delivered{ID: r.Header.Get("webhook-id"), Body: string(body), Status: http.StatusNoContent}
	d.Verified = rv.hook.Verify(body, r.Header) == nil
	_ = json.Unmarshal(body, &d.Payload)
	if err := checkWebhook(r.Context(), string(d.Payload.Type), r.Header, body); err != nil {
		rv.t.Errorf("openapi.yaml: %v", err)
	}
	if n <= rv.fail {
		d.Status = http.StatusInternalServerError
	}
	rv.mu.Lock()
	rv.got = append(rv.got, d)
	rv.mu.Unlock()
	w.WriteHeader(d.Status)
}

// checkWebhook validates a delivery against the current spec's webhooks.
func checkWebhook(ctx context.Context, eventType string, header http.Header, body []byte) error {
	doc, err := apispec.Current()
	if err != nil {
		return err
	}
	return apispec.CheckWebhook(ctx, doc, eventType, header, body)
}

func (rv *receiver) deliveries() []delivered {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]delivered(nil), rv.got...)
}

func newSecret(t *testing.T) (string, *webhook.Signer, *standardwebhooks.Webhook) {
	t.Helper()
	secret, err := webhook.GenerateSecret()
	require.NoError(t, err)
	signer, err := webhook.NewSigner(secret)
	require.NoError(t, err)
	hook, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return secret, signer, hook
}

func whCall(t *testing.T, s *apitest.Server, method, path, who, body string) (int, map[string]any) {
	t.Helper()
	ctype := ""
	if body != "" {
		ctype = "application/json"
	}
	r := s.As(t, who).Call(t, method, path, ctype, body)
	return r.Status, r.JSON()
}

func sweep(t *testing.T, s *apitest.Server) {
	t.Helper()
	_, err := s.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
}

func attemptEvents(t *testing.T, s *apitest.Server, id string) []map[string]any {
	t.Helper()
	evs, err := s.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	var out []map[string]any
	for _, e := range evs {
		if e.Type == runs.EventWebhookAttempt {
			var m map[string]any
			require.NoError(t, json.Unmarshal(e.Data, &m))
			out = append(out, m)
		}
	}
	return out
}

func startRun(t *testing.T, s *apitest.Server, url string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"prompt": "Raise the Team plan to 12 EUR", "approvers": []string{"bob"}, "webhook_url": url})
	return whCall(t, s, "POST", "/runs", "alice", string(b))
}

// TestWebhookRetriesWithTheSameID: a receiver that fails the first two
// deliveries gets the third, with the same webhook-id, verified with the
// reference library; every attempt is an event; the sweep follows the
// schedule on a fake clock; a completed run is told once more.
func TestWebhookRetriesWithTheSameID(t *testing.T) { runWebhookRetriesWithTheSameID(t, nil) }

func runWebhookRetriesWithTheSameID(t *testing.T, store func(*apitest.Options)) {
	_, signer, hook := newSecret(t)
	rv := &receiver{t: t, hook: hook, fail: 2}
	hs := httptest.NewServer(rv)
	defer hs.Close()
	clock := clocktest.New(time.Now().UTC()) // the application's clock; the sweep's schedule follows it
	s := startOn(t, store, apitest.Options{Now: clock.Now, Webhooks: &app.Webhooks{Signer: signer,
		Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}})

	code, run := startRun(t, s, hs.URL+"/hook")
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	s.App.Dispatcher.Wait()
	code, run = whCall(t, s, "GET", "/runs/"+id, "alice", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "WAITING_FOR_APPROVAL", run["status"])
	assert.Equal(t, hs.URL+"/hook", run["webhook"].(map[string]any)["url"])
	assert.Equal(t, float64(1), run["webhook"].(map[string]any)["pending_deliveries"])
	assert.Empty(t, rv.deliveries(), "nothing is sent before a sweep")

	sweep(t, s) // attempt 1: 500
	sweep(t, s) // not due again yet
	require.Len(t, rv.deliveries(), 1, "a failed delivery waits for its backoff")
	clock.Advance(2 * time.Minute)
	sweep(t, s) // attempt 2: 500
	require.Len(t, rv.deliveries(), 2)
	clock.Advance(5 * time.Minute)
	sweep(t, s) // attempt 3: delivered
	clock.Advance(time.Hour)
	sweep(t, s) // nothing left
	got := rv.deliveries()
	require.Len(t, got, 3)
	for i, d := range got {
		assert.True(t, d.Verified, "delivery %d verifies with the reference library", i+1)
		assert.Equal(t, got[0].ID, d.ID, "delivery %d has the same webhook-id", i+1)
		assert.Equal(t, got[0].Body, d.Body, "delivery %d has the same body", i+1)
	}
	p := got[0].Payload
	assert.Equal(t, webhook.EventWaitingForApproval, p.Type)
	assert.Equal(t, id, p.Data.RunID)
	assert.Equal(t, runs.StatusWaiting, p.Data.Status)
	assert.NotEmpty(t, p.Data.SuspensionID)
	assert.Equal(t, "/runs/"+id+"/decision", p.Data.Links["decision"])
	for _, secret := range []string{"Raise the Team plan", "12 EUR", "pricing.md", "Bearer", "token"} {
		assert.NotContains(t, got[0].Body, secret, "the payload carries no prompt, tool argument or token")
	}
	atts := attemptEvents(t, s, id)
	require.Len(t, atts, 3)
	for i, want := range []float64{500, 500, 204} {
		a := atts[i]["attempt"].(map[string]any)
		assert.Equal(t, want, a["status_code"], "attempt %d status", i+1)
		assert.Equal(t, float64(i+1), a["attempt"])
		assert.Contains(t, a, "latency_ms")
		assert.Equal(t, got[0].ID, atts[i]["id"])
	}
	assert.Equal(t, "delivered", atts[2]["state"])

	code, run = whCall(t, s, "GET", "/runs/"+id, "bob", "")
	require.Equal(t, http.StatusOK, code)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	code, _ = whCall(t, s, "POST", "/runs/"+id+"/decision", "bob", `{"turn_digest":"`+digest+`","action":"approve"}`)
	require.Equal(t, http.StatusAccepted, code)
	s.App.Dispatcher.Wait()
	sweep(t, s)
	got = rv.deliveries()
	require.Len(t, got, 4)
	last := got[3]
	assert.True(t, last.Verified)
	assert.Equal(t, webhook.EventCompleted, last.Payload.Type)
	assert.Equal(t, runs.StatusCompleted, last.Payload.Data.Status)
	assert.Equal(t, "completed", string(last.Payload.Data.Reason))
	assert.NotEqual(t, got[0].ID, last.ID, "another event, another webhook-id")
	code, run = whCall(t, s, "GET", "/runs/"+id, "alice", "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, float64(0), run["webhook"].(map[string]any)["pending_deliveries"])
}

// switchingResolver answers a public address first (the submit-time check)
// and loopback afterwards (DNS rebinding at delivery time).
type switchingResolver struct{ calls atomic.Int32 }

func (r *switchingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if r.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestWebhookRefusedTargets: loopback, private, metadata and link-local
// targets are refused at submit (422, no run), a target that rebinds to
// loopback after the submit check and a target that redirects never make
// the refused receiver see a request.
func TestWebhookRefusedTargets(t *testing.T) { runWebhookRefusedTargets(t, nil) }

func runWebhookRefusedTargets(t *testing.T, store func(*apitest.Options)) {
	_, signer, hook := newSecret(t)
	inside := &receiver{t: t, hook: hook}
	hs := httptest.NewServer(inside)
	defer hs.Close()
	port := hs.Listener.Addr().(*net.TCPAddr).Port
	clock := clocktest.New(time.Now().UTC()) // the application's clock; the sweep's schedule follows it
	res := &switchingResolver{}
	s := startOn(t, store, apitest.Options{Now: clock.Now, Webhooks: &app.Webhooks{Signer: signer, Resolver: res,
		Policy: webhook.Policy{AllowHTTP: true}}})

	for _, url := range []string{
		hs.URL + "/hook", // 127.0.0.1 literal
		"http://localhost:" + strconv.Itoa(port) + "/hook",
		"https://10.1.2.3/hook",
		"https://192.168.1.1/hook",
		"https://169.254.169.254/latest/meta-data/",
		"https://[::1]/hook",
		"https://[fd00:ec2::254]/",
		"https://2130706433/",
		"ftp://hooks.example.com/",
		"https://user:pw@hooks.example.com/",
	} {
		code, body := startRun(t, s, url)
		assert.Equal(t, http.StatusUnprocessableEntity, code, "%s: %v", url, body)
		if e, ok := body["error"].(map[string]any); assert.True(t, ok, "%s: %v", url, body) {
			assert.Regexp(t, `^webhook_url: \S`, e["message"], "%s: the refusal's own reason", url)
			assert.NotContains(t, e["message"], "target refused", "%s: the reason, not the error's Go text", url)
		}
	}
	b, _ := json.Marshal(map[string]any{"prompt": "x", "approvers": []string{"bob"}, "webhook_url": "https://hooks.example.com/", "webhook_events": []string{"run.nope"}})
	code, _ := whCall(t, s, "POST", "/runs", "alice", string(b))
	assert.Equal(t, http.StatusUnprocessableEntity, code, "unknown event type")
	// A type listed twice is refused as a duplicate approver is, not
	// stored once: what is stored is what the body said.
	b, _ = json.Marshal(map[string]any{"prompt": "x", "approvers": []string{"bob"}, "webhook_url": "https://hooks.example.com/", "webhook_events": []string{"run.completed", "run.completed"}})
	code, out := whCall(t, s, "POST", "/runs", "alice", string(b))
	assert.Equal(t, http.StatusUnprocessableEntity, code, "event type listed twice: %v", out)
	if e, ok := out["error"].(map[string]any); assert.True(t, ok, "%v", out) {
		assert.Equal(t, `webhook_events[1]: "run.completed" is listed twice`, e["message"])
	}

	// Rebinding: public at submit, loopback at delivery.
	code, run := startRun(t, s, "http://rebind.example.com:"+strconv.Itoa(port)+"/hook")
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	s.App.Dispatcher.Wait()
	sweep(t, s)
	clock.Advance(48 * time.Hour)
	sweep(t, s)
	atts := attemptEvents(t, s, id)
	require.NotEmpty(t, atts)
	a := atts[0]["attempt"].(map[string]any)
	assert.Equal(t, "refused", a["outcome"])
	assert.Equal(t, "refused_address", a["error"])
	assert.Equal(t, "failed", atts[0]["state"], "a refused target is given up at once")
	assert.Zero(t, inside.served.Load(), "the loopback receiver never got a request")
}

// TestWebhookRedirectNotFollowed: a receiver answering 307 to another
// receiver gets the attempt recorded as a redirect; the other never gets a
// request.
func TestWebhookRedirectNotFollowed(t *testing.T) { runWebhookRedirectNotFollowed(t, nil) }

func runWebhookRedirectNotFollowed(t *testing.T, store func(*apitest.Options)) {
	_, signer, hook := newSecret(t)
	target := &receiver{t: t, hook: hook}
	ts := httptest.NewServer(target)
	defer ts.Close()
	var redirects atomic.Int32
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, ts.URL+"/hook", http.StatusTemporaryRedirect)
	}))
	defer rs.Close()
	clock := clocktest.New(time.Now().UTC()) // the application's clock; the sweep's schedule follows it
	s := startOn(t, store, apitest.Options{Now: clock.Now, Webhooks: &app.Webhooks{Signer: signer,
		Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}})
	code, run := startRun(t, s, rs.URL+"/hook")
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	s.App.Dispatcher.Wait()
	sweep(t, s)
	clock.Advance(2 * time.Minute)
	sweep(t, s)
	atts := attemptEvents(t, s, id)
	require.Len(t, atts, 2)
	a := atts[0]["attempt"].(map[string]any)
	assert.Equal(t, float64(307), a["status_code"])
	assert.Equal(t, "redirect", a["error"])
	assert.Equal(t, "pending", atts[1]["state"], "a redirect is retried, never followed")
	assert.Equal(t, int32(2), redirects.Load())
	assert.Zero(t, target.served.Load(), "the redirect target never got a request")
}

// startOn starts a server with o, on the store store sets (nil: embedded).
func startOn(t *testing.T, store func(*apitest.Options), o apitest.Options) *apitest.Server {
	t.Helper()
	if store != nil {
		store(&o)
	}
	return apitest.Start(t, o)
}

// TestWebhookSweepIsBoundedByTime: one sweep makes every due attempt (more
// than the 10 a sweep was once capped at) while its delivery budget lasts;
// receivers that answer slowly use the budget up and leave the rest, marked
// more, to the next sweep, where nothing is sent twice. The slow part
// sends to one run at a time, as each answer moves the clock all the runs
// share (the budget under runs sent to at the same time:
// service.TestDeliveryBudgetStopsNewAttempts).
func TestWebhookSweepIsBoundedByTime(t *testing.T) {
	_, signer, hook := newSecret(t)
	rv := &receiver{t: t, hook: hook}
	var slow atomic.Bool
	clock := clocktest.New(time.Now().UTC())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			clock.Advance(30 * time.Second) // each answer takes half a minute of the sweep's clock
		}
		rv.ServeHTTP(w, r)
	}))
	defer hs.Close()
	s := startOn(t, nil, apitest.Options{Now: clock.Now, Webhooks: &app.Webhooks{Signer: signer,
		Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}})
	start := func(n int) {
		for range n {
			code, run := startRun(t, s, hs.URL+"/hook")
			require.Equal(t, http.StatusAccepted, code, "%v", run)
		}
		s.App.Dispatcher.Wait()
	}

	start(25)
	sum, err := s.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 25, sum.Deliveries, "every due attempt in one sweep")
	assert.False(t, sum.More)
	require.Len(t, rv.deliveries(), 25)

	// 2 minutes of budget, attempts of up to 15 s: at 30 s an answer, the
	// attempts begun at 0, 30, 60 and 90 s fit, the fifth would not.
	start(6)
	slow.Store(true)
	s.App.Sweeper.DeliveryConcurrency = 1
	sum, err = s.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 4, sum.Deliveries, "the budget bounds a sweep of slow answers")
	assert.True(t, sum.More, "due attempts are left")
	slow.Store(false)
	sum, err = s.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Deliveries, "the next sweep makes the rest")
	ids := map[string]int{}
	for _, d := range rv.deliveries() {
		ids[d.ID]++
		assert.True(t, d.Verified)
	}
	assert.Len(t, ids, 31, "31 events, each delivered once")
}

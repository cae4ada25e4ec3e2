package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
)

// loseFirstAnswer is a transport that delivers every request but drops
// the answer to the first POST: the server created the run, the caller
// sees a failure (the timeout of the outside tester's finding).
type loseFirstAnswer struct {
	base http.RoundTripper
	lost atomic.Bool
}

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && l.lost.CompareAndSwap(false, true) {
		_ = resp.Body.Close()
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return resp, err
}

// storedRuns counts the runs s's store holds (every run has a due time).
func storedRuns(t *testing.T, s *apitest.Server) int {
	t.Helper()
	due, _, err := s.App.Store.Due(t.Context(), time.Now().Add(100*365*24*time.Hour), 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(due)
}

// TestStartRunLostAnswerStartsOneRun: a start whose answer is lost is sent
// again under the same key and answered with the run the first attempt
// created; one run exists. Without the key (StartRun before it) the
// caller got the error, and a retry of its own started a second run.
func TestStartRunLostAnswerStartsOneRun(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	tr := &loseFirstAnswer{base: s.Client(t).Transport}
	alice, err := client.New(s.URL, client.WithBearerToken(s.Token("alice")), client.WithHTTPClient(&http.Client{Transport: tr}),
		client.WithPollInterval(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	run, err := alice.StartRun(ctx(t), client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"bob"}})
	if err != nil {
		t.Fatalf("a start whose first answer was lost: %v", err)
	}
	if !tr.lost.Load() {
		t.Fatal("no answer was lost: the test tested nothing")
	}
	if n := storedRuns(t, s); n != 1 {
		t.Errorf("%d runs stored, want 1 (run %s)", n, run.ID)
	}

	// A caller's own key: the same start again (another process, after a
	// crash) gets the same run; another request under it is refused.
	key := client.NewIdempotencyKey()
	req := client.StartRunRequest{Prompt: "file the report", Approvers: []string{"bob"}}
	first, err := alice.StartRun(ctx(t), req, client.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	again, err := newClient(t, s, "alice").StartRun(ctx(t), req, client.WithIdempotencyKey(key))
	if err != nil || again.ID != first.ID {
		t.Fatalf("the same start under key %s: run %v, %v; want run %s", key, again, err, first.ID)
	}
	req.Prompt = "file another report"
	_, err = alice.StartRun(ctx(t), req, client.WithIdempotencyKey(key))
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusUnprocessableEntity || e.Code != client.CodeUnprocessable {
		t.Fatalf("another request under the key: %v, want 422 unprocessable", err)
	}
	if n := storedRuns(t, s); n != 2 {
		t.Errorf("%d runs stored, want 2", n)
	}
}

// TestStartRunRetries: StartRun sends every attempt with one key and the
// same body; it retries what may have reached the server (5xx, 429, 409,
// no answer) up to 4 attempts, never a refusal (4xx), and stops when ctx
// ends.
func TestStartRunRetries(t *testing.T) {
	type sent struct{ key, body string }
	var (
		mu       sync.Mutex
		requests []sent
		answers  []int // status per attempt; 0: drop the connection
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		requests = append(requests, sent{r.Header.Get("Idempotency-Key"), string(b)})
		status := http.StatusAccepted
		if n := len(requests); n <= len(answers) {
			status = answers[n-1]
		}
		mu.Unlock()
		if status == 0 {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_ = conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status == http.StatusAccepted {
			_, _ = io.WriteString(w, `{"id":"r1","status":"QUEUED"}`)
		} else {
			_, _ = io.WriteString(w, `{"error":{"code":"x","message":"no"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	req := client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}, Metadata: map[string]string{"a": "1", "b": "2", "c": "3"}}
	tests := []struct {
		name     string
		answers  []int
		opts     []client.StartOption
		attempts int
		status   int // of the error; 0: none
		key      string
	}{
		{"answered at once", nil, nil, 1, 0, ""},
		{"lost, throttled, failed, then answered", []int{0, 429, 503}, nil, 4, 0, ""},
		{"a concurrent start under the key", []int{409}, nil, 2, 0, ""},
		{"gives up after 4 attempts", []int{500, 500, 500, 500, 500}, nil, 4, 500, ""},
		{"a refusal is not retried", []int{422}, nil, 1, 422, ""},
		{"the caller's key", []int{502}, []client.StartOption{client.WithIdempotencyKey("order-42")}, 2, 0, "order-42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			requests, answers = nil, tt.answers
			mu.Unlock()
			r, err := c.StartRun(ctx(t), req, tt.opts...)
			var e *client.Error
			switch {
			case tt.status == 0 && (err != nil || r.ID != "r1"):
				t.Fatalf("got %+v, %v; want run r1", r, err)
			case tt.status != 0 && (!errors.As(err, &e) || e.StatusCode != tt.status):
				t.Fatalf("got %v, want the status %d", err, tt.status)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(requests) != tt.attempts {
				t.Fatalf("%d attempts, want %d", len(requests), tt.attempts)
			}
			for i, s := range requests {
				if s != requests[0] {
					t.Errorf("attempt %d sent %+v, the first %+v: want one key and body", i+1, s, requests[0])
				}
			}
			if tt.key != "" && requests[0].key != tt.key {
				t.Errorf("sent key %q, want the caller's %q", requests[0].key, tt.key)
			}
			if tt.key == "" && !uuid.MatchString(requests[0].key) {
				t.Errorf("sent key %q, want a random UUID", requests[0].key)
			}
		})
	}

	// Two starts without a key are two runs: each has its own key.
	mu.Lock()
	requests, answers = nil, nil
	mu.Unlock()
	for range 2 {
		if _, err := c.StartRun(ctx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if requests[0].key == requests[1].key {
		t.Errorf("two starts sent one key %q", requests[0].key)
	}
	mu.Unlock()

	// A server that keeps failing: ctx bounds the retries.
	mu.Lock()
	requests, answers = nil, []int{503, 503, 503, 503}
	mu.Unlock()
	short := clocktest.NewDeadline() // its deadline passes once the first answer is read
	slow, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Hour, time.Hour),
		client.WithHTTPClient(expireAfter(short, 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = slow.StartRun(short, req)
	mu.Lock()
	attempts := len(requests)
	mu.Unlock()
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 503 || attempts != 1 {
		t.Fatalf("a start whose ctx ends while it waits to retry: %v after %d attempts; want the 503 after 1", err, attempts)
	}
}

// TestStartRunHonoursRetryAfter: a 429 or 503 that says when to come back
// (Retry-After, in seconds or as an HTTP date) is not sent again before
// then; one that asks for longer than the caller's ctx has left, or for
// longer than StartRun waits (a minute), is returned at once, its
// RetryAfter set, rather than retried early or waited for in vain.
func TestStartRunHonoursRetryAfter(t *testing.T) {
	var (
		mu         sync.Mutex
		attempts   int
		retryAfter []string // per attempt; "" once the list ends: 202
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n <= len(retryAfter) {
			w.Header().Set("Retry-After", retryAfter[n-1])
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"message":"Too Many Requests"}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"r1","status":"QUEUED"}`)
	}))
	t.Cleanup(srv.Close)
	req := client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}}
	tests := []struct {
		name       string
		retryAfter []string
		timeout    time.Duration // of ctx; 0: none
		attempts   int
		minPause   time.Duration // of the first pause; 0: no pause
		maxPause   time.Duration
		status     int // of the error; 0: none
		errAfter   time.Duration
	}{
		{"seconds", []string{"2"}, 0, 2, 2 * time.Second, 2 * time.Second, 0, 0},
		{"an HTTP date", []string{time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}, 0, 2, 20 * time.Second, 30 * time.Second, 0, 0}, // 20 s: the date has whole seconds, and the machine may stall
		{"past ctx's deadline", []string{"30"}, 10 * time.Second, 1, 0, 0, 429, 30 * time.Second},
		{"longer than StartRun waits", []string{"3600"}, 0, 1, 0, 0, 429, time.Hour},
		{"shorter than the backoff", []string{"0"}, 0, 2, time.Millisecond / 2, time.Millisecond, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			var pauses []time.Duration
			client.RecordPauses(c, &pauses)
			mu.Lock()
			attempts, retryAfter = 0, tt.retryAfter
			mu.Unlock()
			cx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				cx, cancel = context.WithTimeout(cx, tt.timeout)
				defer cancel()
			}
			r, err := c.StartRun(cx, req)
			var e *client.Error
			switch {
			case tt.status == 0 && (err != nil || r.ID != "r1"):
				t.Fatalf("got %+v, %v; want run r1", r, err)
			case tt.status != 0 && (!errors.As(err, &e) || e.StatusCode != tt.status || e.RetryAfter != tt.errAfter):
				t.Fatalf("got %v (%+v), want the %d with RetryAfter %v", err, e, tt.status, tt.errAfter)
			case tt.status != 0 && cx.Err() != nil:
				t.Fatalf("StartRun returned when ctx had ended (%v), want at once", cx.Err())
			}
			mu.Lock()
			n := attempts
			mu.Unlock()
			if n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			switch {
			case tt.minPause == 0 && len(pauses) != 0:
				t.Errorf("paused %v, want no pause", pauses)
			case tt.minPause != 0 && (len(pauses) != 1 || pauses[0] < tt.minPause || pauses[0] > tt.maxPause):
				t.Errorf("paused %v, want one pause of %v to %v", pauses, tt.minPause, tt.maxPause)
			}
		})
	}
}

// TestStartRunRefusesAKeyTheAPIWouldRefuse: a caller's key that is empty
// (one that came back empty from the caller's store), too long, or has a
// space, a control or a non-ASCII character fails StartRun before any
// request; the empty key no longer becomes a random one (which lost
// at-most-once silently) and a newline is no longer retried 4 times as a
// transport failure. The error does not repeat the key.
func TestStartRunRefusesAKeyTheAPIWouldRefuse(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"r1","status":"QUEUED"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	req := client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}}
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'k'
	}
	for _, key := range []string{"", string(long), "a b", "a\nb", "a\x7fb", "caf\u00e9"} {
		_, err := c.StartRun(t.Context(), req, client.WithIdempotencyKey(key))
		if err == nil {
			t.Fatalf("key %q: StartRun did not fail", key)
		}
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			t.Errorf("key %q: an API error %v, want a local one", key, err)
		}
		if key != "" && regexp.MustCompile(regexp.QuoteMeta(key)).MatchString(err.Error()) {
			t.Errorf("key %q: the error repeats the key: %v", key, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
	// A valid key of 255 characters goes out.
	if _, err := c.StartRun(t.Context(), req, client.WithIdempotencyKey(string(long[:255]))); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
}

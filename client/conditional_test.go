package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
)

// taggedRuns serves GET /runs/r1 as agentgate does, from a list of run
// bodies in turn (the last one again when they run out): each with its
// ETag (the hash of the body), 304 without a body when the
// request's If-None-Match is that tag. It records each request's query
// and If-None-Match.
type taggedRuns struct {
	mu      sync.Mutex
	bodies  []string
	n       int
	queries []string
	sent    []string // If-None-Match per request ("" none)
	// notModified counts the 304s.
	notModified int
}

func (f *taggedRuns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	body := f.bodies[min(f.n, len(f.bodies)-1)]
	f.n++
	inm := r.Header.Get("If-None-Match")
	f.queries = append(f.queries, r.URL.RawQuery)
	f.sent = append(f.sent, inm)
	sum := sha256.Sum256([]byte(body))
	tag := `"` + hex.EncodeToString(sum[:16]) + `"`
	if inm == tag {
		f.notModified++
	}
	f.mu.Unlock()
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-store")
	if inm == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}

func (f *taggedRuns) record() (queries, sent []string, notModified int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries), slices.Clone(f.sent), f.notModified
}

// TestWaitAsksConditionally: Wait sends each request after the first with
// If-None-Match, the last answer's ETag, and keeps the run it has on 304
// (polling, and with WithServerWait: the version it asks past is the kept
// run's), until the run changes.
func TestWaitAsksConditionally(t *testing.T) {
	running := `{"id":"r1","status":"RUNNING","version":3}`
	waiting := `{"id":"r1","status":"WAITING_FOR_APPROVAL","version":4}`
	bodies := []string{running, running, running, waiting}
	for _, tt := range []struct {
		name  string
		opts  []client.Option
		query string // of the requests after the first
	}{
		{"polling", nil, ""},
		{"server wait", []client.Option{client.WithServerWait(time.Second)}, "after_version=3&wait=1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &taggedRuns{bodies: bodies}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, err := client.New(srv.URL, append([]client.Option{client.WithBearerToken("t"),
				client.WithPollInterval(time.Millisecond, 2*time.Millisecond)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Wait(ctx(t), "r1", client.StatusWaiting)
			if err != nil || r.Version != 4 || r.Status != client.StatusWaiting {
				t.Fatalf("Wait: %+v, %v; want version 4 waiting", r, err)
			}
			queries, sent, notModified := f.record()
			if len(sent) != 4 || sent[0] != "" || sent[1] == "" || sent[2] != sent[1] || sent[3] != sent[1] {
				t.Errorf("If-None-Match sent %q, want none first, then the first answer's tag on each request", sent)
			}
			if notModified != 2 {
				t.Errorf("%d answers 304, want 2", notModified)
			}
			if want := []string{"", tt.query, tt.query, tt.query}; !slices.Equal(queries, want) {
				t.Errorf("queries %q, want %q", queries, want)
			}
		})
	}

	// A wait that ends while the run is unchanged returns the run kept.
	f := &taggedRuns{bodies: []string{running}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	short := clocktest.NewDeadline() // its deadline passes once the run and one 304 are read
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, time.Millisecond),
		client.WithHTTPClient(expireAfter(short, 2)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(short, "r1", client.StatusWaiting)
	if !errors.Is(err, context.DeadlineExceeded) || r == nil || r.ID != "r1" || r.Version != 3 || r.Status != client.StatusRunning {
		t.Fatalf("a run that never changes: %+v, %v; want the run read first and the deadline", r, err)
	}
	if _, _, notModified := f.record(); notModified == 0 {
		t.Errorf("no 304 while the run was unchanged")
	}
}

// TestWaitOnTheLocalServerGetsNotModified: against the local server (its
// traffic checked against openapi.yaml), a polling Wait gets 304s while
// the run waits for its decision, and sees the decision's effect.
func TestWaitOnTheLocalServerGetsNotModified(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	var (
		mu       sync.Mutex
		statuses []int // of the GETs since the last reset
		enough   func()
	)
	hc := s.Client(t)
	inner := hc.Transport
	hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if err == nil && r.Method == "GET" {
			mu.Lock()
			statuses = append(statuses, resp.StatusCode)
			if enough != nil && len(statuses) == 4 {
				enough()
			}
			mu.Unlock()
		}
		return resp, err
	})
	alice, err := client.New(s.URL, client.WithBearerToken(s.Token("alice")), client.WithHTTPClient(hc),
		client.WithPollInterval(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	bob := newClient(t, s, "bob")
	ctx := ctx(t)
	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	run, err = alice.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil || run.Pending == nil {
		t.Fatalf("waiting: %+v, %v", run, err)
	}
	// Nobody decides: a Wait for the end reads the run, then polls it,
	// until its fourth GET ends it. The run may change once meanwhile (the
	// worker records the approval mail it sent), then no more.
	undecided, cancel := context.WithCancel(ctx)
	defer cancel()
	mu.Lock()
	statuses, enough = nil, cancel
	mu.Unlock()
	if _, err := alice.Wait(undecided, run.ID, client.StatusCompleted); !errors.Is(err, context.Canceled) {
		t.Fatalf("a run nobody decides: %v", err)
	}
	mu.Lock()
	got := slices.Clone(statuses)
	enough = nil
	mu.Unlock()
	if len(got) != 4 || got[0] != 200 || got[1] != 200 && got[1] != 304 || got[2] != 304 || got[3] != 304 {
		t.Fatalf("GET statuses %v while the run was (all but) unchanged, want a 200, then 304s (the second may be a 200)", got)
	}
	if _, err := bob.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest)); err != nil {
		t.Fatal(err)
	}
	done, err := alice.Wait(ctx, run.ID)
	if err != nil || done.Status != client.StatusCompleted || done.Output == nil {
		t.Fatalf("done: %+v, %v", done, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWaitHonoursRetryAfter: Wait does not ask again before a 429's or
// 503's Retry-After (seconds or an HTTP date); one that asks for longer
// than its ctx has left, or than a minute, ends the Wait at once with
// that error (Error.RetryAfter set) and the run as last read.
func TestWaitHonoursRetryAfter(t *testing.T) {
	var (
		mu         sync.Mutex
		attempts   int
		status     int
		retryAfter string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		n := attempts
		st, ra := status, retryAfter
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch n {
		case 1:
			_, _ = io.WriteString(w, `{"id":"r1","status":"RUNNING","version":3}`)
		case 2:
			w.Header().Set("Retry-After", ra)
			w.WriteHeader(st)
			_, _ = io.WriteString(w, `{"message":"slow down"}`)
		default:
			_, _ = io.WriteString(w, `{"id":"r1","status":"COMPLETED","version":9}`)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name       string
		status     int
		retryAfter string
		timeout    time.Duration // of ctx; 0: none
		attempts   int
		minPause   time.Duration // of the pause after the error; 0: the Wait ends at once
		maxPause   time.Duration
		errAfter   time.Duration
	}{
		{"429, seconds", 429, "2", 0, 3, 2 * time.Second, 2 * time.Second, 0},
		{"503, seconds", 503, "3", 0, 3, 3 * time.Second, 3 * time.Second, 0},
		{"an HTTP date", 503, time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat), 0, 3, 20 * time.Second, 30 * time.Second, 0}, // 20 s: the date has whole seconds, and the machine may stall
		{"past ctx's deadline", 429, "30", 10 * time.Second, 2, 0, 0, 30 * time.Second},
		{"longer than Wait waits", 503, "3600", 0, 2, 0, 0, time.Hour},
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
			attempts, status, retryAfter = 0, tt.status, tt.retryAfter
			mu.Unlock()
			cx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				cx, cancel = context.WithTimeout(cx, tt.timeout)
				defer cancel()
			}
			r, err := c.Wait(cx, "r1")
			var e *client.Error
			switch {
			case tt.minPause != 0 && (err != nil || r.Status != client.StatusCompleted):
				t.Fatalf("got %+v, %v; want the completed run", r, err)
			case tt.minPause == 0 && (!errors.As(err, &e) || e.StatusCode != tt.status || e.RetryAfter != tt.errAfter):
				t.Fatalf("got %v (%+v), want the %d with RetryAfter %v", err, e, tt.status, tt.errAfter)
			case tt.minPause == 0 && (r == nil || r.Version != 3):
				t.Fatalf("got run %+v, want the run as last read (version 3)", r)
			case tt.minPause == 0 && cx.Err() != nil:
				t.Fatalf("Wait returned when ctx had ended (%v), want at once", cx.Err())
			}
			mu.Lock()
			n := attempts
			mu.Unlock()
			if n != tt.attempts {
				t.Errorf("%d requests, want %d", n, tt.attempts)
			}
			// pauses[0] follows the first answer (the back-off), pauses[1]
			// the error.
			switch {
			case tt.minPause == 0 && len(pauses) != 1:
				t.Errorf("paused %v, want only the back-off after the first answer", pauses)
			case tt.minPause != 0 && (len(pauses) != 2 || pauses[1] < tt.minPause || pauses[1] > tt.maxPause):
				t.Errorf("paused %v, want the back-off, then %v to %v", pauses, tt.minPause, tt.maxPause)
			}
		})
	}
}

package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
)

// fakeRuns serves GET /runs/r1 from answers in turn (the last one again
// when they run out), holding a request with a wait for hold first, and
// records each request's query.
type fakeRuns struct {
	mu      sync.Mutex
	answers []string
	hold    time.Duration
	queries []string
	// answered, when set, receives a value after each answer.
	answered chan struct{}
}

func (f *fakeRuns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.queries)
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	if r.URL.Query().Get("wait") != "" {
		time.Sleep(f.hold)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(f.answers[min(n, len(f.answers)-1)]))
	if f.answered != nil {
		f.answered <- struct{}{}
	}
}

func (f *fakeRuns) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// TestWaitWithServerWaitOnAServerThatDoesNotHold: with WithServerWait,
// Wait reads the run once and then asks the server to hold the next
// request; an answer without a change that comes before the wait is over
// (the deployed API, a server from before the parameter, one that is
// stopping) is followed by the back-off, never by another request at once.
// The back-off here is an hour, so the test ends the Wait once the server
// has answered twice; a third request would be a tight loop.
func TestWaitWithServerWaitOnAServerThatDoesNotHold(t *testing.T) {
	answered := make(chan struct{}, 8)
	f := &fakeRuns{answers: []string{`{"id":"r1","status":"RUNNING","version":3}`}, answered: answered}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Hour, time.Hour),
		client.WithServerWait(30*time.Second), client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx(t))
	go func() {
		<-answered
		<-answered
		cancel()
	}()
	if _, err := c.Wait(waitCtx, "r1", client.StatusWaiting); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want it cancelled during its back-off", err)
	}
	want := []string{"", "after_version=3&wait=5"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("queries %q, want %q (a read, one wait of half the HTTP client's 10 s timeout, then the back-off)", got, want)
	}
}

// TestWaitWithServerWaitOnAServerThatHolds: an answer without a change
// that came after the whole wait is followed by another waiting request
// (the server holds; nothing happened meanwhile), not by a poll.
func TestWaitWithServerWaitOnAServerThatHolds(t *testing.T) {
	f := &fakeRuns{hold: time.Second, answers: []string{
		`{"id":"r1","status":"RUNNING","version":3}`,
		`{"id":"r1","status":"RUNNING","version":3}`, // held for the whole second
		`{"id":"r1","status":"RUNNING","version":4}`,
		`{"id":"r1","status":"WAITING_FOR_APPROVAL","version":5}`,
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond),
		client.WithServerWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx(t), "r1", client.StatusWaiting)
	if err != nil || r.Version != 5 {
		t.Fatalf("got %+v, %v", r, err)
	}
	want := []string{"", "after_version=3&wait=1", "after_version=3&wait=1", "after_version=4&wait=1"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("queries %q, want %q", got, want)
	}
}

// TestWaitWithServerWaitOnTheLocalServer: a whole cycle waited on through
// the server's wait, its traffic checked against openapi.yaml.
func TestWaitWithServerWaitOnTheLocalServer(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	newWaiting := func(principal string) *client.Client {
		c, err := client.New(s.URL, client.WithBearerToken(s.Token(principal)), client.WithHTTPClient(s.Client(t)),
			client.WithServerWait(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob := newWaiting("alice"), newWaiting("bob")
	ctx := ctx(t)
	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	run, err = bob.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil || run.Pending == nil {
		t.Fatalf("waiting: %+v, %v", run, err)
	}
	if _, err := bob.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest)); err != nil {
		t.Fatal(err)
	}
	done, err := alice.Wait(ctx, run.ID)
	if err != nil || done.Status != client.StatusCompleted {
		t.Fatalf("done: %+v, %v", done, err)
	}
}

// TestWaitWithServerWaitAfterAServerStopped: an early answer without a
// change (a server that stopped answers its held requests so) is followed
// by the back-off and then by another waiting request, not by plain polls
// for the rest of the Wait.
func TestWaitWithServerWaitAfterAServerStopped(t *testing.T) {
	f := &fakeRuns{answers: []string{
		`{"id":"r1","status":"RUNNING","version":3}`,
		`{"id":"r1","status":"RUNNING","version":3}`, // the server stopped
		`{"id":"r1","status":"WAITING_FOR_APPROVAL","version":4}`,
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond),
		client.WithServerWait(30*time.Second), client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Wait(ctx(t), "r1", client.StatusWaiting); err != nil || r.Version != 4 {
		t.Fatalf("got %+v, %v", r, err)
	}
	want := []string{"", "after_version=3&wait=5", "after_version=3&wait=5"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("queries %q, want %q", got, want)
	}
}

// TestWaitNotifyHearsRetriesAndAnswers: WithWaitNotify hears every answer
// (nil) and every error Wait retries (here two 503s between answers), and
// not the error that ends the Wait.
func TestWaitNotifyHearsRetriesAndAnswers(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch i {
		case 2, 3:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"try again"}}`))
		case 1:
			_, _ = w.Write([]byte(`{"id":"r1","status":"RUNNING","version":3}`))
		case 4:
			_, _ = w.Write([]byte(`{"id":"r1","status":"COMPLETED","version":4}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"gone"}}`))
		}
	}))
	defer srv.Close()
	var heard []string
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, time.Millisecond),
		client.WithWaitNotify(func(err error) {
			if err == nil {
				heard = append(heard, "answer")
				return
			}
			var e *client.Error
			if !errors.As(err, &e) {
				t.Errorf("heard %v, want a *client.Error", err)
				return
			}
			heard = append(heard, e.Code)
		}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx(t), "r1")
	if err != nil || r.Status != client.StatusCompleted {
		t.Fatalf("Wait: %v, %v", r, err)
	}
	if want := []string{"answer", "unavailable", "unavailable", "answer"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}

	heard = nil
	if _, err := c.Wait(ctx(t), "r1"); err == nil {
		t.Fatal("Wait on a 404: no error")
	}
	if len(heard) != 0 {
		t.Errorf("heard %q for an error that ends the Wait, want nothing", heard)
	}
}

// TestPathSegmentsAreEscapedOnce: ids are escaped once on the wire (a call
// id "sp ace" is /calls/sp%20ace, not sp%2520ace), under an endpoint with
// a stage path too.
func TestPathSegmentsAreEscapedOnce(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"run_id":"r1","call":{"id":"x","tool":"t"},"part":"input","size":2,"offset":0,"text":"{}"}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL+"/prod", client.WithBearerToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sp ace", "hash#1", "pct%41", "q?x", "uni_é", "sl/ash"} {
		_, _ = c.HeldCallTextPage(ctx(t), "r 1", id, "input", 0)
	}
	want := []string{"/prod/runs/r%201/calls/sp%20ace", "/prod/runs/r%201/calls/hash%231", "/prod/runs/r%201/calls/pct%2541",
		"/prod/runs/r%201/calls/q%3Fx", "/prod/runs/r%201/calls/uni_%C3%A9", "/prod/runs/r%201/calls/sl%2Fash"}
	if !slices.Equal(got, want) {
		t.Errorf("paths on the wire:\n%q\nwant\n%q", got, want)
	}
}

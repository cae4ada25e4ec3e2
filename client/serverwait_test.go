package client_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
)

// TestWaitWithServerWait: with WithServerWait, Wait reads the run once and
// then asks the server to answer on the next version; an answer without a
// new version (the server's wait ended, or an older server ignored the
// parameters) is followed by the poll back-off, not a tight loop.
func TestWaitWithServerWait(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	answers := []string{
		`{"id":"r1","status":"RUNNING","version":3}`,
		`{"id":"r1","status":"RUNNING","version":3}`, // the wait ended
		`{"id":"r1","status":"RUNNING","version":4}`,
		`{"id":"r1","status":"WAITING_FOR_APPROVAL","version":5}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(queries)
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answers[min(n, len(answers)-1)]))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond),
		client.WithServerWait(30*time.Second), client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx(t), "r1", client.StatusWaiting)
	if err != nil || r.Version != 5 {
		t.Fatalf("got %+v, %v", r, err)
	}
	want := []string{"", "after_version=3&wait=5", "after_version=3&wait=5", "after_version=4&wait=5"}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != len(want) {
		t.Fatalf("queries %q, want %q", queries, want)
	}
	for i := range want {
		if queries[i] != want[i] {
			t.Errorf("request %d: query %q, want %q (the wait is half the HTTP client's 10 s timeout)", i+1, queries[i], want[i])
		}
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

package apitest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// countingDispatch counts the jobs the API dispatches.
type countingDispatch struct {
	service.Dispatcher
	n atomic.Int64
}

func (d *countingDispatch) Dispatch(ctx context.Context, job service.Job) error {
	d.n.Add(1)
	return d.Dispatcher.Dispatch(ctx, job)
}

// countDispatches has s's API count the jobs it dispatches; call it before
// the first request.
func countDispatches(s *apitest.Server) *countingDispatch {
	d := &countingDispatch{Dispatcher: s.App.API.Dispatch}
	s.App.API.Dispatch = d
	return d
}

// storedRuns lists the ids of every run s's store holds: every run has a
// due time (its dispatch grace, deadline, lease or retention).
func storedRuns(t *testing.T, s *apitest.Server) []string {
	t.Helper()
	due, _, err := s.App.Store.Due(t.Context(), time.Now().Add(100*365*24*time.Hour), 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range due {
		ids = append(ids, r.ID)
	}
	return ids
}

// startKeyed starts a server on store (nil: the embedded store), its
// traffic validated against openapi.yaml.
func startKeyed(t *testing.T, store func(*apitest.Options)) *apitest.Server {
	var o apitest.Options
	if store != nil {
		store(&o)
	}
	return start(t, o)
}

// keyed returns a caller of s as principal that sends key as its
// Idempotency-Key.
func keyed(t *testing.T, s *apitest.Server, principal, key string) *apitest.Caller {
	c := s.As(t, principal)
	c.Header = http.Header{"Idempotency-Key": {key}}
	return c
}

func runID(t *testing.T, r apitest.Response) string {
	t.Helper()
	id, _ := r.JSON()["id"].(string)
	if id == "" {
		t.Fatalf("no run in the answer %d: %s", r.Status, r.Body)
	}
	return id
}

// TestIdempotentStart: a start sent again under its Idempotency-Key (its
// 202 lost) gets the run the first created, as it is now, and creates,
// dispatches and mails nothing; the same body written otherwise is the
// same request; another body under the key is refused naming the run;
// another caller's key of the same name starts its own run.
func TestIdempotentStart(t *testing.T) { runIdempotentStart(t, nil) }

func runIdempotentStart(t *testing.T, store func(*apitest.Options)) {
	s := startKeyed(t, store)
	d := countDispatches(s)
	alice := keyed(t, s, "alice", "order-42")
	const body = `{"prompt":"update pricing","approvers":["bob","ops@example.com"],"metadata":{"a":"1","b":"2"}}`

	first := alice.Call(t, "POST", "/runs", jsonCT, body)
	if first.Status != http.StatusAccepted || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first start: %d replayed=%q %s", first.Status, first.Header.Get("Idempotent-Replayed"), first.Body)
	}
	id := runID(t, first)
	waitStatus(t, s, s.Client(t), id, "WAITING_FOR_APPROVAL")
	s.WaitLinks(t, "ops@example.com", 1)

	// The same request, its members in another order and spaced otherwise.
	again := alice.Call(t, "POST", "/runs", jsonCT, `{ "metadata": {"b": "2", "a": "1"},
		"approvers": ["bob", "ops@example.com"], "prompt": "update pricing" }`)
	if again.Status != http.StatusAccepted || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("start sent again: %d replayed=%q %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	if got := runID(t, again); got != id {
		t.Fatalf("start sent again answered run %s, want %s", got, id)
	}
	if st := again.JSON()["status"]; st != "WAITING_FOR_APPROVAL" {
		t.Errorf("the replay shows the run as %v, want it as it is now (WAITING_FOR_APPROVAL)", st)
	}
	if loc := again.Header.Get("Location"); loc != "/runs/"+id {
		t.Errorf("replay Location %q", loc)
	}
	if got := storedRuns(t, s); len(got) != 1 {
		t.Errorf("runs stored: %v, want only %s", got, id)
	}
	if n := d.n.Load(); n != 1 {
		t.Errorf("%d jobs dispatched, want the first start's only", n)
	}
	if links := s.Links("ops@example.com"); len(links) != 1 {
		t.Errorf("ops@example.com was mailed %d links, want 1", len(links))
	}

	// Another body under the key is refused, naming the key's run.
	other := alice.Call(t, "POST", "/runs", jsonCT, `{"prompt":"update pricing now","approvers":["bob","ops@example.com"],"metadata":{"a":"1","b":"2"}}`)
	if other.Status != http.StatusUnprocessableEntity || !strings.Contains(string(other.Body), id) || !strings.Contains(string(other.Body), "order-42") {
		t.Fatalf("another body under the key: %d %s; want 422 naming run %s and the key", other.Status, other.Body, id)
	}

	// Bob's "order-42" is his own.
	bobs := keyed(t, s, "bob", "order-42").Call(t, "POST", "/runs", jsonCT, body)
	if bobs.Status != http.StatusAccepted || bobs.Header.Get("Idempotent-Replayed") != "" || runID(t, bobs) == id {
		t.Fatalf("bob's start under alice's key name: %d replayed=%q %s; want a run of his own", bobs.Status, bobs.Header.Get("Idempotent-Replayed"), bobs.Body)
	}
	if got := storedRuns(t, s); len(got) != 2 {
		t.Errorf("runs stored: %v, want alice's and bob's", got)
	}

	// Without a key every start is a new run.
	plain := s.As(t, "alice")
	a, b := plain.Call(t, "POST", "/runs", jsonCT, body), plain.Call(t, "POST", "/runs", jsonCT, body)
	if a.Status != http.StatusAccepted || b.Status != http.StatusAccepted || runID(t, a) == runID(t, b) || a.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("starts without a key: %d %d, runs %s %s", a.Status, b.Status, runID(t, a), runID(t, b))
	}
	if n := d.n.Load(); n != 4 {
		t.Errorf("%d jobs dispatched, want 4 (one per run)", n)
	}
}

// TestMalformedIdempotencyKey: a key that is not 1 to 255 visible ASCII
// characters is 400 and starts nothing (the header given twice, which the
// spec cannot say, is internal/httpapi's).
func TestMalformedIdempotencyKey(t *testing.T) {
	s := start(t, apitest.Options{})
	const body = `{"prompt":"update pricing","approvers":["bob"]}`
	for name, values := range map[string][]string{
		"space":     {"two words"},
		"too long":  {strings.Repeat("k", runs.MaxIdempotencyKeyBytes+1)},
		"non-ASCII": {"caf\u00e9"},
		"empty":     {""},
	} {
		t.Run(name, func(t *testing.T) {
			c := s.As(t, "alice")
			c.Header = http.Header{"Idempotency-Key": values}
			r := c.Call(t, "POST", "/runs", jsonCT, body)
			if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "Idempotency-Key") {
				t.Errorf("%q: %d %s, want 400 naming the header", values, r.Status, r.Body)
			}
		})
	}
	if got := storedRuns(t, s); len(got) != 0 {
		t.Errorf("runs stored: %v, want none", got)
	}
	longest := keyed(t, s, "alice", strings.Repeat("~", runs.MaxIdempotencyKeyBytes)).Call(t, "POST", "/runs", jsonCT, body)
	if longest.Status != http.StatusAccepted {
		t.Errorf("the longest key: %d %s", longest.Status, longest.Body)
	}
}

// TestConcurrentIdempotentStarts: of many starts sent at once under one
// key exactly one creates (and dispatches) the run; all answer it.
func TestConcurrentIdempotentStarts(t *testing.T) { runConcurrentIdempotentStarts(t, nil) }

func runConcurrentIdempotentStarts(t *testing.T, store func(*apitest.Options)) {
	s := startKeyed(t, store)
	d := countDispatches(s)
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      = map[string]int{}
		replayed int
		failures []string
	)
	for range n {
		wg.Go(func() {
			r, err := keyed(t, s, "alice", "once").Send(t.Context(), "POST", "/runs", jsonCT, `{"prompt":"update pricing","approvers":["bob"]}`)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || r.Status != http.StatusAccepted {
				failures = append(failures, string(r.Body))
				return
			}
			var run struct{ ID string }
			_ = json.Unmarshal(r.Body, &run)
			ids[run.ID]++
			if r.Header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("failed starts: %v", failures)
	}
	if len(ids) != 1 || replayed != n-1 {
		t.Errorf("runs answered %v, %d replays; want one run, %d replays", ids, replayed, n-1)
	}
	if got := storedRuns(t, s); len(got) != 1 {
		t.Errorf("runs stored: %v, want one", got)
	}
	if got := d.n.Load(); got != 1 {
		t.Errorf("%d jobs dispatched, want 1", got)
	}
}

// keyContention is a row store on which every write of an idempotency
// key loses to another request's write that never finishes (as DynamoDB
// cancels a transaction that conflicts with one in flight).
type keyContention struct{ *embedded.DB }

func (k keyContention) Write(ctx context.Context, w runs.Write) error {
	if w.IdempotencyKey != nil {
		return runs.Errorf(runs.EConflict, "transaction cancelled: TransactionConflict")
	}
	return k.DB.Write(ctx, w)
}

// TestIdempotentStartInContention: a start whose key another request is
// still writing after a few tries is 409, and starts nothing.
func TestIdempotentStartInContention(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "agentgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s := start(t, apitest.Options{Rows: keyContention{db}, States: db})
	r := keyed(t, s, "alice", "busy").Call(t, "POST", "/runs", jsonCT, `{"prompt":"update pricing","approvers":["bob"]}`)
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "busy") {
		t.Fatalf("start under a key in contention: %d %s, want 409 naming the key", r.Status, r.Body)
	}
	if got := storedRuns(t, s); len(got) != 0 {
		t.Errorf("runs stored: %v, want none", got)
	}
}

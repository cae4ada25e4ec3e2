package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/gateway"
)

// BenchmarkRunDecisionCycle measures whole approval cycles on the local
// server (embedded store, built-in scripted model) over HTTP, one cycle at a
// time: POST /runs, poll until WAITING_FOR_APPROVAL, approve the pending turn,
// poll until COMPLETED. Besides ns/op it reports cycles/s and the mean latency
// of the two requests that change state, start-ns and decide-ns; the rest of
// a cycle is the asynchronous worker, seen through 1 ms polls.
func BenchmarkRunDecisionCycle(b *testing.B) {
	c := startCycleBench(b)
	var lat cycleLatency
	for b.Loop() {
		if err := c.cycle(&lat); err != nil {
			b.Fatal(err)
		}
	}
	lat.report(b)
}

// BenchmarkRunDecisionCycleParallel runs the same cycle from GOMAXPROCS
// clients at once (-cpu sets how many), which shows throughput rather than
// the latency of one cycle.
func BenchmarkRunDecisionCycleParallel(b *testing.B) {
	c := startCycleBench(b)
	var lat cycleLatency
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.cycle(&lat); err != nil {
				b.Error(err)
				return
			}
		}
	})
	lat.report(b)
}

// BenchmarkRunDecisionCycleClients runs the cycle from a fixed number of
// concurrent clients (1 and 16) on one local server, whatever GOMAXPROCS is:
// cycles/s at 16 over cycles/s at 1 is what the embedded store's group commit
// buys (issue #15: goal >= 4x). `make bench` prints the two and their ratio,
// for clients that poll GET /runs/{id} every millisecond, conditionally as
// the Go client's Wait does (If-None-Match: 304 while the run is unchanged;
// waiting=poll), and for clients that wait on it (?after_version=N&wait=20,
// waiting=server).
func BenchmarkRunDecisionCycleClients(b *testing.B) {
	for _, waiting := range []struct {
		name string
		poll time.Duration
	}{{"poll", time.Millisecond}, {"server", 0}} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("waiting=%s/clients=%d", waiting.name, clients), func(b *testing.B) {
				c := startCycleBench(b)
				c.pollInterval = waiting.poll
				var lat cycleLatency
				var next atomic.Int64
				errs := make(chan error, clients)
				b.ResetTimer()
				for range clients {
					go func() {
						for next.Add(1) <= int64(b.N) {
							if err := c.cycle(&lat); err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for range clients {
					if err := <-errs; err != nil {
						b.Error(err)
					}
				}
				b.StopTimer()
				lat.report(b)
			})
		}
	}
}

// cycleBench drives one local server over HTTP with a keep-alive client.
type cycleBench struct {
	alice, bob   *apitest.Caller
	pollInterval time.Duration
}

func startCycleBench(b *testing.B) *cycleBench {
	b.Helper()
	alice, bob := gateway.NewToken(), gateway.NewToken()
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: b.TempDir(), tokens: map[string]string{alice: "alice", bob: "bob"},
		logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatalf("start local server: %v", err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("close local server: %v", err)
		}
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return &cycleBench{
		alice:        &apitest.Caller{URL: s.URL, Token: alice, HTTP: hc},
		bob:          &apitest.Caller{URL: s.URL, Token: bob, HTTP: hc},
		pollInterval: time.Millisecond,
	}
}

// cycleLatency sums the latency of the state-changing requests.
type cycleLatency struct {
	starts, startNanos   atomic.Int64
	decides, decideNanos atomic.Int64
	polls                atomic.Int64
	// notModified counts the polls answered 304 (the run unchanged).
	notModified atomic.Int64
}

func (l *cycleLatency) report(b *testing.B) {
	b.Helper()
	if n := l.starts.Load(); n > 0 {
		b.ReportMetric(float64(l.startNanos.Load())/float64(n), "start-ns")
		b.ReportMetric(float64(l.polls.Load())/float64(n), "polls/op")
		if nm := l.notModified.Load(); nm > 0 {
			b.ReportMetric(float64(nm)/float64(n), "304s/op")
		}
	}
	if n := l.decides.Load(); n > 0 {
		b.ReportMetric(float64(l.decideNanos.Load())/float64(n), "decide-ns")
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "cycles/s")
	}
}

// cycle starts a run, approves its suspended turn and waits for the end.
func (c *cycleBench) cycle(lat *cycleLatency) error {
	var run runView
	t0 := time.Now()
	err := c.alice.DoJSON(context.Background(), "POST", "/runs", map[string]any{
		"prompt":    "The Team plan now costs 12 EUR per user and month. Update the pricing page.",
		"approvers": []string{"bob"},
	}, http.StatusAccepted, &run)
	lat.startNanos.Add(int64(time.Since(t0)))
	lat.starts.Add(1)
	if err != nil {
		return err
	}
	if run, err = c.waitFor(run.ID, "WAITING_FOR_APPROVAL", lat); err != nil {
		return err
	}
	if run.Pending == nil {
		return fmt.Errorf("run %s is waiting without a pending turn", run.ID)
	}
	t0 = time.Now()
	err = c.bob.DoJSON(context.Background(), "POST", "/runs/"+run.ID+"/decision", map[string]any{
		"turn_digest": run.Pending.TurnDigest, "action": "approve",
	}, http.StatusAccepted, &run)
	lat.decideNanos.Add(int64(time.Since(t0)))
	lat.decides.Add(1)
	if err != nil {
		return err
	}
	_, err = c.waitFor(run.ID, "COMPLETED", lat)
	return err
}

// waitFor reads run id until it has status. Polling (pollInterval > 0),
// it asks as the Go client's Wait does: each poll after the first names
// the run it has (If-None-Match, the last answer's ETag), and a 304 keeps
// that run, neither downloaded nor decoded again. Waiting on the server,
// each request waits for the next version.
func (c *cycleBench) waitFor(id, status string, lat *cycleLatency) (runView, error) {
	deadline := time.Now().Add(30 * time.Second)
	path := "/runs/" + id
	var (
		r   runView
		tag string // r's ETag
	)
	for {
		lat.polls.Add(1)
		caller := c.alice
		if c.pollInterval > 0 && tag != "" {
			conditional := *c.alice
			conditional.Header = http.Header{"If-None-Match": {tag}}
			caller = &conditional
		}
		resp, err := caller.Send(context.Background(), "GET", path, "", "")
		switch {
		case err != nil:
			return r, err
		case resp.Status == http.StatusNotModified && caller != c.alice:
			lat.notModified.Add(1) // r is the run as it is
		case resp.Status == http.StatusOK:
			r = runView{}
			if err := json.Unmarshal(resp.Body, &r); err != nil {
				return r, fmt.Errorf("GET %s: %w: %s", path, err, resp.Body)
			}
			tag = resp.Header.Get("ETag")
		default:
			return r, fmt.Errorf("GET %s: got %d: %s", path, resp.Status, resp.Body)
		}
		switch r.Status {
		case status:
			return r, nil
		case "COMPLETED", "FAILED", "CANCELLED", "EXPIRED":
			return r, fmt.Errorf("run %s ended %s while waiting for %s: %s", id, r.Status, status, r.Output)
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("run %s still %s after 30s", id, r.Status)
		}
		if c.pollInterval > 0 {
			time.Sleep(c.pollInterval)
			continue
		}
		// The server answers once the run has changed (or after 20 s).
		path = fmt.Sprintf("/runs/%s?after_version=%d&wait=20", id, r.Version)
	}
}

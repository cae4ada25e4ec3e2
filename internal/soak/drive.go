package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgate/agentgate/client"
)

// tracked is one run the API accepted (202), as the soak drives it. One
// goroutine owns it at a time: its client, then the parked loop.
type tracked struct {
	N         int
	ID        string
	Mode      Mode
	Cancel    cancelPhase
	Started   time.Time
	Decisions map[string]*sentDecision // by suspension id
	// Submissions are the tool results submitted, by tool-results id.
	Submissions map[string]*SubmissionRecord
	// CancelSent: a cancel was answered (200 or 409); CancelOK: 200.
	CancelSent, CancelOK bool
	Status               client.Status
	LastChange           time.Time
	Done                 bool
}

// sentDecision is the decision the soak made on one suspension.
type sentDecision struct {
	Suspension string
	Decision   client.Decision
	// Approved holds the input approved per call (edited for an edit).
	Approved map[string]json.RawMessage
	// Accepted: the decision was answered 202.
	Accepted bool
	// Refused is an unexpected refusal (not a 409).
	Refused string
}

// httpTally counts the API's answers by route and outcome.
type httpTally struct {
	mu       sync.Mutex
	Requests int
	// Conn counts requests that got no answer (connection refused or
	// reset: the server was down or died).
	Conn int
	// ByOutcome counts non-2xx answers: "route status code".
	ByOutcome map[string]int
	// ServerErrors are the 5xx answers (route, status, code, message).
	ServerErrors []string
}

func (h *httpTally) note(route string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Requests++
	if err == nil {
		return
	}
	var e *client.Error
	if !errors.As(err, &e) {
		if !errors.Is(err, context.Canceled) {
			h.Conn++
		}
		return
	}
	if h.ByOutcome == nil {
		h.ByOutcome = map[string]int{}
	}
	h.ByOutcome[fmt.Sprintf("%s %d %s", route, e.StatusCode, e.Code)]++
	if e.StatusCode >= 500 {
		h.ServerErrors = append(h.ServerErrors, fmt.Sprintf("%s %s %d %s: %s", time.Now().Format(time.RFC3339Nano), route, e.StatusCode, e.Code, e.Message))
	}
}

// driver runs the soak's clients.
type driver struct {
	alice, bob *client.Client
	kill       *killer
	http       httpTally
	parkAfter  time.Duration

	// progress is when a run last changed status (unix ns).
	progress atomic.Int64

	mu           sync.Mutex
	runs         []*tracked
	parked       []*tracked
	n            int
	startUnknown int
}

func newDriver(url, aliceToken, bobToken string, k *killer) (*driver, error) {
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	alice, err := client.New(url, client.WithBearerToken(aliceToken), client.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	bob, err := client.New(url, client.WithBearerToken(bobToken), client.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &driver{alice: alice, bob: bob, kill: k, parkAfter: 10 * time.Second}, nil
}

// client drives runs one after another until drive ends, then finishes its
// last run or parks it.
func (d *driver) client(drive, settle context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) //nolint:gosec // a reproducible mix, not a secret
	for drive.Err() == nil {
		t := d.start(settle, rng)
		if t == nil {
			sleepCtx(drive, 50*time.Millisecond)
			continue
		}
		for !t.Done {
			if time.Since(t.LastChange) > d.parkAfter {
				d.park(t)
				break
			}
			if !sleepCtx(settle, time.Duration(60+rng.IntN(140))*time.Millisecond) {
				d.park(t)
				break
			}
			d.step(settle, t)
		}
	}
}

func (d *driver) park(t *tracked) {
	d.mu.Lock()
	d.parked = append(d.parked, t)
	d.mu.Unlock()
}

// parkedLoop steps parked runs until ctx ends, or until clientsDone is
// closed and every run is done.
func (d *driver) parkedLoop(ctx context.Context, clientsDone <-chan struct{}) {
	for {
		d.mu.Lock()
		list := d.parked
		d.parked = nil
		d.mu.Unlock()
		var left []*tracked
		for _, t := range list {
			if ctx.Err() != nil {
				left = append(left, t)
				continue
			}
			d.step(ctx, t)
			if !t.Done {
				left = append(left, t)
			}
		}
		d.mu.Lock()
		d.parked = append(d.parked, left...)
		empty := len(d.parked) == 0
		d.mu.Unlock()
		select {
		case <-clientsDone:
			if empty {
				return
			}
		default:
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return
		}
	}
}

// start starts a run of a random mode; nil when the API did not accept it.
func (d *driver) start(ctx context.Context, rng *rand.Rand) *tracked {
	m := pickMode(rng)
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	r, err := d.alice.StartRun(ctx, startRequest(m, n))
	d.http.note("POST /runs", err)
	if err != nil {
		var e *client.Error
		if !errors.As(err, &e) {
			// No answer: the run may or may not exist (the census finds it).
			d.mu.Lock()
			d.startUnknown++
			d.mu.Unlock()
		}
		return nil
	}
	now := time.Now()
	t := &tracked{N: n, ID: r.ID, Mode: m, Started: now, Status: r.Status, LastChange: now,
		Decisions: map[string]*sentDecision{}, Submissions: map[string]*SubmissionRecord{}}
	if m == ModeCancel {
		t.Cancel = cancelPhases[rng.IntN(len(cancelPhases))]
	}
	d.mu.Lock()
	d.runs = append(d.runs, t)
	d.mu.Unlock()
	d.kill.notify(KillAfterStart, r.ID)
	if t.Cancel == cancelQueued {
		d.cancel(ctx, t)
	}
	return t
}

// step reads the run once and does what its mode says next.
func (d *driver) step(ctx context.Context, t *tracked) {
	r, err := d.bob.Run(ctx, t.ID)
	d.http.note("GET /runs/{id}", err)
	if err != nil {
		return
	}
	if r.Status != t.Status {
		t.Status, t.LastChange = r.Status, time.Now()
		d.progress.Store(t.LastChange.UnixNano())
	}
	switch {
	case r.Status.Terminal():
		t.Done = true
	case r.Status == client.StatusWaitingForToolResults:
		if t.Mode != ModeClient || r.ToolResults == nil {
			t.Done = true // waits for results the soak does not give
			return
		}
		d.submit(ctx, t, r.ToolResults)
	case r.Status == client.StatusWaiting:
		switch {
		case t.Mode == ModeAbandon:
			t.Done = true
		case t.Cancel == cancelWaiting && !t.CancelSent:
			d.cancel(ctx, t)
		case r.Pending != nil:
			d.decide(ctx, t, r)
		}
	}
}

func (d *driver) decide(ctx context.Context, t *tracked, r *client.Run) {
	s := r.Pending.SuspensionID
	sd := t.Decisions[s]
	if sd == nil {
		dec, approved := decisionFor(t.Mode, t.ID, r.Pending)
		if dec == nil {
			return
		}
		sd = &sentDecision{Suspension: s, Decision: *dec, Approved: approved}
		t.Decisions[s] = sd
	}
	if sd.Accepted || sd.Refused != "" {
		return
	}
	_, err := d.bob.Decide(ctx, t.ID, sd.Decision)
	d.http.note("POST /runs/{id}/decision", err)
	var e *client.Error
	switch {
	case err == nil:
		sd.Accepted = true
		t.LastChange = time.Now()
		d.kill.notify(KillAfterDecision, t.ID)
		if t.Cancel == cancelResuming {
			d.cancel(ctx, t)
		}
	case errors.As(err, &e) && e.StatusCode == http.StatusConflict:
		// Decided already (an answer lost in a kill) or moved on: re-read.
	case errors.As(err, &e) && e.StatusCode < 500:
		sd.Refused = fmt.Sprintf("%d %s: %s", e.StatusCode, e.Code, e.Message)
	}
}

// submit submits a result for every handed-over call.
func (d *driver) submit(ctx context.Context, t *tracked, p *client.PendingToolResults) {
	sub := t.Submissions[p.ToolResultsID]
	if sub == nil {
		sub = &SubmissionRecord{ToolResultsID: p.ToolResultsID}
		t.Submissions[p.ToolResultsID] = sub
	}
	if sub.Accepted || sub.Refused != "" {
		return
	}
	res := client.ToolResults{ToolResultsID: p.ToolResultsID}
	for _, c := range p.Calls {
		res.Results = append(res.Results, client.ToolResult{CallID: c.ID, Content: "42 in stock (" + t.ID + ")"})
	}
	_, err := d.alice.SubmitToolResults(ctx, t.ID, res)
	d.http.note("POST /runs/{id}/tool-results", err)
	var e *client.Error
	switch {
	case err == nil:
		sub.Accepted = true
		t.LastChange = time.Now()
		d.kill.notify(KillAfterResults, t.ID)
	case errors.As(err, &e) && e.StatusCode == http.StatusConflict:
		// Submitted already (an answer lost in a kill) or moved on: re-read.
	case errors.As(err, &e) && e.StatusCode < 500:
		sub.Refused = fmt.Sprintf("%d %s: %s", e.StatusCode, e.Code, e.Message)
	}
}

func (d *driver) cancel(ctx context.Context, t *tracked) {
	_, err := d.alice.Cancel(ctx, t.ID)
	d.http.note("POST /runs/{id}/cancel", err)
	var e *client.Error
	switch {
	case err == nil:
		t.CancelSent, t.CancelOK = true, true
		t.LastChange = time.Now()
	case errors.As(err, &e) && e.StatusCode < 500:
		t.CancelSent = true
	}
}

// collect reads the final state of every run (retrying while the server
// does not answer) with up to workers requests at a time.
func (d *driver) collect(ctx context.Context, workers int) []RunRecord {
	d.mu.Lock()
	runs := append([]*tracked(nil), d.runs...)
	d.mu.Unlock()
	recs := make([]RunRecord, len(runs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				recs[i] = d.record(ctx, runs[i])
			}
		}()
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Slice(recs, func(i, j int) bool { return recs[i].N < recs[j].N })
	return recs
}

func (d *driver) record(ctx context.Context, t *tracked) RunRecord {
	rec := RunRecord{N: t.N, ID: t.ID, Mode: t.Mode, Cancel: t.Cancel, Started: t.Started, CancelOK: t.CancelOK}
	for _, sd := range t.Decisions {
		rec.Decisions = append(rec.Decisions, DecisionRecord{Suspension: sd.Suspension, Accepted: sd.Accepted, Approved: sd.Approved, Refused: sd.Refused})
	}
	sort.Slice(rec.Decisions, func(i, j int) bool { return rec.Decisions[i].Suspension < rec.Decisions[j].Suspension })
	for _, sub := range t.Submissions {
		rec.Submissions = append(rec.Submissions, *sub)
	}
	sort.Slice(rec.Submissions, func(i, j int) bool { return rec.Submissions[i].ToolResultsID < rec.Submissions[j].ToolResultsID })
	for attempt := 0; attempt < 20; attempt++ {
		r, err := d.bob.Run(ctx, t.ID)
		d.http.note("GET /runs/{id}", err)
		var e *client.Error
		switch {
		case err == nil:
			rec.Found = true
			rec.Status, rec.Reason = string(r.Status), r.TerminationReason
			if r.Pending != nil {
				rec.Suspension = r.Pending.SuspensionID
			}
			if r.ToolResults != nil {
				rec.ToolResultsID = r.ToolResults.ToolResultsID
			}
		case errors.As(err, &e) && e.StatusCode == http.StatusNotFound:
			rec.NotFound = true
		case errors.As(err, &e) && e.StatusCode < 500:
			rec.ReadError = err.Error()
		default:
			rec.ReadError = err.Error()
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		break
	}
	if rec.Found && NeedsEvents(rec) {
		for ev, err := range d.bob.Events(ctx, t.ID, 0) {
			if err != nil {
				d.http.note("GET /runs/{id}/events", err)
				break
			}
			rec.Events = append(rec.Events, ev)
		}
	}
	return rec
}

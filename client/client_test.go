package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
)

// newClient returns a client for principal on s, its traffic validated
// against openapi.yaml on the wire (and again at the handler).
func newClient(t *testing.T, s *apitest.Server, principal string) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, client.WithBearerToken(s.Token(principal)), client.WithHTTPClient(s.Client(t)),
		client.WithPollInterval(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRunLifecycle(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	ctx := ctx(t)

	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "update pricing", Approvers: []string{"bob"}, Metadata: map[string]string{"ticket": "OPS-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != client.StatusQueued || run.Initiator != "alice" || run.Metadata["ticket"] != "OPS-1" {
		t.Fatalf("started run: %+v", run)
	}
	run, err = bob.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil {
		t.Fatal(err)
	}
	if run.Pending == nil || len(run.Pending.Calls) != 2 {
		t.Fatalf("pending: %+v", run.Pending)
	}
	var write client.PendingCall
	for _, c := range run.Pending.Calls {
		if c.NeedsApproval {
			write = c
		}
	}
	if write.Tool != "write_document" || write.Effect != client.EffectWrite || !strings.Contains(write.Preview, "+- Team: 12 EUR") {
		t.Errorf("the write: %+v", write)
	}
	decided, err := bob.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest))
	if err != nil {
		t.Fatal(err)
	}
	if decided.Decision == nil || decided.Decision.By != "bob" || decided.Decision.Via != "api" || decided.Decision.Decision.Action != client.Approve {
		t.Errorf("recorded decision: %+v", decided.Decision)
	}
	done, err := alice.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != client.StatusCompleted || done.Output == nil || !strings.Contains(done.Output.Text, "12 EUR") {
		t.Fatalf("done: %+v %+v", done, done.Output)
	}

	// The iterator follows the pages: with pages of 2, every event once,
	// in order.
	paged, err := client.New(s.URL, client.WithBearerToken(s.Token("alice")), client.WithHTTPClient(s.Client(t)), client.WithPageSize(2))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	var types []string
	for ev, err := range paged.Events(ctx, run.ID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ev.Seq)
		types = append(types, ev.Type)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("event seqs %v, want 1..n", seqs)
		}
	}
	for _, want := range []string{"run_started", "suspended", "decision", "settled"} {
		if !strings.Contains(strings.Join(types, " "), want) {
			t.Errorf("events %v lack %s", types, want)
		}
	}
	// After: only later events; breaking out stops the iteration.
	n := 0
	for ev, err := range paged.Events(ctx, run.ID, 3) {
		if err != nil || ev.Seq <= 3 {
			t.Fatalf("after 3: %+v %v", ev, err)
		}
		if n++; n == 3 {
			break
		}
	}
}

// TestErrors goes through every route's errors: one typed error with the
// API's status and code.
func TestErrors(t *testing.T) {
	clk := clocktest.New(time.Now().UTC())
	s := apitest.Start(t, apitest.Options{Now: clk.Now})
	alice, bob, carol := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "carol")
	ctx := ctx(t)
	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "update", Approvers: []string{"bob"}, ApprovalTTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	run, err = bob.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil {
		t.Fatal(err)
	}
	digest := run.Pending.TurnDigest
	stranger, err := client.New(s.URL, client.WithBearerToken("not-a-token-of-this-server"), client.WithHTTPClient(s.Client(t)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"start: no approvers", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{}})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: approvers left nil", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x"})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: a message's content left nil", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Messages: []client.Message{{Role: "user"}}, Approvers: []string{"bob"}})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: unknown tool", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}, AllowedTools: []string{"rm_rf"}})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: an empty AllowedTools is sent, not dropped (dropped, it would allow every tool)", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}, AllowedTools: []string{}})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: a model not allowed", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}, Model: "gpt-huge"})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: a quorum the approvers cannot meet", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}, RequiredApprovals: 2})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: a client tool named like a builtin", func() error {
			_, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"},
				ClientTools: []client.ClientTool{{Name: "read_document", Effect: client.EffectRead, InputSchema: []byte(`{"type":"object"}`)}}})
			return err
		}, 422, client.CodeUnprocessable},
		{"start: unknown token", func() error {
			_, err := stranger.StartRun(ctx, client.StartRunRequest{Prompt: "x", Approvers: []string{"bob"}})
			return err
		}, 401, client.CodeUnauthorized},
		{"get: unknown run", func() error { _, err := alice.Run(ctx, "nope"); return err }, 404, client.CodeNotFound},
		{"get: not a party", func() error { _, err := carol.Run(ctx, run.ID); return err }, 403, client.CodeForbidden},
		{"events: not a party", func() error { _, err := carol.EventsPage(ctx, run.ID, 0, 0); return err }, 403, client.CodeForbidden},
		{"events: iterator yields the error", func() error {
			for _, err := range carol.Events(ctx, run.ID, 0) {
				return err
			}
			return nil
		}, 403, client.CodeForbidden},
		{"decide: not an approver", func() error { _, err := carol.Decide(ctx, run.ID, client.ApproveTurn(digest)); return err }, 403, client.CodeForbidden},
		{"decide: stale digest", func() error {
			_, err := bob.Decide(ctx, run.ID, client.ApproveTurn(strings.Repeat("0", 64)))
			return err
		}, 409, client.CodeConflict},
		{"decide: unknown call", func() error {
			_, err := bob.Decide(ctx, run.ID, client.Decision{TurnDigest: digest, Calls: []client.CallDecision{{CallID: "nope", Action: client.Approve}}})
			return err
		}, 422, client.CodeUnprocessable},
		{"decide: edit fails the schema", func() error {
			_, err := bob.Decide(ctx, run.ID, client.Decision{TurnDigest: digest, Calls: []client.CallDecision{
				{CallID: "toolu_write", Action: client.Edit, Input: []byte(`{"path":7}`)}}})
			return err
		}, 422, client.CodeUnprocessable},
		{"decide: deny a call that needs no approval", func() error {
			_, err := bob.Decide(ctx, run.ID, client.Decision{TurnDigest: digest, Calls: []client.CallDecision{
				{CallID: "toolu_write", Action: client.Approve}, {CallID: "toolu_read", Action: client.Deny}}})
			return err
		}, 422, client.CodeUnprocessable},
		{"decide: unknown run", func() error { _, err := bob.Decide(ctx, "nope", client.ApproveTurn(digest)); return err }, 404, client.CodeNotFound},
		{"cancel: not a party", func() error { _, err := carol.Cancel(ctx, run.ID); return err }, 403, client.CodeForbidden},
		{"cancel: unknown run", func() error { _, err := alice.Cancel(ctx, "nope"); return err }, 404, client.CodeNotFound},
		{"tool results: the run waits for approval", func() error {
			_, err := alice.SubmitToolResults(ctx, run.ID, client.ToolResults{ToolResultsID: "x", Results: []client.ToolResult{{CallID: "c", Content: "ok"}}})
			return err
		}, 409, client.CodeConflict},
		{"tool results: not the initiator", func() error {
			_, err := carol.SubmitToolResults(ctx, run.ID, client.ToolResults{ToolResultsID: "x", Results: []client.ToolResult{{CallID: "c", Content: "ok"}}})
			return err
		}, 403, client.CodeForbidden},
		{"tool results: unknown run", func() error {
			_, err := alice.SubmitToolResults(ctx, "nope", client.ToolResults{ToolResultsID: "x", Results: []client.ToolResult{{CallID: "c", Content: "ok"}}})
			return err
		}, 404, client.CodeNotFound},
		{"inbox: a cursor of another inbox", func() error {
			_, err := bob.PendingApprovalsPage(ctx, "not-a-cursor", 0)
			return err
		}, 422, client.CodeUnprocessable},
		{"inbox: limit out of range", func() error {
			_, err := bob.PendingApprovalsPage(ctx, "", 101)
			return err
		}, 400, client.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAPIError(t, tt.call(), tt.status, tt.code)
		})
	}

	// Past the deadline a decision is gone; a cancelled run cannot be
	// cancelled again, and Wait for a status it will never reach ends.
	clk.Advance(11 * time.Minute)
	_, err = bob.Decide(ctx, run.ID, client.ApproveTurn(digest))
	checkAPIError(t, err, 410, client.CodeGone)
	if _, err := alice.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Cancel(ctx, run.ID)
	checkAPIError(t, err, 409, client.CodeConflict)
	_, err = bob.Decide(ctx, run.ID, client.ApproveTurn(digest))
	checkAPIError(t, err, 409, client.CodeConflict)
	got, err := alice.Wait(ctx, run.ID, client.StatusCompleted)
	if !errors.Is(err, client.ErrRunEnded) || got == nil || got.Status != client.StatusCancelled {
		t.Errorf("Wait for COMPLETED on a cancelled run: %v, %v", got, err)
	}
}

func checkAPIError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *client.Error %d %s, got %v", status, code, err)
	}
	if e.StatusCode != status || e.Code != code || e.Message == "" {
		t.Errorf("got %d %q %q, want %d %q with a message", e.StatusCode, e.Code, e.Message, status, code)
	}
	if client.ErrorCode(err) != code {
		t.Errorf("ErrorCode: got %q, want %q", client.ErrorCode(err), code)
	}
}

// TestWaitRetriesTransientErrors: throttling and 5xx are retried, a 4xx
// ends the wait, and the context bounds it.
// TestStartRunSendsEmptyLists: an empty, non-nil AllowedTools or
// WebhookEvents goes on the wire as [] (the API refuses it) instead of
// being dropped by omitempty, which the API would read as "all"; nil ones
// are left out.
func TestStartRunSendsEmptyLists(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"r1","status":"QUEUED"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithBearerToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := []client.StartRunRequest{
		{Prompt: "x", Approvers: []string{"bob"}, AllowedTools: []string{}, WebhookURL: "https://h.example.com/", WebhookEvents: []string{}},
		{Prompt: "x", Approvers: []string{"bob"}},
		{Prompt: "x", Approvers: []string{"bob"}, AllowedTools: []string{"read_document"}, WebhookURL: "https://h.example.com/", WebhookEvents: []string{"run.completed"}},
	}
	for _, req := range reqs {
		if _, err := c.StartRun(ctx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []map[string]string{
		{"allowed_tools": `[]`, "webhook_events": `[]`},
		{"allowed_tools": "", "webhook_events": ""},
		{"allowed_tools": `["read_document"]`, "webhook_events": `["run.completed"]`},
	} {
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(bodies[i]), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if string(got[k]) != v {
				t.Errorf("request %d: %s is %q, want %q (body %s)", i, k, got[k], v, bodies[i])
			}
		}
		if got["prompt"] == nil || got["approvers"] == nil {
			t.Errorf("request %d: the other members are lost: %s", i, bodies[i])
		}
	}
}

func TestWaitRetriesTransientErrors(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"message":"Too Many Requests"}`))
		case 2:
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":{"code":"internal","message":"internal error"}}`))
		case 3:
			_, _ = w.Write([]byte(`{"id":"r1","status":"RUNNING"}`))
		default:
			_, _ = w.Write([]byte(`{"id":"r1","status":"COMPLETED","termination_reason":"completed"}`))
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Wait(ctx(t), "r1")
	if err != nil || r.Status != client.StatusCompleted || calls.Load() != 4 {
		t.Fatalf("got %+v %v after %d calls", r, err, calls.Load())
	}

	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(403)
		_, _ = w.Write([]byte(`{"message":"The security token included in the request is invalid."}`))
	}))
	defer forbidden.Close()
	c, _ = client.New(forbidden.URL, client.WithBearerToken("t"))
	_, err = c.Wait(ctx(t), "r1")
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 403 || e.Code != "" || !strings.Contains(e.Message, "security token") {
		t.Fatalf("API Gateway's own 403: got %v", err)
	}

	running := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"r1","status":"RUNNING"}`))
	}))
	defer running.Close()
	short := clocktest.NewDeadline() // its deadline passes once the first answer is read
	c, _ = client.New(running.URL, client.WithBearerToken("t"), client.WithPollInterval(time.Millisecond, time.Millisecond),
		client.WithHTTPClient(expireAfter(short, 1)))
	r, err = c.Wait(short, "r1")
	if !errors.Is(err, context.DeadlineExceeded) || r == nil || r.Status != client.StatusRunning {
		t.Fatalf("a run that never ends: %+v %v", r, err)
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "ftp://x", "http://", "https://x/prod?x=1", "::"} {
		if _, err := client.New(bad, client.WithBearerToken("t")); err == nil {
			t.Errorf("New(%q): want an error", bad)
		}
	}
	if _, err := client.New("https://x", client.WithBearerToken("t"), client.WithDefaultAWSCredentials()); err == nil {
		t.Error("a token and AWS credentials: want an error")
	}
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":     "eu-west-1",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"localhost:4566":  "",
		"api.example.com": "",
	} {
		if got := client.RegionOf(host); got != want {
			t.Errorf("RegionOf(%q) = %q, want %q", host, got, want)
		}
	}
}

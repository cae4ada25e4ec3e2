package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// WaitTimeout bounds Caller.WaitStatus. It only ends a failing test: the
// largest-state tests take over 30 s under the race detector on a busy
// machine.
const WaitTimeout = 3 * time.Minute

// Caller calls an agentgate REST API over HTTP as one caller: the one REST
// client of the tests (this package's suites, cmd/agentgate's stories and
// benchmark). The public client (client/) is tested against the same
// servers; Caller exists to send what a well-behaved client never would.
type Caller struct {
	// URL is the API's base URL (http://127.0.0.1:<port>); the paths of
	// requests are appended to it ("" for absolute URLs as paths).
	URL string
	// Token is the caller's bearer token; "" sends no Authorization header.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
	// Header holds headers sent with every request besides those Send
	// sets (an Idempotency-Key, say); nil: none.
	Header http.Header
}

// Response is one answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes a JSON answer into a map; nil for any other content type or
// a body that is not a JSON object.
func (r Response) JSON() map[string]any {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	var out map[string]any
	if json.Unmarshal(r.Body, &out) != nil {
		return nil
	}
	return out
}

// As returns a Caller of s as principal (one of Options.Principals; "":
// no token), whose traffic s's validator checks.
func (s *Server) As(t testing.TB, principal string) *Caller {
	c := &Caller{URL: s.URL, HTTP: s.Client(t)}
	if principal != "" {
		c.Token = s.Token(principal)
	}
	return c
}

// Send sends one request with body as is, of content type ctype (""
// sends no Content-Type). The error is a transport failure only: any
// status is a Response.
func (c *Caller) Send(ctx context.Context, method, path, ctype, body string) (Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return Response{}, err
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Call is Send for a test: a transport failure fails t.
func (c *Caller) Call(t testing.TB, method, path, ctype, body string) Response {
	t.Helper()
	r, err := c.Send(t.Context(), method, path, ctype, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Do sends v as JSON (nil: no body), fails t unless the answer has status
// want, and decodes the answer into into (nil: dropped).
func (c *Caller) Do(t testing.TB, method, path string, v any, want int, into any) {
	t.Helper()
	if err := c.DoJSON(t.Context(), method, path, v, want, into); err != nil {
		t.Fatal(err)
	}
}

// DoJSON is Do returning an error instead of failing a test (for
// goroutines and benchmarks).
func (c *Caller) DoJSON(ctx context.Context, method, path string, v any, want int, into any) error {
	body, ctype := "", ""
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		body, ctype = string(b), "application/json"
	}
	r, err := c.Send(ctx, method, path, ctype, body)
	if err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("%s %s: got %d, want %d: %s", method, path, r.Status, want, bytes.TrimSpace(r.Body))
	}
	if into != nil {
		if err := json.Unmarshal(r.Body, into); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, path, err, r.Body)
		}
	}
	return nil
}

// WaitStatus polls GET /runs/{id} until the run has status and decodes it
// into into (nil: dropped). A run that ends in another terminal status, or
// WaitTimeout, fails t.
func (c *Caller) WaitStatus(t testing.TB, id, status string, into any) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	// The poll backs off: every GET may be validated against the spec
	// (milliseconds of CPU, ten times that under -race), and a tight poll
	// takes the CPU the worker it waits for needs.
	pause := 20 * time.Millisecond
	for {
		var raw json.RawMessage
		c.Do(t, http.MethodGet, "/runs/"+id, nil, http.StatusOK, &raw)
		var run struct {
			Status string `json:"status"`
			Reason string `json:"termination_reason"`
		}
		if err := json.Unmarshal(raw, &run); err != nil {
			t.Fatal(err)
		}
		if run.Status == status {
			if into != nil {
				if err := json.Unmarshal(raw, into); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		switch run.Status {
		case "COMPLETED", "FAILED", "CANCELLED", "EXPIRED":
			t.Fatalf("run %s ended %s/%s while waiting for %s", id, run.Status, run.Reason, status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s after %s, want %s", id, run.Status, WaitTimeout, status)
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Millisecond)
	}
}

package gateway

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/routes"
)

// countingBody counts what the gateway reads of a request body.
type countingBody struct {
	n    atomic.Int64
	left int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > b.left {
		n = b.left
	}
	for i := range p[:n] {
		p[i] = 'x'
	}
	b.left -= n
	b.n.Add(n)
	return int(n), nil
}

func echoHandler(calls *atomic.Int64) Handler {
	return func(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		calls.Add(1)
		return events.APIGatewayProxyResponse{StatusCode: 200, Body: req.Body}, nil
	}
}

func TestAuthenticatesBeforeReadingTheBody(t *testing.T) {
	var calls atomic.Int64
	g := &Gateway{StartRun: echoHandler(&calls), Resume: echoHandler(&calls), Tokens: map[string]string{"good": "alice"}, MaxBody: 1 << 20}
	tests := []struct {
		name    string
		path    string
		auth    string
		size    int64
		want    int
		maxRead int64
	}{
		{"no token, 10 MB", "/runs", "", 10 << 20, 401, 0},
		{"bad token, 10 MB", "/runs", "Bearer nope", 10 << 20, 401, 0},
		{"not bearer, 10 MB", "/runs/r1/decision", "Basic eDp5", 10 << 20, 401, 0},
		{"good token, over the limit", "/runs", "Bearer good", 10 << 20, 413, 1<<20 + 1},
		{"good token, small", "/runs", "Bearer good", 100, 200, 100},
		{"good token, lower-case scheme", "/runs", "bearer good", 100, 200, 100},
		{"good token after two spaces", "/runs", "Bearer  good", 100, 200, 100},
		// Two Authorization headers (one per line here) are ambiguous, in
		// either order and even when both hold the same good token.
		{"good then bad token", "/runs", "Bearer good\nBearer nope", 100, 401, 0},
		{"bad then good token", "/runs", "Bearer nope\nBearer good", 100, 401, 0},
		{"good token twice", "/runs", "Bearer good\nBearer good", 100, 401, 0},
		{"approval link, over its limit", "/approvals/tok", "", 10 << 20, 413, MaxLinkBody + 1},
		{"approval link, form", "/approvals/tok", "", 200, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingBody{left: tt.size}
			r := httptest.NewRequest("POST", tt.path, body)
			r.ContentLength = -1 // unknown: the gateway must not trust it to stop reading
			if tt.auth != "" {
				for _, a := range strings.Split(tt.auth, "\n") {
					r.Header.Add("Authorization", a)
				}
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if got := body.n.Load(); got > tt.maxRead+32<<10 {
				t.Errorf("read %d bytes of the body, want at most about %d", got, tt.maxRead)
			}
			if strings.Contains(tt.auth, "\n") && !strings.Contains(w.Body.String(), "one Authorization header") {
				t.Errorf("answer %s does not say why", w.Body)
			}
			if tt.want == 401 && body.n.Load() != 0 {
				t.Errorf("read %d bytes of an unauthenticated body, want 0", body.n.Load())
			}
			if tt.want == 401 && (w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("X-Content-Type-Options") != "nosniff") {
				t.Errorf("a 401 with headers %v, want Cache-Control: no-store and X-Content-Type-Options: nosniff as every API answer", w.Header())
			}
		})
	}
	if calls.Load() != 4 {
		t.Errorf("handler called %d times, want 4 (the small good-token requests and the form)", calls.Load())
	}
}

// TestUnauthenticatedUploadOverTCP: over a real connection, a request that
// announces 10 MB and sends none of it is answered 401 at once.
func TestUnauthenticatedUploadOverTCP(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(&Gateway{StartRun: echoHandler(&calls), Resume: echoHandler(&calls), Tokens: map[string]string{"good": "alice"}})
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 401") {
		t.Fatalf("got %q (%v), want an immediate 401 without the body", buf[:n], err)
	}
	if calls.Load() != 0 {
		t.Errorf("the handler ran for an unauthenticated request")
	}
}

// TestRoutesFollowTheTable: every route of the table reaches its function's
// handler with its path template as the resource and its parameters, a
// bearer token is required exactly where the route is authenticated, and
// a path the table does not know is answered 404 by the gateway itself.
func TestRoutesFollowTheTable(t *testing.T) {
	var got events.APIGatewayProxyRequest
	served := map[routes.Function]int{}
	handler := func(fn routes.Function) Handler {
		return func(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			served[fn]++
			got = req
			return events.APIGatewayProxyResponse{StatusCode: 204}, nil
		}
	}
	g := &Gateway{StartRun: handler(routes.StartRun), Resume: handler(routes.Resume), Tokens: map[string]string{"good": "alice"}}
	for _, rt := range routes.All() {
		t.Run(rt.String(), func(t *testing.T) {
			path := strings.NewReplacer("{id}", "r1", "{token}", "tok").Replace(rt.Path)
			for _, auth := range []string{"", "Bearer good"} {
				clear(served)
				r := httptest.NewRequest(rt.Method, path, nil)
				if auth != "" {
					r.Header.Set("Authorization", auth)
				}
				w := httptest.NewRecorder()
				g.ServeHTTP(w, r)
				switch {
				case rt.Function == routes.Local:
					if w.Code != 200 || len(served) != 0 {
						t.Errorf("auth %q: %d, functions %v; want 200 from the gateway itself", auth, w.Code, served)
					}
				case rt.Authenticated && auth == "":
					if w.Code != 401 || len(served) != 0 {
						t.Errorf("no token: %d, functions %v; want 401", w.Code, served)
					}
				default:
					if w.Code != 204 || served[rt.Function] != 1 || len(served) != 1 {
						t.Fatalf("auth %q: %d, functions %v; want 204 from %s", auth, w.Code, served, rt.Function)
					}
					if got.Resource != rt.Path || got.HTTPMethod != rt.Method {
						t.Errorf("event %s %s, want %s", got.HTTPMethod, got.Resource, rt)
					}
					for _, p := range routes.Params(rt.Path) {
						if got.PathParameters[p] == "" {
							t.Errorf("path parameter %s missing: %v", p, got.PathParameters)
						}
					}
					if rt.Authenticated && got.RequestContext.Authorizer["principalId"] != "alice" {
						t.Errorf("principal %v, want alice", got.RequestContext.Authorizer)
					}
				}
			}
		})
	}
	for _, path := range []string{"/", "/runs/r1/other", "/runs/r1/events/x", "/approvals/a/b", "/nope"} {
		clear(served)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 404 || len(served) != 0 {
			t.Errorf("GET %s: %d, functions %v; want 404 from the gateway", path, w.Code, served)
		}
	}
}

// TestRefusalsOnLinkRoutesArePages: the approval-link routes answer a
// person's browser, so the gateway's own refusals there (a body over the
// link limit, a malformed query string) are the HTML problem page; the API
// routes keep JSON. A malformed query pair is refused, not dropped.
func TestRefusalsOnLinkRoutesArePages(t *testing.T) {
	var calls atomic.Int64
	g := &Gateway{StartRun: echoHandler(&calls), Resume: echoHandler(&calls), Tokens: map[string]string{"good": "alice"}}
	for _, tt := range []struct {
		name, method, target, auth string
		size                       int64
		want                       int
		html                       bool
	}{
		{"link, body over its limit", "POST", "/approvals/tok", "", MaxLinkBody + 1, 413, true},
		{"link, malformed query", "GET", "/approvals/tok?call=%zz", "", 0, 400, true},
		{"API, malformed query", "GET", "/runs/r1/events?limit=1&limit=%zz", "Bearer good", 0, 400, false},
		{"API, semicolon pair", "GET", "/runs/r1?wait=1;wait=2", "Bearer good", 0, 400, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, &countingBody{left: tt.size})
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			ct := w.Header().Get("Content-Type")
			if w.Code != tt.want || strings.HasPrefix(ct, "text/html") != tt.html {
				t.Errorf("%d %s, want %d (html %v): %s", w.Code, ct, tt.want, tt.html, w.Body)
			}
			if tt.html && w.Header().Get("Content-Security-Policy") == "" {
				t.Errorf("a page without the pages' security headers: %v", w.Header())
			}
		})
	}
	if calls.Load() != 0 {
		t.Errorf("handler called %d times for refused requests", calls.Load())
	}
}

// TestAnEscapedSlashStaysInItsParameter: a call id holding "/" sent
// escaped (%2F, as the Go client sends it) is one path parameter, as on
// API Gateway, not two segments.
func TestAnEscapedSlashStaysInItsParameter(t *testing.T) {
	var got events.APIGatewayProxyRequest
	h := func(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		got = req
		return events.APIGatewayProxyResponse{StatusCode: 204}, nil
	}
	g := &Gateway{StartRun: h, Resume: h, Tokens: map[string]string{"good": "alice"}}
	r := httptest.NewRequest("GET", "/runs/r1/calls/a%2Fb%20c", nil)
	r.Header.Set("Authorization", "Bearer good")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != 204 || got.Resource != "/runs/{id}/calls/{call_id}" || got.PathParameters["call_id"] != "a/b c" {
		t.Errorf("got %d, resource %q, parameters %v", w.Code, got.Resource, got.PathParameters)
	}
}

// TestALinkAddressSpelledOtherwiseIsAPage: a link route's path with a
// slash added is no route, answered as the link routes answer a browser.
func TestALinkAddressSpelledOtherwiseIsAPage(t *testing.T) {
	var calls atomic.Int64
	g := &Gateway{StartRun: echoHandler(&calls), Resume: echoHandler(&calls), Tokens: map[string]string{"good": "alice"}}
	for _, path := range []string{"/approvals/abc/", "/approvals//abc"} {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 404 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest("GET", "/runs/r1/", nil))
	if w.Code != 404 || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Errorf("/runs/r1/: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

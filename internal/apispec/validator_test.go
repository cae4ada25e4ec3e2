package apispec_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/apispec"
)

const runJSON = `{"id":"r1","status":"QUEUED","version":1,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z",
"initiator":"alice","approvers":["bob"],"counters":{"iterations":0,"model_calls":0,"input_tokens":0,"output_tokens":0,"tool_calls":0},
"links":{"self":"/runs/r1","events":"/runs/r1/events","decision":"/runs/r1/decision","cancel":"/runs/r1/cancel"}}`

func apiHeaders(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

// etag is an entity tag of the form GET /runs/{id} answers.
const etag = `"0123456789abcdef0123456789abcdef"`

// runHeaders are the headers of a 200 to GET /runs/{id}.
func runHeaders() http.Header { return apiHeaders("ETag", etag) }

// notModified are the headers of a 304 (an empty value: none).
func notModified(tag, cacheControl string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{"ETag": tag, "Cache-Control": cacheControl} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func exchange(t *testing.T, method, path, reqBody string, status int, h http.Header, body string) apispec.Exchange {
	t.Helper()
	req, err := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reqBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return apispec.Exchange{Request: req, RequestBody: []byte(reqBody), Authenticated: true, Status: status, Header: h, Body: []byte(body)}
}

// TestValidatorCatches checks that the harness fails exchanges the spec
// does not describe, and passes the ones it does.
func TestValidatorCatches(t *testing.T) {
	v := apispec.MustValidator(t)
	start := `{"prompt":"x","approvers":["bob"]}`
	errBody := func(code string) string { return `{"error":{"code":"` + code + `","message":"m"}}` }
	tests := []struct {
		name    string
		x       apispec.Exchange
		wantErr string // "" = valid
	}{
		{"described start", exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "/runs/r1"), runJSON), ""},
		{"missing Location", exchange(t, "POST", "/runs", start, 202, apiHeaders(), runJSON), "Location"},
		{"Location under the stage", exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "/v1/runs/r1"), runJSON), ""},
		{"Location to another host", exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "//evil.example/runs/r1"), runJSON), "Location"},
		{"undeclared status", exchange(t, "POST", "/runs", start, 410, apiHeaders(), errBody("gone")), "status is not supported"},
		{"undescribed field", exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "/runs/r1"),
			strings.Replace(runJSON, `"version":1`, `"version":1,"colour":"red"`, 1)), "does not describe this response"},
		{"wrong content type", exchange(t, "GET", "/runs/r1", "", 200, http.Header{"Content-Type": {"text/plain"},
			"Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}}, runJSON), "does not describe this response"},
		{"unknown error code", exchange(t, "GET", "/runs/r1", "", 404, apiHeaders(), errBody("missing")), "does not describe this response"},
		{"error without message", exchange(t, "GET", "/runs/r1", "", 404, apiHeaders(), `{"error":{"code":"not_found"}}`), "does not describe this response"},
		{"invalid request accepted", exchange(t, "POST", "/runs", `{"prompt":"x"}`, 202, apiHeaders("Location", "/runs/r1"), runJSON), "refuses this request but the server accepted it"},
		{"invalid request refused", exchange(t, "POST", "/runs", `{"prompt":"x"}`, 422, apiHeaders(), errBody("unprocessable")), ""},
		{"valid request called malformed", exchange(t, "POST", "/runs", start, 400, apiHeaders(), errBody("bad_request")), "refused it as malformed"},
		{"unknown field accepted", exchange(t, "POST", "/runs", `{"prompt":"x","approvers":["bob"],"colour":"red"}`, 202,
			apiHeaders("Location", "/runs/r1"), runJSON), "refuses this request but the server accepted it"},
		{"undescribed response field", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(),
			strings.Replace(runJSON, `"version":1`, `"version":1,"votes_missing":1`, 1)), "does not describe this response"},
		{"votes of a quorum", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(),
			strings.Replace(runJSON, `"version":1`, `"version":1,"votes_needed":1,"votes":[{"by":"ann@example.com","action":"approve","at":"2030-01-01T00:00:00Z","via":"link"}]`, 1)), ""},
		{"tool results accepted", exchange(t, "POST", "/runs/r1/tool-results", `{"tool_results_id":"x","results":[{"call_id":"c","content":"ok"}]}`, 202, apiHeaders(),
			strings.Replace(runJSON, "QUEUED", "RESUMING", 1)), ""},
		{"tool results answered with nothing", exchange(t, "POST", "/runs/r1/tool-results", `{"tool_results_id":"x","results":[{"call_id":"c","content":"ok"}]}`, 202, apiHeaders(), `{}`), "does not describe this response"},
		{"waiting for tool results", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(),
			strings.Replace(strings.Replace(runJSON, "QUEUED", "WAITING_FOR_TOOL_RESULTS", 1), `"version":1`,
				`"version":1,"tool_results":{"tool_results_id":"tr","deadline":"2030-01-01T00:00:00Z","calls":[{"id":"c1","name":"lookup","input":{"sku":"A"}}]}`, 1)), ""},
		{"run", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(), runJSON), ""},
		{"run without ETag", exchange(t, "GET", "/runs/r1", "", 200, apiHeaders(), runJSON), `"ETag" missing`},
		{"run with a weak ETag", exchange(t, "GET", "/runs/r1", "", 200, apiHeaders("ETag", "W/"+etag), runJSON), "ETag"},
		{"not modified", exchange(t, "GET", "/runs/r1", "", 304, notModified(etag, "no-store"), ""), ""},
		{"not modified without ETag", exchange(t, "GET", "/runs/r1", "", 304, notModified("", "no-store"), ""), `"ETag" missing`},
		{"not modified with a body", exchange(t, "GET", "/runs/r1", "", 304, notModified(etag, "no-store"), runJSON), "304 response has a body"},
		{"not modified elsewhere", exchange(t, "GET", "/runs/r1/events", "", 304, notModified(etag, "no-store"), ""), "status is not supported"},
		{"not modified with a weak ETag", exchange(t, "GET", "/runs/r1", "", 304, notModified("W/"+etag, "no-store"), ""), "doesn't match schema"},
		{"not modified, cacheable", exchange(t, "GET", "/runs/r1", "", 304, notModified(etag, "max-age=60"), ""), "Cache-Control"},
		{"a malformed If-None-Match answered with the run", func() apispec.Exchange {
			x := exchange(t, "GET", "/runs/r1", "", 200, runHeaders(), runJSON)
			x.Request.Header.Set("If-None-Match", "not a tag")
			return x
		}(), ""},
		{"inbox page", exchange(t, "GET", "/approvals?limit=2", "", 200, apiHeaders(), `{"approvals":[{"run_id":"r1","suspension_id":"s1","turn_digest":"`+strings.Repeat("a", 64)+`","initiator":"alice","purpose":"p","tools":["write_document"],"deadline":"2030-01-01T00:00:00Z","suspended_at":"2029-12-31T00:00:00Z","votes_needed":1,"votes_missing":1}],"next_cursor":"x"}`), ""},
		{"inbox entry without deadline", exchange(t, "GET", "/approvals", "", 200, apiHeaders(), `{"approvals":[{"run_id":"r1","suspension_id":"s1","initiator":"alice","purpose":"p","tools":[],"suspended_at":"2029-12-31T00:00:00Z","votes_needed":1,"votes_missing":1}]}`), "deadline"},
		{"405 without Allow", exchange(t, "GET", "/runs", "", 405, apiHeaders(), errBody("method_not_allowed")), "Allow"},
		{"405 with Allow", exchange(t, "GET", "/runs", "", 405, apiHeaders("Allow", "POST"), errBody("method_not_allowed")), ""},
		{"HEAD with a body", exchange(t, "HEAD", "/approvals/"+strings.Repeat("a", 43), "", 200, pageHeaders(), "<html>"), "HEAD response has a body"},
		{"page without CSP", exchange(t, "GET", "/approvals/"+strings.Repeat("a", 43), "", 200, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, "<html>"), "missing"},
		{"page", exchange(t, "GET", "/approvals/"+strings.Repeat("a", 43), "", 200, pageHeaders(), "<html>"), ""},
		// The bodies are checked apart from openapi3filter (bodySchemas).
		{"start without a body accepted", exchange(t, "POST", "/runs", "", 202, apiHeaders("Location", "/runs/r1"), runJSON), "value is required but missing"},
		{"start as text accepted", func() apispec.Exchange {
			x := exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "/runs/r1"), runJSON)
			x.Request.Header.Set("Content-Type", "text/plain")
			return x
		}(), "Content-Type has unexpected value"},
		{"start with a charset", func() apispec.Exchange {
			x := exchange(t, "POST", "/runs", start, 202, apiHeaders("Location", "/runs/r1"), runJSON)
			x.Request.Header.Set("Content-Type", "application/json; charset=utf-8")
			return x
		}(), ""},
		{"a time that is not a date-time", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(),
			strings.Replace(runJSON, `"created_at":"2026-01-02T03:04:05Z"`, `"created_at":"yesterday"`, 1)), "date-time"},
		{"a page that is not a string", exchange(t, "GET", "/runs/r1", "", 200, runHeaders(), `[]`), "does not describe this response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Check(context.Background(), tt.x)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("want no mismatch, got %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("want a mismatch mentioning %q, got none", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("want a mismatch mentioning %q, got %v", tt.wantErr, err)
			}
		})
	}
}

func pageHeaders() http.Header {
	return http.Header{
		"Content-Type":            {"text/html; charset=utf-8"},
		"Content-Security-Policy": {"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
		"Referrer-Policy":         {"no-referrer"},
		"Cache-Control":           {"no-store"},
		"X-Content-Type-Options":  {"nosniff"},
		"X-Frame-Options":         {"DENY"},
	}
}

// fakeTB records Errorf calls.
type fakeTB struct {
	testing.TB
	errs []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, format)
}

func TestHandlerWrapperReportsMismatch(t *testing.T) {
	v := apispec.MustValidator(t)
	tb := &fakeTB{TB: t}
	h := v.Handler(tb, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{}`}, nil
	})
	ev := events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/runs/r1", PathParameters: map[string]string{"id": "r1"}}
	ev.RequestContext.Identity.UserArn = "arn:aws:iam::123456789012:user/alice"
	if _, err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(tb.errs) != 1 {
		t.Fatalf("want one reported mismatch, got %d", len(tb.errs))
	}
	seen := v.Seen()["GET /runs/{id}"][200]
	if seen != 1 {
		t.Errorf("Seen: got %d for GET /runs/{id} 200, want 1", seen)
	}
}

package httpapi_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartLocationResolvesToTheRun: the Location of a 202 on POST /runs,
// resolved against the request URL as RFC 9110 says a client does, is the
// run's own URL under any stage, and the body's links stay
// relative to the API's base URL. It was /runs/{id}, which a client on the
// stage URL resolved to https://…/runs/{id}, outside the stage (403 from
// API Gateway; outside tester helper-113).
func TestStartLocationResolvesToTheRun(t *testing.T) {
	const body = `{"prompt":"update pricing","approvers":["` + bob + `"]}`
	tests := []struct {
		name        string
		base        string // the API's base URL, which the links are relative to
		path        string // the event's path
		contextPath string // the event's requestContext.path
		stage       string
		want        string // Location, with ID for the run's id
	}{
		{"stage URL", "https://abc123.execute-api.eu-west-1.amazonaws.com/v1", "/runs", "/v1/runs", "v1", "/v1/runs/ID"},
		{"custom domain at its root", "https://api.example.com", "/runs", "/runs", "v1", "/runs/ID"},
		{"local server", "http://127.0.0.1:8080", "/runs", "/runs", "local", "/runs/ID"},
		{"event without a request context path", "http://127.0.0.1:8080", "/runs", "", "", "/runs/ID"},
		// A prefix that is not plain segments is left out: "//evil…" would
		// make the header a network-path reference to another host.
		{"network-path prefix", "http://127.0.0.1:8080", "/runs", "//evil.example/runs", "v1", "/runs/ID"},
		{"dot segment", "http://127.0.0.1:8080", "/runs", "/v1/../runs", "v1", "/runs/ID"},
		{"escaped prefix", "http://127.0.0.1:8080", "/runs", "/a%2Fb/runs", "v1", "/runs/ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			r := req("POST", tt.path, alice, body)
			r.RequestContext.Path, r.RequestContext.Stage = tt.contextPath, tt.stage
			resp := f.handle(r)
			require.Equal(t, 202, resp.StatusCode, resp.Body)
			var out struct {
				ID    string            `json:"id"`
				Links map[string]string `json:"links"`
			}
			require.NoError(t, json.Unmarshal([]byte(resp.Body), &out))
			loc := resp.Headers["Location"]
			assert.Equal(t, tt.want[:len(tt.want)-len("ID")]+out.ID, loc)
			if tt.name == "network-path prefix" || tt.name == "dot segment" || tt.name == "escaped prefix" {
				return
			}
			requestURL, err := url.Parse(tt.base + "/runs")
			require.NoError(t, err)
			ref, err := url.Parse(loc)
			require.NoError(t, err)
			assert.Equal(t, tt.base+out.Links["self"], requestURL.ResolveReference(ref).String(),
				"Location resolved against the request URL is the base URL plus links.self")
			assert.Equal(t, "/runs/"+out.ID, out.Links["self"], "links stay relative to the API's base URL")
		})
	}
}

package httpapi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGetRunWaitIsBoundedByMaxWait: the deployed functions (MaxWait 0)
// answer a waiting GET at once with the run as it is; a server with a
// MaxWait holds it at most that long, whatever wait asks for.
func TestGetRunWaitIsBoundedByMaxWait(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	path := fmt.Sprintf("/runs/%s", r.ID)
	waiting := req("GET", path, alice, "")
	waiting.QueryStringParameters = map[string]string{"after_version": fmt.Sprint(r.Version), "wait": "20"}

	status, out := f.call(waiting)
	require.Equal(t, 200, status, out)
	require.EqualValues(t, r.Version, out["version"], "MaxWait 0: answered at once, unchanged")

	f.api.MaxWait = time.Millisecond
	status, out = f.call(waiting)
	require.Equal(t, 200, status, out)
	require.EqualValues(t, r.Version, out["version"], "the wait ended at MaxWait with the run unchanged")

	noVersion := req("GET", path, alice, "")
	noVersion.QueryStringParameters = map[string]string{"wait": "5"}
	status, out = f.call(noVersion)
	require.Equal(t, 422, status, out)

	forbidden := waiting
	forbidden.RequestContext.Identity.UserArn = "arn:aws:iam::123456789012:user/mallory"
	status, out = f.call(forbidden)
	require.Equal(t, 403, status, "authorization comes before any wait: %v", out)
}

// TestRepeatedQueryParameterIsRefused: every parameter takes one value, and
// API Gateway passes the function only the last of repeated ones, so
// ?wait=1&wait=20 is a 400 naming the parameter, on every operation,
// rather than read as either value.
func TestRepeatedQueryParameterIsRefused(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	for _, path := range []string{"/runs/" + r.ID, "/runs/" + r.ID + "/events", "/approvals"} {
		repeated := req("GET", path, alice, "")
		repeated.QueryStringParameters = map[string]string{"limit": "20", "wait": "20"}
		repeated.MultiValueQueryStringParameters = map[string][]string{"limit": {"20"}, "wait": {"1", "20"}}
		status, out := f.call(repeated)
		require.Equal(t, 400, status, "%s: %v", path, out)
		require.Contains(t, fmt.Sprint(out), `query parameter "wait" is given more than once`, path)

		once := repeated
		once.QueryStringParameters = map[string]string{"limit": "20"}
		once.MultiValueQueryStringParameters = map[string][]string{"limit": {"20"}}
		status, out = f.call(once)
		require.Equal(t, 200, status, "%s: %v", path, out)
	}
}

// TestRepeatedQueryParameterOnALinkIsAPage: on the approval-link routes a
// repeated parameter gets the HTML problem page, as every answer there.
func TestRepeatedQueryParameterOnALinkIsAPage(t *testing.T) {
	f := newFixture(t)
	for _, method := range []string{"GET", "HEAD", "POST"} {
		r := req(method, "/approvals/abc", "", "")
		r.QueryStringParameters = map[string]string{"call": "b"}
		r.MultiValueQueryStringParameters = map[string][]string{"call": {"a", "b"}}
		resp, err := f.api.Handle(t.Context(), r)
		require.NoError(t, err)
		require.Equal(t, 400, resp.StatusCode, method)
		require.Contains(t, resp.Headers["Content-Type"], "text/html", method)
		if method != "HEAD" {
			require.Contains(t, resp.Body, "given more than once", method)
		} else {
			require.Empty(t, resp.Body)
		}
	}
}

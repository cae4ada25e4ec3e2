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

package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/httpapi"
)

// TestIdempotencyKeyGivenTwiceIsRefused: API Gateway hands the function
// the last of repeated header values in Headers, so a key given twice (or
// in two spellings of the name) is a 400 naming the header rather than
// read as either value; once, it starts the run.
func TestIdempotencyKeyGivenTwiceIsRefused(t *testing.T) {
	f := newFixture(t)
	const body = `{"prompt":"update pricing","approvers":["` + bob + `"]}`
	repeated := req("POST", "/runs", alice, body)
	repeated.Headers["Idempotency-Key"] = "k-2"
	repeated.MultiValueHeaders = map[string][]string{"Idempotency-Key": {"k-1", "k-2"}}
	status, out := f.call(repeated)
	require.Equal(t, 400, status, "%v", out)
	require.Contains(t, fmt.Sprint(out), "Idempotency-Key is given 2 times")

	spellings := req("POST", "/runs", alice, body)
	spellings.Headers["Idempotency-Key"] = "k-1"
	spellings.Headers["idempotency-key"] = "k-2"
	status, out = f.call(spellings)
	require.Equal(t, 400, status, "%v", out)

	once := req("POST", "/runs", alice, body)
	once.Headers["idempotency-key"] = "k-1"
	once.MultiValueHeaders = map[string][]string{"idempotency-key": {"k-1"}}
	status, out = f.call(once)
	require.Equal(t, 202, status, "%v", out)
}

// TestReplayIsNotJudgedAgain: a start sent again under its key gets its run
// even when the request would be refused now (the deployment no longer
// allows its model), and dispatches nothing: the run stands, and a run
// whose first dispatch was lost is the sweep's to dispatch again.
func TestReplayIsNotJudgedAgain(t *testing.T) {
	f := newFixture(t)
	f.api.AllowedModels = []string{"m-1"}
	const body = `{"prompt":"update pricing","model":"m-1","approvers":["` + bob + `"]}`
	first := req("POST", "/runs", alice, body)
	first.Headers["Idempotency-Key"] = "k-1"
	resp := f.handle(first)
	require.Equal(t, 202, resp.StatusCode, resp.Body)
	require.Empty(t, resp.Headers[httpapi.ReplayedHeader])
	f.mu.Lock()
	f.jobs = nil // the dispatch was lost
	f.mu.Unlock()

	f.api.AllowedModels = nil
	again := f.handle(first)
	require.Equal(t, 202, again.StatusCode, again.Body)
	require.Equal(t, "true", again.Headers[httpapi.ReplayedHeader])
	require.Equal(t, resp.Headers["Location"], again.Headers["Location"])
	f.mu.Lock()
	require.Empty(t, f.jobs, "a replay dispatches nothing")
	f.mu.Unlock()

	other := req("POST", "/runs", alice, body)
	other.Headers["Idempotency-Key"] = "k-2"
	status, out := f.call(other)
	require.Equal(t, 422, status, "a new key's request is judged: %v", out)

	// The run the lost dispatch left QUEUED is due for the sweep's.
	due, _, err := f.store.Due(t.Context(), f.clock.Now().Add(f.store.DispatchGrace()), 10, "")
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, "/runs/"+due[0].ID, resp.Headers["Location"])
}

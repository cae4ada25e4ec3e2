package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/runs"
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

// rowTrace records, in order, the row store calls a request makes.
type rowTrace struct {
	runs.RowStore
	mu    sync.Mutex
	calls []string
}

func (r *rowTrace) record(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *rowTrace) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func (r *rowTrace) GetRun(ctx context.Context, id string) (*runs.Run, error) {
	r.record("GetRun")
	return r.RowStore.GetRun(ctx, id)
}

func (r *rowTrace) Write(ctx context.Context, w runs.Write) error {
	err := r.RowStore.Write(ctx, w)
	if err != nil {
		r.record("Write:" + runs.ErrorCode(err))
	} else {
		r.record("Write")
	}
	return err
}

func (r *rowTrace) IdempotencyKey(ctx context.Context, hash string) (*runs.IdempotencyKey, error) {
	r.record("IdempotencyKey")
	return r.RowStore.IdempotencyKey(ctx, hash)
}

// TestKeyedStartWritesFirst: every start the Go client sends carries a
// key, so the key must cost the common path (the first request under it)
// no request more than the write that creates the run, which holds the
// key on the condition that it is new (issue #15 counts the cycle's SDK
// calls). The key is read only when that write is refused for it, or when
// the request is refused as it is judged now (a request sent again gets
// its run even if the policy would refuse it today).
func TestKeyedStartWritesFirst(t *testing.T) {
	var rows *rowTrace
	f := buildFixture(t, t.TempDir(), script, func(db runs.RowStore) runs.RowStore {
		rows = &rowTrace{RowStore: db}
		return rows
	})
	f.t = t
	f.api.AllowedModels = []string{"m-1"}
	const body = `{"prompt":"update pricing","model":"m-1","approvers":["` + bob + `"]}`
	keyed := func(key, body string) events.APIGatewayProxyRequest {
		r := req("POST", "/runs", alice, body)
		r.Headers["Idempotency-Key"] = key
		return r
	}

	first := f.handle(keyed("k-1", body))
	require.Equal(t, 202, first.StatusCode, first.Body)
	require.Equal(t, []string{"Write"}, rows.take(), "the first start under a key: its write alone, no read before it")

	again := f.handle(keyed("k-1", body))
	require.Equal(t, 202, again.StatusCode, again.Body)
	require.Equal(t, "true", again.Headers[httpapi.ReplayedHeader])
	require.Equal(t, first.Headers["Location"], again.Headers["Location"])
	require.Equal(t, []string{"Write:conflict", "IdempotencyKey", "GetRun"}, rows.take(), "a replay: the refused write, then the key and its run")

	// Judged now, the request would be refused: the key is read, and the
	// run it started is the answer.
	f.api.AllowedModels = nil
	judged := f.handle(keyed("k-1", body))
	require.Equal(t, 202, judged.StatusCode, judged.Body)
	require.Equal(t, "true", judged.Headers[httpapi.ReplayedHeader])
	require.Equal(t, first.Headers["Location"], judged.Headers["Location"])
	require.Equal(t, []string{"IdempotencyKey", "GetRun"}, rows.take())

	// Refused now, under a key that started nothing: the refusal.
	status, out := f.call(keyed("k-2", body))
	require.Equal(t, 422, status, "%v", out)
	require.Contains(t, fmt.Sprint(out), `model "m-1" is not allowed`)
	require.Equal(t, []string{"IdempotencyKey"}, rows.take())

	// Another request under k-1, refused now or not: 422 naming the run.
	f.api.AllowedModels = []string{"m-1"}
	for _, other := range []string{
		`{"prompt":"update pricing now","model":"m-1","approvers":["` + bob + `"]}`,
		`{"prompt":"update pricing now","model":"m-2","approvers":["` + bob + `"]}`,
	} {
		status, out = f.call(keyed("k-1", other))
		require.Equal(t, 422, status, "%v", out)
		require.Contains(t, fmt.Sprint(out), "different request")
		require.Contains(t, fmt.Sprint(out), strings.TrimPrefix(first.Headers["Location"], "/runs/"))
	}
}

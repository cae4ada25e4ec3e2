package runstest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// keyedStart is a start of initiator's under an idempotency key, with the
// digest of its request.
func keyedStart(initiator, key, digest string) runs.NewRun {
	return runs.NewRun{
		Initiator: initiator, Approvers: []string{"bob"}, Request: json.RawMessage(`{"prompt":"file the report"}`),
		IdempotencyKey: key, RequestSHA256: digest,
	}
}

// storedRuns lists the runs the store holds, through the due index: every
// run these cases list is QUEUED or RUNNING, due within DispatchGrace.
func (e *Env) storedRuns(t *testing.T) []string {
	t.Helper()
	due, _, err := e.Store.Due(t.Context(), e.Clock.Now().Add(DispatchGrace+time.Hour), 1000, "")
	require.NoError(t, err)
	var ids []string
	for _, r := range due {
		ids = append(ids, r.ID)
	}
	return ids
}

const (
	digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// testIdempotencyKeys: a start under a key creates a run once; the same
// key and request again get that run and store nothing; the same key with
// another request is refused, naming the run; another caller's key of the
// same name is another key; a purged run frees its key.
func testIdempotencyKeys(t *testing.T, e *Env) {
	ctx := t.Context()
	first, replayed, err := e.Store.Start(ctx, keyedStart("alice", "order-42", digestA))
	require.NoError(t, err)
	require.False(t, replayed, "the first start under a key creates the run")

	e.Clock.Advance(time.Second)
	again, replayed, err := e.Store.Start(ctx, keyedStart("alice", "order-42", digestA))
	require.NoError(t, err)
	assert.True(t, replayed, "a second start under the key is a replay")
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, first.Version, again.Version, "a replay writes nothing")
	assert.Equal(t, []string{first.ID}, e.storedRuns(t), "one run")
	assert.Equal(t, []string{runs.EventRunStarted}, e.eventTypes(t, first.ID))

	got, err := e.Store.KeyedRun(ctx, "alice", "order-42", digestA)
	require.NoError(t, err)
	assert.Equal(t, first.ID, got.ID)
	// The run as it is now, not as it was created.
	claimed, err := e.Store.Claim(ctx, first.ID, "w1")
	require.NoError(t, err)
	again, replayed, err = e.Store.Start(ctx, keyedStart("alice", "order-42", digestA))
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, claimed.Version, again.Version)
	assert.Equal(t, runs.StatusRunning, again.Status)

	// Another request under the key is refused, naming the key's run.
	_, _, err = e.Store.Start(ctx, keyedStart("alice", "order-42", digestB))
	AssertCode(t, runs.EInvalid, err)
	assert.Contains(t, err.Error(), first.ID)
	_, err = e.Store.KeyedRun(ctx, "alice", "order-42", digestB)
	AssertCode(t, runs.EInvalid, err)
	assert.Contains(t, err.Error(), first.ID)
	_, err = e.Store.KeyedRun(ctx, "alice", "order-43", digestA)
	AssertCode(t, runs.ENotFound, err)

	// Keys are the caller's: bob's "order-42" is not alice's.
	bobs, replayed, err := e.Store.Start(ctx, keyedStart("bob", "order-42", digestB))
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.NotEqual(t, first.ID, bobs.ID)
	assert.ElementsMatch(t, []string{first.ID, bobs.ID}, e.storedRuns(t))
	// An assumed-role session is its role: another session of one role
	// is the same caller.
	const role = "arn:aws:sts::123456789012:assumed-role/ci/"
	ci, replayed, err := e.Store.Start(ctx, keyedStart(role+"session-1", "deploy-7", digestA))
	require.NoError(t, err)
	require.False(t, replayed)
	ci2, replayed, err := e.Store.Start(ctx, keyedStart(role+"session-2", "deploy-7", digestA))
	require.NoError(t, err)
	assert.True(t, replayed, "another session of the role replays the role's key")
	assert.Equal(t, ci.ID, ci2.ID)

	// A start without a key is not affected by keys.
	plain, err := e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Request: json.RawMessage(`{"prompt":"file the report"}`)})
	require.NoError(t, err)
	assert.NotEqual(t, first.ID, plain.ID)

	// A key names its run while the run is kept: once purged, the key
	// starts a new run.
	_, err = e.Store.Cancel(ctx, claimed, "alice")
	require.NoError(t, err)
	require.NoError(t, e.Store.Purge(ctx, first.ID))
	_, err = e.Store.KeyedRun(ctx, "alice", "order-42", digestA)
	AssertCode(t, runs.ENotFound, err)
	next, replayed, err := e.Store.Start(ctx, keyedStart("alice", "order-42", digestB))
	require.NoError(t, err)
	assert.False(t, replayed, "a purged run's key is free")
	assert.NotEqual(t, first.ID, next.ID)
	got, err = e.Store.KeyedRun(ctx, "alice", "order-42", digestB)
	require.NoError(t, err)
	assert.Equal(t, next.ID, got.ID)
	// Bob's key of the same name was not purged with alice's run.
	got, err = e.Store.KeyedRun(ctx, "bob", "order-42", digestB)
	require.NoError(t, err)
	assert.Equal(t, bobs.ID, got.ID)

	// A key the API would refuse is refused here too, and stores nothing.
	for _, bad := range []string{"has space", "caf\u00e9", "tab\t", string(make([]byte, runs.MaxIdempotencyKeyBytes+1))} {
		_, _, err := e.Store.Start(ctx, keyedStart("alice", bad, digestA))
		AssertCode(t, runs.EInvalid, err)
	}
	_, _, err = e.Store.Start(ctx, keyedStart("alice", "no-digest", ""))
	AssertCode(t, runs.EInvalid, err)
}

// testConcurrentIdempotentStarts: of many concurrent starts under one key
// exactly one creates a run, and every other gets that run.
func testConcurrentIdempotentStarts(t *testing.T, e *Env) {
	ctx := t.Context()
	const n = 12
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
		errs    []error
	)
	for range n {
		wg.Go(func() {
			r, replayed, err := e.Store.Start(ctx, keyedStart("alice", "once", digestA))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[r.ID]++
			if !replayed {
				created++
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	assert.Equal(t, 1, created, "exactly one start creates the run")
	assert.Len(t, ids, 1, "every start answers the same run: %v", ids)
	assert.Len(t, e.storedRuns(t), 1, "one run stored")
}

// testKeyOutlivesItsRun: a key whose run row is gone (DynamoDB's TTL
// backstop deleted it while the sweep was down) names no run, and the next
// start under it takes it over; purging what is left of the old run then
// keeps the new run's key.
func testKeyOutlivesItsRun(t *testing.T, e *Env) {
	if e.H.DropRow == nil {
		t.Skip("the harness cannot delete a row behind the store's back")
	}
	ctx := t.Context()
	old, _, err := e.Store.Start(ctx, keyedStart("alice", "k-1", digestA))
	require.NoError(t, err)
	e.H.DropRow(t, old.ID)
	_, err = e.Store.KeyedRun(ctx, "alice", "k-1", digestA)
	AssertCode(t, runs.ENotFound, err)

	r, replayed, err := e.Store.Start(ctx, keyedStart("alice", "k-1", digestB))
	require.NoError(t, err)
	assert.False(t, replayed, "a key that outlived its run is free")
	assert.NotEqual(t, old.ID, r.ID)

	require.NoError(t, e.Store.Purge(ctx, old.ID), "purging what is left of the old run")
	got, err := e.Store.KeyedRun(ctx, "alice", "k-1", digestB)
	require.NoError(t, err, "the key names the new run still")
	assert.Equal(t, r.ID, got.ID)
}

package runstest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// The conformance cases of client-tool hand-overs (issue #13): HandOver,
// SubmitToolResults, LoadToolResults and the tool-results expiry, on every
// adapter.

// HandOverState returns a loop state of run runID that hands over two
// client calls (c1 lookup, c2 edited order) with id, the server read s1
// already answered.
func HandOverState(runID, id string) *loop.SuspendedState {
	calls := []loop.PendingCall{
		{ID: "s1", Name: "read_doc", Input: json.RawMessage(`{"path":"a.txt"}`), Effect: loop.EffectRead},
		{ID: "c1", Name: "lookup", Input: json.RawMessage(`{"sku":"A"}`), Effect: loop.EffectRead},
		{ID: "c2", Name: "order", Input: json.RawMessage(`{"sku":"A","qty":1}`), Effect: loop.EffectWrite, NeedsApproval: true},
	}
	blocks := []loop.Block{}
	for _, c := range calls {
		blocks = append(blocks, loop.ToolUseBlock(c.ID, c.Name, c.Input))
	}
	digest, _ := loop.TurnDigest(runID, id, calls)
	return &loop.SuspendedState{
		SchemaVersion: loop.HandOverSchemaVersion,
		RunID:         runID,
		SuspensionID:  id,
		Transcript:    loop.Transcript{Messages: []loop.Message{loop.UserText("hi"), {Role: loop.RoleAssistant, Content: blocks}}},
		PendingCalls:  calls,
		Counters:      loop.Counters{Iterations: 1, ModelCalls: 1, InputTokens: 50, OutputTokens: 5, ToolCalls: 1},
		ToolHashes:    map[string]string{"read_doc": "h1", "lookup": "h2", "order": "h3"},
		TurnDigest:    digest,
		HandOver: &loop.HandOver{
			Calls: []loop.ClientCall{
				{ID: "c1", Name: "lookup", Input: json.RawMessage(`{"sku":"A"}`)},
				{ID: "c2", Name: "order", Input: json.RawMessage(`{"qty":2,"sku":"A"}`), Edited: true},
			},
			Results: map[string]loop.Result{"s1": {Content: "text of a"}},
		},
	}
}

// HandedOver returns a run of "alice" with tool executor "svc" that "w1"
// handed over on tool-results id "tr1", due in an hour.
func (e *Env) HandedOver(t testing.TB) *runs.Run {
	t.Helper()
	r, err := e.Store.Create(e.ctx, runs.NewRun{
		ID:        fmt.Sprintf("run-%d-%s", e.n.Add(1), rand.Text()[:8]),
		Initiator: "alice", Approvers: []string{"bob"}, ToolExecutors: []string{"svc"},
		Request: json.RawMessage(`{"prompt":"order"}`),
	})
	require.NoError(t, err)
	r, err = e.Store.Claim(e.ctx, r.ID, "w1")
	require.NoError(t, err)
	r, err = e.Store.HandOver(e.ctx, r, "w1", runs.HandOff{State: HandOverState(r.ID, "tr1"), Deadline: e.Clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	return r
}

// BothResults answer the two handed-over calls of HandOverState.
var BothResults = []loop.ClientResult{{CallID: "c1", Content: "3 in stock"}, {CallID: "c2", Content: "order 7", IsError: false}}

func testHandOver(t *testing.T, e *Env) {
	ctx := t.Context()
	t0 := e.Clock.Now().UTC().Truncate(time.Millisecond)
	r := e.HandedOver(t)
	assert.Equal(t, runs.StatusWaitingForToolResults, r.Status)
	assert.Equal(t, []string{"svc"}, r.ToolExecutors)
	require.NotNil(t, r.HandOver)
	assert.Equal(t, "tr1", r.HandOver.ID)
	assert.Equal(t, t0, r.HandOver.At)
	assert.Equal(t, t0.Add(time.Hour), r.HandOver.Deadline)
	assert.Equal(t, r.HandOver.Deadline, r.DueAt, "the due index holds the results deadline")
	assert.Equal(t, HandOverState(r.ID, "tr1").HandOver.Calls, r.HandOver.ClientCalls())
	assert.Equal(t, []int{11, 19}, []int{r.HandOver.Calls[0].InputSize, r.HandOver.Calls[1].InputSize})
	assert.True(t, r.HandOver.Results.IsZero())
	assert.Empty(t, r.LeaseOwner)
	assert.Equal(t, int64(50), r.Counters.InputTokens, "the hand-over stores the state's counters")
	e.Unchanged(t, r)
	blob, err := e.Store.LoadState(ctx, r)
	require.NoError(t, err)
	st, err := loop.DecodeState(blob)
	require.NoError(t, err)
	assert.Equal(t, HandOverState(r.ID, "tr1").HandOver, st.HandOver)
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventHandedOver, types[len(types)-1])
	evs, err := e.Store.Events(ctx, r.ID, r.LastSeq-1, 1)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"id":"c1","tool":"lookup"},{"id":"c2","tool":"order","edited":true,"original_input":{"sku":"A","qty":1}}]`, string(mustField(t, evs[0].Data, "calls")),
		"the event names the calls, and keeps the model's input of an edited one (the decision event has the approver's)")
	_, err = e.Store.LoadToolResults(ctx, r)
	AssertCode(t, runs.ENotFound, err)

	// The due index lists it only once its deadline has come.
	due, _, err := e.Store.Due(ctx, t0.Add(time.Hour-time.Millisecond), 100, "")
	require.NoError(t, err)
	assert.False(t, containsRun(due, r.ID))
	due, _, err = e.Store.Due(ctx, t0.Add(time.Hour), 100, "")
	require.NoError(t, err)
	assert.True(t, containsRun(due, r.ID))

	e.Clock.Advance(time.Minute)
	r, err = e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: "svc", Results: BothResults})
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, r.Status)
	assert.Equal(t, "svc", r.HandOver.SubmittedBy)
	assert.Equal(t, t0.Add(time.Minute), r.HandOver.SubmittedAt)
	assert.False(t, r.HandOver.Results.IsZero())
	assert.Equal(t, t0.Add(time.Minute+DispatchGrace), r.DueAt, "a resuming run is due for re-dispatch")
	e.Unchanged(t, r)
	got, err := e.Store.LoadToolResults(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, BothResults, got)
	evs, err = e.Store.Events(ctx, r.ID, r.LastSeq-1, 1)
	require.NoError(t, err)
	assert.Equal(t, runs.EventToolResults, evs[0].Type)
	assert.Equal(t, "svc", evs[0].Actor)
	assert.NotContains(t, string(evs[0].Data), "3 in stock", "the event never holds result content")

	// The resume worker claims it and finds state and results.
	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)
	_, err = e.Store.LoadState(ctx, r)
	require.NoError(t, err)
	_, err = e.Store.LoadToolResults(ctx, r)
	require.NoError(t, err)
	r, err = e.Store.Settle(ctx, r, "w2", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "settle deletes state and results blobs")
}

func mustField(t *testing.T, data json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &m))
	return m[name]
}

func testHandOverRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	good := func() runs.HandOff {
		return runs.HandOff{State: HandOverState(r.ID, "tr1"), Deadline: e.Clock.Now().Add(time.Hour)}
	}
	tests := []struct {
		name   string
		owner  string
		mutate func(h *runs.HandOff)
		want   string
	}{
		{"another owner", "w2", nil, runs.EConflict},
		{"no state", "w1", func(h *runs.HandOff) { h.State = nil }, runs.EInvalid},
		{"a state without hand-over", "w1", func(h *runs.HandOff) { h.State.HandOver = nil }, runs.EInvalid},
		{"another run's state", "w1", func(h *runs.HandOff) { h.State.RunID = "other" }, runs.EInvalid},
		{"no id", "w1", func(h *runs.HandOff) { h.State.SuspensionID = "" }, runs.EInvalid},
		{"no calls", "w1", func(h *runs.HandOff) { h.State.HandOver.Calls = nil }, runs.EInvalid},
		{"a call twice", "w1", func(h *runs.HandOff) {
			h.State.HandOver.Calls = append(h.State.HandOver.Calls, h.State.HandOver.Calls[0])
		}, runs.EInvalid},
		{"a call without tool", "w1", func(h *runs.HandOff) { h.State.HandOver.Calls[0].Name = "" }, runs.EInvalid},
		{"input not JSON", "w1", func(h *runs.HandOff) { h.State.HandOver.Calls[0].Input = json.RawMessage(`{`) }, runs.EInvalid},
		{"deadline passed", "w1", func(h *runs.HandOff) { h.Deadline = e.Clock.Now() }, runs.EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good()
			if tt.mutate != nil {
				tt.mutate(&h)
			}
			_, err := e.Store.HandOver(ctx, r, tt.owner, h)
			AssertCode(t, tt.want, err)
			e.Unchanged(t, r)
		})
	}
	fenced, err := e.Store.MarkPendingEffect(ctx, r, "w1", "s1")
	require.NoError(t, err)
	_, err = e.Store.HandOver(ctx, fenced, "w1", runs.HandOff{State: HandOverState(r.ID, "tr1"), Deadline: e.Clock.Now().Add(time.Hour)})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, fenced)
	// Suspend does not take a hand-over state.
	sp, _ := e.Suspension(fenced, "s9")
	sp.State = HandOverState(r.ID, "s9")
	_, err = e.Store.Suspend(ctx, r, "w1", sp)
	AssertCode(t, runs.EInvalid, err)
}

// testSubmitRefusals: every bad submission is refused with its code and
// changes nothing (same row version, no new blob, no event).
func testSubmitRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.HandedOver(t)
	keys := len(e.H.BlobKeys(t, runs.RunPrefix(r.ID)))
	big := strings.Repeat("x", runs.MaxToolResultSize+1)
	many := make([]loop.ClientResult, runs.MaxPendingCalls+1)
	for i := range many {
		many[i] = loop.ClientResult{CallID: fmt.Sprintf("c%d", i)}
	}
	tests := []struct {
		name string
		sub  runs.ToolResults
		want string
	}{
		{"wrong id", runs.ToolResults{ID: "tr0", Submitter: "svc", Results: BothResults}, runs.EConflict},
		{"no id", runs.ToolResults{Submitter: "svc", Results: BothResults}, runs.EInvalid},
		{"no submitter", runs.ToolResults{ID: "tr1", Results: BothResults}, runs.EInvalid},
		{"no results", runs.ToolResults{ID: "tr1", Submitter: "svc"}, runs.EInvalid},
		{"a result missing", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: BothResults[:1]}, runs.EInvalid},
		{"an extra call", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: append([]loop.ClientResult{{CallID: "s1"}}, BothResults...)}, runs.EInvalid},
		{"a call twice", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: append([]loop.ClientResult{BothResults[0]}, BothResults...)}, runs.EInvalid},
		{"an empty call id", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: []loop.ClientResult{{Content: "x"}, BothResults[1]}}, runs.EInvalid},
		{"content over the limit", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: []loop.ClientResult{{CallID: "c1", Content: big}, BothResults[1]}}, runs.ETooLarge},
		{"too many results", runs.ToolResults{ID: "tr1", Submitter: "svc", Results: many}, runs.ETooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Store.SubmitToolResults(ctx, r, tt.sub)
			AssertCode(t, tt.want, err)
			e.Unchanged(t, r)
			assert.Len(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), keys, "nothing stored")
		})
	}
	// Not waiting for results: a queued, a running and a waiting-for-approval run.
	for _, other := range []*runs.Run{e.Queued(t), e.Running(t), first(e.Waiting(t))} {
		_, err := e.Store.SubmitToolResults(ctx, other, runs.ToolResults{ID: "tr1", Submitter: "alice", Results: BothResults})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, other)
	}
	// Past the deadline, which is named to the millisecond.
	e.Clock.Advance(time.Hour)
	_, err := e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: "svc", Results: BothResults})
	AssertCode(t, runs.EGone, err)
	assert.Contains(t, runs.ErrorMessage(err), "due by "+r.HandOver.Deadline.UTC().Format("2006-01-02T15:04:05.000Z"))
	e.Unchanged(t, r)
}

func first[A, B any](a A, _ B) A { return a }

// testConcurrentSubmit: of 20 concurrent submissions exactly one wins, the
// others get EConflict, and one tool_results event is written.
func testConcurrentSubmit(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.HandedOver(t)
	const n = 20
	var wins atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res := []loop.ClientResult{{CallID: "c1", Content: fmt.Sprintf("from %d", i)}, {CallID: "c2", Content: "ok"}}
			_, err := e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: fmt.Sprintf("svc-%d", i), Results: res})
			errs[i] = err
			if err == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), wins.Load(), "exactly one submission wins")
	for _, err := range errs {
		if err != nil {
			AssertCode(t, runs.EConflict, err)
		}
	}
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, got.Status)
	assert.Equal(t, r.Version+1, got.Version)
	assert.Equal(t, 1, count(e.eventTypes(t, r.ID), runs.EventToolResults), "one tool_results event")
	res, err := e.Store.LoadToolResults(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, "from "+strings.TrimPrefix(got.HandOver.SubmittedBy, "svc-"), res[0].Content, "the row points at the winner's results")
}

func testToolResultsExpire(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.HandedOver(t)
	e.Clock.Advance(time.Hour - time.Millisecond)
	_, err := e.Store.Expire(ctx, r)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)
	e.Clock.Advance(time.Millisecond)
	got, err := e.Store.Expire(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusExpired, got.Status)
	assert.Equal(t, loop.ReasonToolResultsExpired, got.Reason)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "expiry deletes the state blob")
	assert.Equal(t, runs.EventExpired, e.eventTypes(t, r.ID)[got.LastSeq-1])
	e.Unchanged(t, got)
	_, err = e.Store.SubmitToolResults(ctx, got, runs.ToolResults{ID: "tr1", Submitter: "svc", Results: BothResults})
	AssertCode(t, runs.EConflict, err)

	// A run whose results arrived is not expired by a sweep that read it before.
	r = e.HandedOver(t)
	stale := r.Clone()
	_, err = e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: "alice", Results: BothResults})
	require.NoError(t, err)
	e.Clock.Advance(time.Hour)
	_, err = e.Store.Expire(ctx, stale)
	AssertCode(t, runs.EConflict, err)

	// Cancel ends a run waiting for results.
	r = e.HandedOver(t)
	got, err = e.Store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCancelled, got.Status)
}

// handOverOf returns a state of run runID that hands over calls (client
// calls of one turn, none needing approval) with id.
func handOverOf(runID, id string, calls []loop.ClientCall) *loop.SuspendedState {
	pending := make([]loop.PendingCall, len(calls))
	blocks := make([]loop.Block, len(calls))
	hashes := map[string]string{}
	for i, c := range calls {
		pending[i] = loop.PendingCall{ID: c.ID, Name: c.Name, Input: c.Input, Effect: loop.EffectRead}
		blocks[i] = loop.ToolUseBlock(c.ID, c.Name, c.Input)
		hashes[c.Name] = "h-" + c.Name
	}
	digest, _ := loop.TurnDigest(runID, id, pending)
	return &loop.SuspendedState{
		SchemaVersion: loop.HandOverSchemaVersion,
		RunID:         runID,
		SuspensionID:  id,
		Transcript:    loop.Transcript{Messages: []loop.Message{loop.UserText("hi"), {Role: loop.RoleAssistant, Content: blocks}}},
		PendingCalls:  pending,
		Counters:      loop.Counters{Iterations: 1, ModelCalls: 1},
		ToolHashes:    hashes,
		TurnDigest:    digest,
		HandOver:      &loop.HandOver{Calls: calls},
	}
}

// bigClientCall is a client call whose input holds n bytes of text gzip
// cannot shrink.
func bigClientCall(id string, n int) loop.ClientCall {
	return loop.ClientCall{ID: id, Name: "upload", Input: json.RawMessage(`{"name":"` + id + `.bin","data":` + string(Incompressible(n)) + `}`)}
}

// testLargeHandOver: client calls whose inputs are far over the row's
// limit (a 1 MiB one, and the most calls a turn may have at 20 KiB each)
// are handed over; the row keeps a bounded, marked summary (the stored row
// stays small), the state keeps every byte, which HeldCall returns, and a
// submission is checked against the summary's ids. Before, an input over
// 64 KiB together ended the run FAILED/internal_error.
func testLargeHandOver(t *testing.T, e *Env) {
	ctx := t.Context()
	start := func(t *testing.T, calls []loop.ClientCall) *runs.Run {
		t.Helper()
		r := e.Running(t)
		r, err := e.Store.HandOver(ctx, r, "w1", runs.HandOff{State: handOverOf(r.ID, "tr1", calls), Deadline: e.Clock.Now().Add(time.Hour)})
		require.NoError(t, err, "the hand-over is recorded")
		row, err := json.Marshal(r.HandOver.Calls)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(row), runs.MaxHandOverCallsSize, "the row's summary is bounded")
		fresh, err := e.Store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r.HandOver, fresh.HandOver, "the summary round-trips through the store")
		size := e.H.RowSize(t, r.ID)
		assert.Less(t, size, runs.MaxHandOverCallsSize+8<<10, "the stored row holds the summary, not the inputs")
		for _, c := range []loop.ClientCall{calls[0], calls[len(calls)-1]} {
			got, _, err := e.Store.HeldCall(ctx, fresh, c.ID)
			require.NoError(t, err)
			require.Equal(t, string(c.Input), string(got.Input), "the state keeps call %s's whole input", c.ID)
			assert.Equal(t, c.Name, got.Name)
		}
		return fresh
	}

	t.Run("one large input", func(t *testing.T) {
		big := bigClientCall("c1", 1<<20)
		small := loop.ClientCall{ID: "c2", Name: "lookup", Input: json.RawMessage(`{"sku":"A"}`), Edited: true}
		r := start(t, []loop.ClientCall{big, small})
		got := r.HandOver.Calls[0]
		assert.True(t, got.InputTruncated)
		assert.Equal(t, len(big.Input), got.InputSize)
		assert.True(t, json.Valid(got.Input), "a shortened input is still JSON")
		assert.Contains(t, string(got.Input), `"name":"c1.bin"`, "short values are kept whole")
		assert.Equal(t, runs.ClientCallSummary{ID: "c2", Name: "lookup", Input: small.Input, InputSize: len(small.Input), Edited: true}, r.HandOver.Calls[1], "a small call is kept whole")
		_, _, err := e.Store.HeldCall(ctx, r, "c9")
		AssertCode(t, runs.ENotFound, err)

		_, err = e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: "alice", Results: []loop.ClientResult{{CallID: "c1", Content: "stored"}}})
		AssertCode(t, runs.EInvalid, err) // c2 has no result
		r, err = e.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: "tr1", Submitter: "alice",
			Results: []loop.ClientResult{{CallID: "c1", Content: "stored"}, {CallID: "c2", Content: "3 in stock"}}})
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r.Status)
		_, _, err = e.Store.HeldCall(ctx, r, "c1")
		AssertCode(t, runs.EConflict, err)
	})

	t.Run("the most calls a turn may have", func(t *testing.T) {
		calls := make([]loop.ClientCall, runs.MaxPendingCalls)
		for i := range calls {
			calls[i] = bigClientCall(fmt.Sprintf("c%02d-%s", i, strings.Repeat("x", 200)), 20<<10)
		}
		r := start(t, calls)
		require.Len(t, r.HandOver.Calls, runs.MaxPendingCalls)
		for _, c := range r.HandOver.Calls {
			assert.True(t, c.InputTruncated)
			assert.Equal(t, len(calls[0].Input), c.InputSize)
		}
	})

	t.Run("over the state limit", func(t *testing.T) {
		r := e.Running(t)
		calls := []loop.ClientCall{bigClientCall("c-a", 2<<20), bigClientCall("c-b", 2<<20), bigClientCall("c-c", 2<<20)}
		_, err := e.Store.HandOver(ctx, r, "w1", runs.HandOff{State: handOverOf(r.ID, "tr1", calls), Deadline: e.Clock.Now().Add(time.Hour)})
		AssertCode(t, runs.ETooLarge, err)
		msg := runs.ErrorMessage(err)
		assert.Contains(t, msg, fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
		assert.Contains(t, msg, fmt.Sprintf("call c-a (upload) input %d bytes", len(calls[0].Input)))
		e.Unchanged(t, r)
		assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "a refused state stores no blob")
	})
}

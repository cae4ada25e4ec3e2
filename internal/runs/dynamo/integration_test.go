//go:build integration

package dynamo_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// TestConformanceOnAWS runs the suite on the dynamo + s3state pair, each subtest on
// its own table and bucket.
func TestConformanceOnAWS(t *testing.T) {
	runstest.Run(t, func(t *testing.T) runstest.Harness { return awstest.New(t).Harness() })
}

// TestConformanceMegabytesOnAWS runs the suite's megabyte cases on the pair.
//
//agentgate:megabytes
func TestConformanceMegabytesOnAWS(t *testing.T) {
	runstest.RunMegabytes(t, func(t *testing.T) runstest.Harness { return awstest.New(t).Harness() })
}

// TestRoundTrips asserts what the hot transitions cost on the wire.
func TestRoundTrips(t *testing.T) {
	aws := awstest.New(t)
	e := runstest.NewEnv(t, aws.Harness())
	ctx := t.Context()
	r := e.Running(t)
	sp, raws := e.Suspension(r, "s1")

	var err error
	trips := aws.Counter.Measure(func() { r, err = e.Store.Suspend(ctx, r, "w1", sp) })
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"S3.PutObject": 1, "DynamoDB.TransactWriteItems": 1}, trips, "suspend = state put + one transaction")

	tok, err := e.Store.LookupToken(ctx, runstest.HashToken(raws[0]))
	require.NoError(t, err)
	trips = aws.Counter.Measure(func() {
		r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: runstest.Approve})
	})
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips, "decide (with token use) = one transaction")

	trips = aws.Counter.Measure(func() { r, err = e.Store.Claim(ctx, r.ID, "w2") })
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"DynamoDB.Query": 1, "DynamoDB.TransactWriteItems": 1}, trips, "claim = read (the row and its parts) + one transaction")

	trips = aws.Counter.Measure(func() { _, err = e.Store.LoadState(ctx, r) })
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"S3.GetObject": 1}, trips)

	trips = aws.Counter.Measure(func() { r, err = e.Store.RecordStep(ctx, r, "w2", loop.Step{Kind: loop.StepModelTurn}) })
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips, "a step = event + lease renewal in one write")

	trips = aws.Counter.Measure(func() { r, err = e.Store.RenewLease(ctx, r, "w2") })
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"DynamoDB.PutItem": 1}, trips)

	w, _ := e.Waiting(t)
	trips = aws.Counter.Measure(func() {
		_, err = e.Store.Decide(ctx, w, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: loop.Decision{TurnDigest: "digest-s1", Action: loop.ActionDeny}})
	})
	require.NoError(t, err)
	awstest.AssertTrips(t, aws.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips, "decide through the API = one transaction")
}

// TestTransientFaults injects retryable errors below the SDK's retryer: the
// SDK retries them, and a failure that outlasts the retries never leaves the
// row pointing at a missing blob.
func TestTransientFaults(t *testing.T) {
	tests := []struct {
		name      string
		operation string
		times     int
		retryable bool
		wantOK    bool
	}{
		{"S3 put fails once", "PutObject", 1, true, true},
		{"transaction fails once", "TransactWriteItems", 1, true, true},
		{"S3 put keeps failing", "PutObject", -1, true, false},
		{"S3 put fails for good", "PutObject", 1, false, false},
		{"transaction fails for good after the blob put", "TransactWriteItems", 1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aws := awstest.New(t)
			e := runstest.NewEnv(t, aws.Harness())
			ctx := t.Context()
			r := e.Running(t)
			sp, _ := e.Suspension(r, "s1")
			aws.Counter.Reset()
			aws.Faults.Fail(tt.operation, tt.times, tt.retryable)
			got, err := e.Store.Suspend(ctx, r, "w1", sp)
			aws.Faults.Clear()
			if tt.wantOK {
				require.NoError(t, err)
				if awstest.Exact(t, aws.Counter) {
					assert.Equal(t, 2+1, aws.Counter.Total(), "one retried attempt: %v", aws.Counter.ByOperation())
				}
				state, err := e.Store.LoadState(ctx, got)
				require.NoError(t, err, "the row points at a stored blob")
				want, err := sp.State.Encode()
				require.NoError(t, err)
				assert.JSONEq(t, string(want), string(state))
				e.Unchanged(t, got)
				return
			}
			require.Error(t, err)
			var injected *awstest.InjectedError
			assert.ErrorAs(t, err, &injected)
			assert.Equal(t, runs.EInternal, runs.ErrorCode(err))
			e.Unchanged(t, r) // still RUNNING, no state ref: never a row without its blob
			again, err := e.Store.Suspend(ctx, r, "w1", sp)
			require.NoError(t, err, "the worker can suspend once the fault is gone")
			_, err = e.Store.LoadState(ctx, again)
			require.NoError(t, err)
		})
	}
}

// TestLostAnswers: a write that took effect and whose answer was lost on the
// way back (the SDK retries it; DynamoDB deduplicates the retry by its
// request token, moto refuses it by its condition) succeeds, and the stored
// run is the one the store returned: the write landed once.
func TestLostAnswers(t *testing.T) {
	aws := awstest.New(t)
	e := runstest.NewEnv(t, aws.Harness())
	ctx := t.Context()
	lose := func(op, what string, fn func() (*runs.Run, error)) *runs.Run {
		t.Helper()
		aws.Counter.Reset()
		aws.Faults.LoseAnswer(op, 1)
		got, err := fn()
		aws.Faults.Clear()
		require.NoError(t, err, "%s, whose %s answer was lost", what, op)
		assert.Equal(t, 1, aws.Counter.Lost(), "%s: %v", what, aws.Counter.ByOperation())
		assert.False(t, awstest.Exact(t, aws.Counter))
		e.Unchanged(t, got)
		return got
	}
	r := e.Running(t)
	sp, raws := e.Suspension(r, "s1")
	r = lose("TransactWriteItems", "suspend", func() (*runs.Run, error) { return e.Store.Suspend(ctx, r, "w1", sp) })
	tok, err := e.Store.LookupToken(ctx, runstest.HashToken(raws[0]))
	require.NoError(t, err)
	r = lose("TransactWriteItems", "decide", func() (*runs.Run, error) {
		return e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: runstest.Approve})
	})
	r = lose("TransactWriteItems", "claim", func() (*runs.Run, error) { return e.Store.Claim(ctx, r.ID, "w2") })
	r = lose("TransactWriteItems", "step", func() (*runs.Run, error) {
		return e.Store.RecordStep(ctx, r, "w2", loop.Step{Kind: loop.StepModelTurn})
	})
	r = lose("PutItem", "lease renewal", func() (*runs.Run, error) { return e.Store.RenewLease(ctx, r, "w2") })
	events, err := e.Store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, events, int(r.LastSeq))
	for i, ev := range events {
		assert.Equal(t, int64(i+1), ev.Seq, "every event once, in order")
	}
}

// TestEventsOfBatchedAndOlderItems: a write's events go into one item, and
// Events pages through them and through items written before (one event
// per item) in Seq order, whatever the limit and wherever the page starts.
func TestEventsOfBatchedAndOlderItems(t *testing.T) {
	e := awstest.New(t)
	ctx := t.Context()
	id := runs.NewRunID()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var want []runs.Event
	for seq := int64(1); seq <= 3; seq++ { // as written before: one event per item
		ev := runs.Event{RunID: id, Seq: seq, Type: "old", At: at, Actor: "alice", Data: json.RawMessage(`{"n":` + strconv.FormatInt(seq, 10) + `}`)}
		item, err := attributevalue.MarshalMap(map[string]any{"pk": "RUN#" + id, "sk": fmt.Sprintf("EVT#%020d", seq), "run_id": id,
			"seq": seq, "type": ev.Type, "at": at.UnixMilli(), "actor": ev.Actor, "data": string(ev.Data)})
		require.NoError(t, err)
		_, err = e.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Table.Name()), Item: item})
		require.NoError(t, err)
		want = append(want, ev)
	}
	r := &runs.Run{ID: id, Status: runs.StatusRunning, Version: 1, CreatedAt: at, UpdatedAt: at, Initiator: "alice", LastSeq: 3}
	write := func(n int) {
		t.Helper()
		next := r.Clone()
		next.Version++
		var evs []runs.Event
		for range n {
			next.LastSeq++
			evs = append(evs, runs.Event{RunID: id, Seq: next.LastSeq, Type: "new", At: at, Data: json.RawMessage(`{"n":` + strconv.FormatInt(next.LastSeq, 10) + `}`)})
		}
		runs.SealWriteID(next)
		w := runs.Write{Run: next, Events: evs, Create: r.Version == 1, ExpectStatus: r.Status, ExpectVersion: r.Version}
		trips := e.Counter.Measure(func() { require.NoError(t, runstest.WriteRow(ctx, e.Table, w)) })
		awstest.AssertTrips(t, e.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips)
		want = append(want, evs...)
		r = next
	}
	write(5) // seq 4-8 in one item
	write(1) // seq 9
	write(3) // seq 10-12
	items, err := e.DynamoDB.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(e.Table.Name()),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :evt)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + id}, ":evt": &types.AttributeValueMemberS{Value: "EVT#"}}})
	require.NoError(t, err)
	assert.Len(t, items.Items, 3+3, "three old items and one item per write")

	all, err := e.Table.Events(ctx, id, 0, 100)
	require.NoError(t, err)
	assert.Equal(t, want, all)
	for _, limit := range []int{1, 2, 3, 4, 7} {
		for _, start := range []int64{0, 2, 4, 5, 8, 11, 12} {
			var got []runs.Event
			after := start
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				page, err := e.Table.Events(ctx, id, after, limit)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page), limit)
				if len(page) == 0 {
					break
				}
				got = append(got, page...)
				after = page[len(page)-1].Seq
			}
			if start == int64(len(want)) {
				assert.Empty(t, got, "limit %d after %d", limit, start)
				continue
			}
			assert.Equal(t, want[start:], got, "limit %d after %d", limit, start)
		}
	}
}

// TestRowsWrittenBeforeAreReadAndUpgraded: a row stored one attribute per
// field (deployed tables) reads as it was written, is found by the sweep,
// and takes the compact form at its next write, which the Store makes on
// it as on any row.
func TestRowsWrittenBeforeAreReadAndUpgraded(t *testing.T) {
	env := awstest.New(t)
	e := runstest.NewEnv(t, env.Harness())
	ctx := t.Context()
	w, _ := e.Waiting(t)
	legacy, err := dynamo.LegacyRowForTest(w)
	require.NoError(t, err)
	_, hasRow := legacy["row"]
	require.False(t, hasRow)
	_, err = env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table.Name()), Item: legacy})
	require.NoError(t, err)

	got, err := e.Store.Get(ctx, w.ID)
	require.NoError(t, err)
	assert.Equal(t, w, got, "read as written")
	due, _, err := env.Table.Due(ctx, w.DueAt, 100, "")
	require.NoError(t, err)
	require.Len(t, due, 1, "the sweep finds it")
	assert.Equal(t, w, due[0])

	r, err := e.Store.Decide(ctx, got, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve})
	require.NoError(t, err)
	item, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table.Name()),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + w.ID}, "sk": &types.AttributeValueMemberS{Value: "RUN"}}})
	require.NoError(t, err)
	_, hasRow = item.Item["row"]
	assert.True(t, hasRow, "the write stores the compact form")
	_, hasOld := item.Item["pending_calls"]
	assert.False(t, hasOld, "and drops the old attributes")
	again, err := e.Store.Get(ctx, w.ID)
	require.NoError(t, err)
	assert.Equal(t, r, again)
	assert.Equal(t, w.Request, again.Request, "the start request survives the upgrade")
	assert.Equal(t, w.PendingCalls, again.PendingCalls)
}

// TestLargePartsAreWrittenWhenTheyChange: a long start request and a large
// held-call summary live in items of their own, read with the row in one
// Query; a write after a read of the same version leaves them alone, and a
// table that does not know the stored version writes them again.
func TestLargePartsAreWrittenWhenTheyChange(t *testing.T) {
	env := awstest.New(t)
	e := runstest.NewEnv(t, env.Harness())
	ctx := t.Context()
	r := suspendedWithLargeParts(t, e)

	table := aws.String(env.Table.Name())
	mark := func(name string) {
		t.Helper()
		_, err := env.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: partKey(r.ID, name),
			UpdateExpression:          aws.String("SET marker = :m"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":m": &types.AttributeValueMemberS{Value: "x"}}})
		require.NoError(t, err)
	}
	marked := func(name string) bool {
		t.Helper()
		out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: partKey(r.ID, name), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.NotNil(t, out.Item, "the %s is an item of its own", name)
		_, ok := out.Item["marker"]
		return ok
	}
	mark("request")
	mark("pending_calls")

	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got, "read back whole")
	trips := env.Counter.Measure(func() { _, err = e.Store.Get(ctx, r.ID) })
	require.NoError(t, err)
	awstest.AssertTrips(t, env.Counter, map[string]int{"DynamoDB.Query": 1}, trips, "row and parts in one call")

	r, err = e.Store.Decide(ctx, got, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve})
	require.NoError(t, err)
	assert.True(t, marked("request"), "unchanged parts are not written again")
	assert.True(t, marked("pending_calls"))

	// Another process (a table that never read this version) writes them again.
	other := runs.NewStore(dynamo.NewTable(env.DynamoDB, env.Table.Name(), dynamo.Options{}), env.Bucket, runs.Options{Now: e.Clock.Now})
	fresh, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	_, err = other.Cancel(ctx, fresh, "alice")
	require.NoError(t, err)
	assert.False(t, marked("request"), "a table that does not know the stored version writes the parts")
	done, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCancelled, done.Status)
	assert.Equal(t, r.Request, done.Request)
	assert.Equal(t, r.PendingCalls, done.PendingCalls)

	due, _, err := env.Table.Due(ctx, done.DueAt, 10, "")
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, done.Request, due[0].Request, "the sweep reads the parts too")
}

// suspendedWithLargeParts creates, claims and suspends a run of e whose
// start request and held-call summary are long enough to be items of their
// own beside the row (its parts), and returns it as suspended.
func suspendedWithLargeParts(t *testing.T, e *runstest.Env) *runs.Run {
	t.Helper()
	ctx := t.Context()
	long := strings.Repeat("Check the figures of every region before the pricing page changes. ", 30)
	r, err := e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: json.RawMessage(`{"prompt":` + strconv.Quote(long) + `}`)})
	require.NoError(t, err)
	r, err = e.Store.Claim(ctx, r.ID, "w1")
	require.NoError(t, err)
	sp, _ := e.Suspension(r, "s1")
	sp.State.Previews["call-1"] = long
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	return r
}

// partKey is the key of the item that keeps run runID's part name apart
// from its row ("request", "pending_calls").
func partKey(runID, name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID}, "sk": &types.AttributeValueMemberS{Value: "RUN#" + name}}
}

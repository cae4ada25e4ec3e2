//go:build integration

package dynamo_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// seedDue fills the table with total run rows, of which due are due at now
// and the rest later, as BatchWriteItem calls (the store is not used: this is
// about what the index query reads, not about writing runs).
func seedDue(tb testing.TB, e *awstest.Env, total, due int, now time.Time) {
	tb.Helper()
	ctx := tb.Context()
	var reqs []types.WriteRequest
	flush := func() {
		for len(reqs) > 0 {
			out, err := e.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{e.Table.Name(): reqs}})
			require.NoError(tb, err)
			reqs = out.UnprocessedItems[e.Table.Name()]
		}
	}
	for i := range total {
		id := fmt.Sprintf("seed-%06d", i)
		status, dueAt := runs.StatusWaiting, now.Add(time.Hour+time.Duration(i)*time.Second)
		if i%(total/due) == 0 {
			status, dueAt = runs.StatusCompleted, now.Add(-time.Duration(i)*time.Millisecond)
		}
		item, err := attributevalue.MarshalMap(map[string]any{
			"pk": "RUN#" + id, "sk": "RUN", "id": id, "status": string(status), "version": 3,
			"initiator": "alice", "created_at": now.UnixMilli(), "updated_at": now.UnixMilli(), "last_seq": 3,
			"due_pk": "DUE#" + strconv.Itoa(i%8), "due_at": dueAt.UnixMilli(),
		})
		require.NoError(tb, err)
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(reqs) == 25 {
			flush()
		}
	}
	flush()
}

// sweep reads every due run, page by page, as purge does.
func sweep(tb testing.TB, s *runs.Store, now time.Time) int {
	tb.Helper()
	found, cursor := 0, ""
	for {
		rs, next, err := s.Due(tb.Context(), now, 100, cursor)
		require.NoError(tb, err)
		found += len(rs)
		if next == "" {
			return found
		}
		cursor = next
	}
}

// TestDueQueryCostIsFlat: with 100 due runs, the sweep reads 100 items
// whether the table holds 1,000 runs or 10,000.
func TestDueQueryCostIsFlat(t *testing.T) {
	now := runstest.Epoch
	for _, total := range []int{1_000, 10_000} {
		t.Run(fmt.Sprintf("%d runs", total), func(t *testing.T) {
			e := awstest.New(t)
			seedDue(t, e, total, 100, now)
			s := runs.NewStore(e.Table, e.Bucket, runs.Options{Now: func() time.Time { return now }})
			e.Counter.Reset()
			require.Equal(t, 100, sweep(t, s, now))
			t.Logf("100 due among %d runs: %d items read, %v", total, e.Counter.ItemsRead(), e.Counter.ByOperation())
			require.Equal(t, int64(100), e.Counter.ItemsRead(), "the sweep reads the due runs and nothing else")
		})
	}
}

// BenchmarkDueQuery reports what one purge sweep reads with 100 due runs
// among 1,000 and among 10,000 (items-read/op must not grow).
func BenchmarkDueQuery(b *testing.B) {
	now := runstest.Epoch
	for _, total := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("runs=%d", total), func(b *testing.B) {
			e := awstest.New(b)
			seedDue(b, e, total, 100, now)
			s := runs.NewStore(e.Table, e.Bucket, runs.Options{Now: func() time.Time { return now }})
			e.Counter.Reset()
			b.ResetTimer()
			for b.Loop() {
				if got := sweep(b, s, now); got != 100 {
					b.Fatalf("found %d due runs, want 100", got)
				}
			}
			b.ReportMetric(float64(e.Counter.ItemsRead())/float64(b.N), "items-read/op")
			b.ReportMetric(float64(e.Counter.Total())/float64(b.N), "round-trips/op")
		})
	}
}

// BenchmarkStoreVsRawSDK times suspend+decide+claim+load through the Store
// against the same SDK calls made directly with prepared inputs (S3
// PutObject, TransactWriteItems, TransactWriteItems, GetItem +
// TransactWriteItems, GetObject), alternating the two, and reports both and
// their ratio (target <= 1.3).
func BenchmarkStoreVsRawSDK(b *testing.B) {
	e := awstest.New(b)
	env := runstest.NewEnv(b, e.Harness())
	ctx := b.Context()
	raw := newRawPath(b, e)
	var storeDur, rawDur time.Duration
	var storeTrips, rawTrips int
	var ratios []float64
	i := 0
	for b.Loop() {
		i++
		b.StopTimer()
		r := env.Running(b)
		sp, _ := env.Suspension(r, "s1")
		raw.setup(b, i)
		b.StartTimer()
		store := func() {
			e.Counter.Reset()
			start := time.Now()
			r, err := env.Store.Suspend(ctx, r, "w1", sp)
			if err == nil {
				r, err = env.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve})
			}
			if err == nil {
				r, err = env.Store.Claim(ctx, r.ID, "w2")
			}
			if err == nil {
				_, err = env.Store.LoadState(ctx, r)
			}
			storeDur += time.Since(start)
			storeTrips += e.Counter.Total()
			if err != nil {
				b.Fatal(err)
			}
		}
		direct := func() {
			e.Counter.Reset()
			start := time.Now()
			raw.cycle(b, i)
			rawDur += time.Since(start)
			rawTrips += e.Counter.Total()
		}
		s0, r0 := storeDur, rawDur
		if i%2 == 0 {
			store()
			direct()
		} else {
			direct()
			store()
		}
		ratios = append(ratios, float64(storeDur-s0)/float64(rawDur-r0))
	}
	slices.Sort(ratios)
	n := float64(i)
	b.ReportMetric(float64(storeDur.Microseconds())/n, "store-µs/cycle")
	b.ReportMetric(float64(rawDur.Microseconds())/n, "raw-µs/cycle")
	b.ReportMetric(float64(storeDur)/float64(rawDur), "store/raw")
	b.ReportMetric(ratios[len(ratios)/2], "median-store/raw")
	b.ReportMetric(float64(storeTrips)/n, "store-trips/cycle")
	b.ReportMetric(float64(rawTrips)/n, "raw-trips/cycle")
}

// rawPath makes the Store's calls by hand.
type rawPath struct {
	e     *awstest.Env
	table string
	blob  []byte
	sha   string
}

func newRawPath(b *testing.B, e *awstest.Env) *rawPath {
	state := []byte(`{"schema_version":1,"suspension":"s1","transcript":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(state)
	_ = zw.Close()
	sum := sha256.Sum256(state)
	return &rawPath{e: e, table: e.Table.Name(), blob: buf.Bytes(), sha: hex.EncodeToString(sum[:])}
}

func (p *rawPath) row(id, status string, version int) map[string]types.AttributeValue {
	m, _ := attributevalue.MarshalMap(map[string]any{
		"pk": "RUN#" + id, "sk": "RUN", "id": id, "status": status, "version": version,
		"initiator": "alice", "approvers": []string{"bob", "carol"}, "request": `{"prompt":"hi"}`,
		"suspension_id": "s1", "turn_digest": "digest-s1", "state_key": "runs/" + id + "/state/" + p.sha + ".json.gz",
		"due_pk": "DUE#1", "due_at": time.Now().UnixMilli(), "last_seq": version,
	})
	return m
}

func (p *rawPath) put(item map[string]types.AttributeValue, cond string, version int) types.TransactWriteItem {
	put := &types.Put{TableName: &p.table, Item: item, ConditionExpression: aws.String(cond)}
	if version > 0 {
		put.ExpressionAttributeNames = map[string]string{"#v": "version"}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(version)}}
	}
	return types.TransactWriteItem{Put: put}
}

func (p *rawPath) event(id string, seq int) map[string]types.AttributeValue {
	m, _ := attributevalue.MarshalMap(map[string]any{"pk": "RUN#" + id, "sk": fmt.Sprintf("EVT#%020d", seq), "run_id": id, "seq": seq, "type": "x", "at": time.Now().UnixMilli()})
	return m
}

func (p *rawPath) setup(b *testing.B, i int) {
	id := fmt.Sprintf("raw-%d", i)
	_, err := p.e.DynamoDB.PutItem(b.Context(), &dynamodb.PutItemInput{TableName: &p.table, Item: p.row(id, "RUNNING", 2)})
	require.NoError(b, err)
}

func (p *rawPath) cycle(b *testing.B, i int) {
	ctx := b.Context()
	id := fmt.Sprintf("raw-%d", i)
	key := "runs/" + id + "/state/" + p.sha + ".json.gz"
	_, err := p.e.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(p.e.Bucket.Name()), Key: &key, Body: bytes.NewReader(p.blob),
		ContentLength: aws.Int64(int64(len(p.blob))), ServerSideEncryption: s3types.ServerSideEncryptionAes256})
	require.NoError(b, err)
	cond := "#v = :v"
	tok := func(n int) map[string]types.AttributeValue {
		m, _ := attributevalue.MarshalMap(map[string]any{"pk": fmt.Sprintf("TOKEN#%s-%d", id, n), "sk": "TOKEN", "run_id": id, "suspension_id": "s1"})
		return m
	}
	_, err = p.e.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		p.put(p.row(id, "WAITING_FOR_APPROVAL", 3), cond, 2), p.put(p.event(id, 3), "attribute_not_exists(pk)", 0),
		p.put(tok(1), "attribute_not_exists(pk)", 0), p.put(tok(2), "attribute_not_exists(pk)", 0),
	}})
	require.NoError(b, err)
	_, err = p.e.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		p.put(p.row(id, "RESUMING", 4), cond, 3), p.put(p.event(id, 4), "attribute_not_exists(pk)", 0),
	}})
	require.NoError(b, err)
	got, err := p.e.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &p.table, Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "RUN#" + id}, "sk": &types.AttributeValueMemberS{Value: "RUN"}}, ConsistentRead: aws.Bool(true)})
	require.NoError(b, err)
	var row map[string]any
	require.NoError(b, attributevalue.UnmarshalMap(got.Item, &row))
	_, err = p.e.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		p.put(p.row(id, "RUNNING", 5), cond, 4), p.put(p.event(id, 5), "attribute_not_exists(pk)", 0),
	}})
	require.NoError(b, err)
	obj, err := p.e.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.e.Bucket.Name()), Key: &key})
	require.NoError(b, err)
	var buf bytes.Buffer
	_, err = buf.ReadFrom(obj.Body)
	obj.Body.Close()
	require.NoError(b, err)
}

// seedInbox writes inbox entries straight into the table: mine for the
// approver "bob", others spread over 50 other approvers.
func seedInbox(tb testing.TB, e *awstest.Env, mine, others int, now time.Time) {
	tb.Helper()
	ctx := tb.Context()
	var reqs []types.WriteRequest
	flush := func() {
		for len(reqs) > 0 {
			out, err := e.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{e.Table.Name(): reqs}})
			require.NoError(tb, err)
			reqs = out.UnprocessedItems[e.Table.Name()]
		}
	}
	for i := range mine + others {
		approver := "bob"
		if i >= mine {
			approver = fmt.Sprintf("approver-%d", i%50)
		}
		id := fmt.Sprintf("seed-%06d", i)
		at := now.Add(-time.Duration(i) * time.Second)
		item, err := attributevalue.MarshalMap(dynamo.NewInboxItemForTest(runs.InboxEntry{
			Approver: approver, RunID: id, SuspensionID: "s1", TurnDigest: "d", Initiator: "alice",
			Tools: []string{"send_email"}, Deadline: now.Add(time.Hour), SuspendedAt: at, VotesNeeded: 1,
		}))
		require.NoError(tb, err)
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(reqs) == 25 {
			flush()
		}
	}
	flush()
}

// TestInboxQueryCostIsFlat: reading an approver's 30 pending approvals
// reads 30 items whether the table holds 1,000 other entries or 5,000.
func TestInboxQueryCostIsFlat(t *testing.T) {
	now := runstest.Epoch
	for _, others := range []int{1_000, 5_000} {
		t.Run(fmt.Sprintf("%d other entries", others), func(t *testing.T) {
			e := awstest.New(t)
			seedInbox(t, e, 30, others, now)
			s := runs.NewStore(e.Table, e.Bucket, runs.Options{Now: func() time.Time { return now }})
			e.Counter.Reset()
			found, cursor := 0, ""
			for {
				page, next, err := s.Inbox(t.Context(), "bob", 10, cursor)
				require.NoError(t, err)
				found += len(page)
				if next == "" {
					break
				}
				cursor = next
			}
			require.Equal(t, 30, found)
			t.Logf("30 entries among %d: %d items read, %v", others, e.Counter.ItemsRead(), e.Counter.ByOperation())
			require.Equal(t, int64(30), e.Counter.ItemsRead(), "the inbox reads the caller's entries and nothing else")
		})
	}
}

package dynamo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

// memoryWire answers DynamoDB and S3 requests in memory: it keeps the last
// row written per pk (for GetItem) and the objects put (for GetObject). It
// checks no condition; it exists to time the client side without a network
// or an emulator.
type memoryWire struct {
	mu      sync.Mutex
	rows    map[string]json.RawMessage
	objects map[string][]byte
}

func newMemoryWire() *memoryWire {
	return &memoryWire{rows: map[string]json.RawMessage{}, objects: map[string][]byte{}}
}

type ddbItem map[string]json.RawMessage

func (it ddbItem) str(name string) string {
	var v struct{ S string }
	_ = json.Unmarshal(it[name], &v)
	return v.S
}

func (w *memoryWire) Do(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	reply := func(status int, b []byte) (*http.Response, error) {
		return &http.Response{StatusCode: status, Request: r, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b))}, nil
	}
	keep := func(it ddbItem) {
		if it.str("sk") == "RUN" {
			b, _ := json.Marshal(it)
			w.rows[it.str("pk")] = b
		}
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		switch target[strings.IndexByte(target, '.')+1:] {
		case "PutItem":
			var in struct{ Item ddbItem }
			_ = json.Unmarshal(body, &in)
			keep(in.Item)
		case "TransactWriteItems":
			var in struct {
				TransactItems []struct{ Put *struct{ Item ddbItem } }
			}
			_ = json.Unmarshal(body, &in)
			for _, ti := range in.TransactItems {
				if ti.Put != nil {
					keep(ti.Put.Item)
				}
			}
		case "GetItem":
			var in struct{ Key ddbItem }
			_ = json.Unmarshal(body, &in)
			if row, ok := w.rows[in.Key.str("pk")]; ok {
				return reply(200, []byte(`{"Item":`+string(row)+`}`))
			}
		case "Query": // a run's row and parts (GetRun): its row, found by the pk among the values
			var in struct{ ExpressionAttributeValues ddbItem }
			_ = json.Unmarshal(body, &in)
			for name := range in.ExpressionAttributeValues {
				if row, ok := w.rows[in.ExpressionAttributeValues.str(name)]; ok {
					return reply(200, []byte(`{"Count":1,"ScannedCount":1,"Items":[`+string(row)+`]}`))
				}
			}
			return reply(200, []byte(`{"Count":0,"ScannedCount":0,"Items":[]}`))
		}
		return reply(200, []byte(`{}`))
	}
	switch r.Method {
	case http.MethodPut:
		w.objects[r.URL.Path] = body
		resp, _ := reply(200, nil)
		resp.Header.Set("ETag", `"x"`)
		return resp, nil
	case http.MethodGet:
		return reply(200, w.objects[r.URL.Path])
	}
	return reply(200, nil)
}

func memoryClients(w *memoryWire, apiOptions ...func(*middleware.Stack) error) (*dynamodb.Client, *s3.Client) {
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://ddb.test"), Credentials: creds, HTTPClient: w, APIOptions: apiOptions})
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://s3.test"), Credentials: creds, HTTPClient: w, APIOptions: apiOptions,
		UsePathStyle: true, RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired})
	return ddb, s3c
}

// recorder keeps the parameters of every SDK call while on, so the same
// calls can be replayed directly.
type recorder struct {
	on    bool
	calls []any
}

func (rec *recorder) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("record",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if rec.on {
				rec.calls = append(rec.calls, in.Parameters)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// replay makes the recorded calls directly on the SDK clients.
func replay(ctx context.Context, ddb *dynamodb.Client, s3c *s3.Client, calls []any, blob []byte) error {
	for _, c := range calls {
		var err error
		switch in := c.(type) {
		case *s3.PutObjectInput:
			cp := *in
			cp.Body = bytes.NewReader(blob)
			_, err = s3c.PutObject(ctx, &cp)
		case *s3.GetObjectInput:
			var out *s3.GetObjectOutput
			if out, err = s3c.GetObject(ctx, in); err == nil {
				_, err = io.ReadAll(out.Body)
				out.Body.Close()
			}
		case *dynamodb.TransactWriteItemsInput:
			_, err = ddb.TransactWriteItems(ctx, in)
		case *dynamodb.PutItemInput:
			_, err = ddb.PutItem(ctx, in)
		case *dynamodb.GetItemInput:
			var out *dynamodb.GetItemOutput
			if out, err = ddb.GetItem(ctx, in); err == nil {
				var row map[string]any
				err = attributevalue.UnmarshalMap(out.Item, &row)
			}
		case *dynamodb.QueryInput:
			var out *dynamodb.QueryOutput
			if out, err = ddb.Query(ctx, in); err == nil {
				var rows []map[string]any
				err = attributevalue.UnmarshalListOfMaps(out.Items, &rows)
			}
		default:
			err = fmt.Errorf("unexpected call %T", c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkStoreOverhead times suspend+decide+claim+load through the Store
// against the very same SDK calls (recorded from the Store, same inputs)
// made directly, both over an in-memory wire: the figure is the Store's own
// client-side cost (validation, gzip, SHA-256, marshalling, building rows)
// free of network and emulator noise, i.e. the worst case for the ratio.
func BenchmarkStoreOverhead(b *testing.B) {
	w := newMemoryWire()
	rec := &recorder{}
	ddb, s3c := memoryClients(w, rec.Register)
	table := dynamo.NewTable(ddb, "t", dynamo.Options{})
	bucket := s3state.NewBucket(s3c, "state", s3state.Options{})
	env := runstest.NewEnv(b, runstest.Harness{Rows: table, States: bucket})
	ctx := b.Context()
	stateJSON, err := runstest.SuspendedState("x", "s1").Encode()
	require.NoError(b, err)
	_, blob, err := runs.EncodeBlob("x", stateJSON)
	require.NoError(b, err)

	var storeDur, rawDur time.Duration
	n := 0
	for b.Loop() {
		n++
		b.StopTimer()
		r := env.Running(b)
		sp, _ := env.Suspension(r, "s1")
		rec.on, rec.calls = true, nil
		b.StartTimer()

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
		if err != nil {
			b.Fatal(err)
		}
		rec.on = false
		if len(rec.calls) != 6 {
			b.Fatalf("the store made %d calls, want 6", len(rec.calls))
		}

		start = time.Now()
		err = replay(ctx, ddb, s3c, rec.calls, blob)
		rawDur += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(storeDur.Microseconds())/float64(n), "store-µs/cycle")
	b.ReportMetric(float64(rawDur.Microseconds())/float64(n), "raw-µs/cycle")
	b.ReportMetric(float64(storeDur)/float64(rawDur), "store/raw")
}

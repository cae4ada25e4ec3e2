package awstest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/roundtrip"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/s3state"
)

// DefaultEndpoint is used when AWS_ENDPOINT_URL is not set.
const DefaultEndpoint = "http://localhost:4566"

// Endpoint returns AWS_ENDPOINT_URL or DefaultEndpoint.
func Endpoint() string {
	if v := os.Getenv("AWS_ENDPOINT_URL"); v != "" {
		return v
	}
	return DefaultEndpoint
}

// Config returns an aws.Config aimed at Endpoint(), with static test
// credentials when none are set and the given middlewares on every client.
// The configuration is loaded once per test binary: loading it parses the
// CA bundle that AWS_CA_BUNDLE names, 6% of the CPU of the DynamoDB suites
// under -race when every test loaded it again.
func Config(tb testing.TB, apiOptions ...func(*middleware.Stack) error) aws.Config {
	tb.Helper()
	base, err := loadConfig()
	require.NoError(tb, err)
	cfg := base.Copy()
	cfg.APIOptions = append(append([]func(*middleware.Stack) error(nil), base.APIOptions...), apiOptions...)
	return cfg
}

var loadConfig = sync.OnceValues(func() (aws.Config, error) {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithBaseEndpoint(Endpoint()),
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	return config.LoadDefaultConfig(context.Background(), opts...)
})

// S3Client returns an S3 client for the emulator (path-style addressing).
func S3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// Env is one isolated table and bucket with clients that count round trips
// and can inject faults.
type Env struct {
	Config   aws.Config
	DynamoDB *dynamodb.Client
	S3       *s3.Client
	Counter  *roundtrip.Counter
	Faults   *Faults
	Table    *dynamo.Table
	Bucket   *s3state.Bucket
}

// New creates a fresh table and bucket for tb and deletes them when it ends.
func New(tb testing.TB) *Env {
	tb.Helper()
	ctx := context.Background()
	e := &Env{Counter: roundtrip.New(), Faults: &Faults{}}
	// The counter goes before the faults, so a failed attempt still counts
	// as a round trip.
	e.Config = Config(tb, e.Counter.Register, e.Faults.Register)
	e.DynamoDB = dynamodb.NewFromConfig(e.Config, func(o *dynamodb.Options) {
		if serializeDynamoDB() {
			o.APIOptions = append(o.APIOptions, dynamoLock.Register)
		}
	})
	e.S3 = S3Client(e.Config)
	name := "agentgate-test-" + strings.ToLower(rand.Text()[:12])
	_, err := dynamo.CreateTable(ctx, e.DynamoDB, name)
	require.NoError(tb, err, "create table on %s (is an emulator running? scripts/moto.sh start)", Endpoint())
	_, err = s3state.CreateBucket(ctx, e.S3, name, e.Config.Region, "", 0)
	require.NoError(tb, err)
	e.Table = dynamo.NewTable(e.DynamoDB, name, dynamo.Options{})
	e.Bucket = s3state.NewBucket(e.S3, name, s3state.Options{})
	tb.Cleanup(func() {
		e.Faults.Clear()
		_ = e.Bucket.DeletePrefix(ctx, "")
		_, _ = e.S3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &name})
		_, _ = e.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name})
	})
	e.Counter.Reset()
	return e
}

// moto server runs each request on its own thread without a lock, and its
// TransactWriteItems snapshots the table, applies every item whose condition
// holds (even after one failed) and restores the snapshot on failure: under
// concurrent requests a failed transaction's writes leak and a concurrent
// winner's writes get rolled back. DynamoDB (and DynamoDB Local in LocalStack)
// never do that. So on moto the DynamoDB requests of the tests are put on the
// wire one at a time (each attempt under one process-wide lock); the races
// under test -- read, decide, conditional write, re-read -- still interleave
// freely between requests. Set AGENTGATE_TEST_SERIALIZE_DYNAMODB=0 or 1 to
// override the detection.
var (
	dynamoLock      = &wireLock{}
	serializeOnce   sync.Once
	serializeResult bool
)

func serializeDynamoDB() bool {
	serializeOnce.Do(func() {
		switch os.Getenv("AGENTGATE_TEST_SERIALIZE_DYNAMODB") {
		case "1", "true":
			serializeResult = true
		case "0", "false":
			serializeResult = false
		default:
			serializeResult = IsMoto()
		}
	})
	return serializeResult
}

// IsMoto reports whether the emulator at Endpoint() is a moto server.
func IsMoto() bool {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(strings.TrimRight(Endpoint(), "/") + "/moto-api/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// wireLock sends one request at a time.
type wireLock struct{ mu sync.Mutex }

// Register adds the lock around each attempt's send to an SDK stack.
func (l *wireLock) Register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("awstest.wirelock",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Exact reports whether the round trips c counted since its last Reset are
// all the code's own: no attempt lost its answer (roundtrip.Counter.Lost).
// moto now and then cuts an answer off on the way back (the SDK logs
// "failed to close HTTP response body ... response did not match expected
// checksum, N, 0"; a few times in the thousands of requests of runs/dynamo's
// suite on a loaded CI machine, on TransactWriteItems and PutItem, never in
// a loop of 5,600 here). The SDK then sends the request again, and a write
// that landed is recovered as the store recovers it, with round trips the
// code did not plan. A test that compares exact counts compares them only
// when Exact holds, and says so when it does not.
func Exact(tb testing.TB, c *roundtrip.Counter) bool {
	tb.Helper()
	if n := c.Lost(); n > 0 {
		tb.Logf("%d answer(s) lost on the way back; the counts (%v) are not compared", n, c.ByOperation())
		return false
	}
	return true
}

// AssertTrips asserts that got, the counts of a c.Measure, equal want, when
// Exact holds.
func AssertTrips(tb testing.TB, c *roundtrip.Counter, want, got map[string]int, msgAndArgs ...any) {
	tb.Helper()
	if Exact(tb, c) {
		assert.Equal(tb, want, got, msgAndArgs...)
	}
}

// Harness returns the adapter pair with raw bucket access for runstest.
func (e *Env) Harness() runstest.Harness {
	bucket := e.Bucket.Name()
	cycles, racers := 0, 0
	if IsMoto() {
		// moto's TransactWriteItems copies the whole table: a run's
		// suspension gets slower with every token the table holds.
		cycles = 10
	}
	if serializeDynamoDB() {
		// The wire lock sends one request at a time: 12 racers meet the
		// same conditions as 50, in a quarter of the requests (the four
		// concurrency cases took 15-17 s each with 50 on moto).
		racers = 12
	}
	return runstest.Harness{
		Cycles: cycles,
		Racers: racers,
		Rows:   e.Table,
		States: e.Bucket,
		PutBlob: func(t *testing.T, key string, body []byte) {
			_, err := e.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(string(body))})
			require.NoError(t, err)
		},
		DeleteBlob: func(t *testing.T, key string) {
			_, err := e.S3.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
			require.NoError(t, err)
		},
		BlobKeys: func(t *testing.T, prefix string) []string { return e.Keys(t, prefix) },
		DropRow: func(t *testing.T, runID string) {
			_, err := e.DynamoDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
				TableName: aws.String(e.Table.Name()),
				Key:       map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: "RUN#" + runID}, "sk": &dbtypes.AttributeValueMemberS{Value: "RUN"}},
			})
			require.NoError(t, err)
		},
		RowSize: func(t *testing.T, runID string) int {
			out, err := e.DynamoDB.GetItem(t.Context(), &dynamodb.GetItemInput{
				TableName: aws.String(e.Table.Name()), ConsistentRead: aws.Bool(true),
				Key: map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: "RUN#" + runID}, "sk": &dbtypes.AttributeValueMemberS{Value: "RUN"}},
			})
			require.NoError(t, err)
			require.NotNil(t, out.Item, "run %s has a row", runID)
			return dynamo.ItemSize(out.Item)
		},
	}
}

// Keys lists the bucket's keys under prefix.
func (e *Env) Keys(tb testing.TB, prefix string) []string {
	tb.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(e.S3, &s3.ListObjectsV2Input{Bucket: aws.String(e.Bucket.Name()), Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(tb, err)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// HeadSSE returns the server-side encryption S3 reports for key.
func (e *Env) HeadSSE(tb testing.TB, key string) s3types.ServerSideEncryption {
	tb.Helper()
	out, err := e.S3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(e.Bucket.Name()), Key: &key})
	require.NoError(tb, err)
	return out.ServerSideEncryption
}

// Faults fails chosen operations before they reach the wire (Fail), or
// loses their answers after they took effect (LoseAnswer). A retryable
// fault is what the SDK retries (like a 500 or a throttle); a permanent one
// is returned to the caller.
type Faults struct {
	mu    sync.Mutex
	plans map[string]*plan
}

type plan struct {
	left      int
	retryable bool
	// lose: the attempt goes to the emulator and its answer is lost.
	lose bool
}

// Fail makes the next times attempts of operation (e.g. "PutObject",
// "TransactWriteItems") fail; times < 0 fails every attempt.
func (f *Faults) Fail(operation string, times int, retryable bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.plans == nil {
		f.plans = map[string]*plan{}
	}
	f.plans[operation] = &plan{left: times, retryable: retryable}
}

// LoseAnswer makes the next times attempts of operation reach the emulator
// and then lose their answer, as a connection closed mid-answer does: the
// request takes effect, and the SDK gets the error of an answer cut off
// (a DeserializationError over net.ErrClosed, which it retries, and which
// roundtrip.Counter counts as lost).
func (f *Faults) LoseAnswer(operation string, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.plans == nil {
		f.plans = map[string]*plan{}
	}
	f.plans[operation] = &plan{left: times, lose: true}
}

// Clear removes every planned fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.plans)
}

// InjectedError is the error a fault returns.
type InjectedError struct {
	Operation string
	Retryable bool
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("injected fault in %s (retryable=%t)", e.Operation, e.Retryable)
}

// RetryableError tells the SDK's retryer whether to retry.
func (e *InjectedError) RetryableError() bool { return e.Retryable }

// Register adds the fault middleware (per attempt, after the retryer) to an
// SDK stack.
func (f *Faults) Register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("awstest.faults",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			op := awsmiddleware.GetOperationName(ctx)
			f.mu.Lock()
			p := f.plans[op]
			fail := p != nil && p.left != 0
			retryable, lose := false, false
			if fail {
				p.left--
				retryable, lose = p.retryable, p.lose
			}
			f.mu.Unlock()
			switch {
			case lose:
				out, md, err := next.HandleFinalize(ctx, in)
				if err != nil {
					return out, md, err
				}
				return middleware.FinalizeOutput{}, md, &smithy.DeserializationError{
					Err: fmt.Errorf("injected: the answer of %s was cut off: %w", op, net.ErrClosed)}
			case fail:
				return middleware.FinalizeOutput{}, middleware.Metadata{}, &InjectedError{Operation: op, Retryable: retryable}
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

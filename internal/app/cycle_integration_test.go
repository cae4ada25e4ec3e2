//go:build integration

package app_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/roundtrip"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
	"github.com/agentgate/agentgate/internal/runs/s3state"
	"github.com/agentgate/agentgate/internal/service"
)

// cycleScript is one read tool, then one write tool (which suspends for
// approval), then the answer.
const cycleScript = `{"turns": [
 {"content": [{"type": "tool_use", "id": "t1", "name": "read_document", "input": {"path": "pages/pricing.md"}}]},
 {"content": [{"type": "tool_use", "id": "t2", "name": "write_document", "input": {"path": "pages/pricing.md", "text": "# Pricing\n\nTeam: 12 EUR\n"}}]},
 {"content": [{"type": "text", "text": "Done."}]}
]}`

// Prices (us-east-1, on-demand, list prices as of 2025; no free tier):
// every assumption the cost figures rest on.
const (
	usdPerMillionWriteUnits = 0.625 // DynamoDB on-demand write request unit
	usdPerMillionReadUnits  = 0.125 // DynamoDB on-demand read request unit
	usdPerMillionS3Puts     = 5.0   // S3 Standard PUT/COPY/POST/LIST, $0.005 per 1,000 (DeleteObjects: free, as DELETE)
	usdPerMillionS3Gets     = 0.4   // S3 Standard GET/SELECT, $0.0004 per 1,000 (DELETE is free)
	usdPerMillionSFNTrans   = 25.0  // Step Functions Standard, $0.025 per 1,000 state transitions
	sfnTransitionsPerCycle  = 7     // Start, RunSegment, Choice, WaitForApproval (.waitForTaskToken callback), RunSegment, Choice, Succeed
	// The due index projects keys only (dynamo.CreateTable): a write that
	// gives an item its due key puts one index entry (under 1 KB: 1 unit), one
	// that changes the key deletes the old entry and puts the new one (2
	// units), one that removes it deletes the entry (1 unit), and one that
	// leaves it unchanged writes nothing to the index.
	dueIndexProjection = "KEYS_ONLY" // or "ALL", the projection of tables created before
)

// TestCycleCosts runs one whole cycle (start under an Idempotency-Key, as
// the Go client sends every start -> suspend -> decide -> resume ->
// complete, one read and one write tool) through the App on DynamoDB and
// S3 (moto), handling the API requests and worker jobs in process one after
// the other, and counts per phase the SDK calls and the DynamoDB write
// requests and write units (estimated from item sizes: 1 unit per started
// KB, twice in a transaction, plus the due index's writes). It prints the
// figures and the approval-state cost per million cycles next to a Step
// Functions Standard callback workflow (`make cost`).
//
// The assertions hold today's measured figures; issue #15's goals are <= 16
// SDK calls, <= 5 write requests and <= 30 write units per cycle. A segment's
// claim and steps ride on its writes (runs.Store.ClaimOnWrite, AddStep), so
// the run worker makes 1 write (claim, steps and suspension) and the resume
// worker 2 (claim and fence, the row alone; the claim's event, steps and
// settle); neither reads the run, whose row its job carries as the API
// committed it (service.NewJob). The jobs go through their Lambda payload's
// JSON, as on Lambda.
func TestCycleCosts(t *testing.T) {
	ctx := context.Background()
	counter := roundtrip.New()
	units := &writeUnits{}
	cfg := awstest.Config(t, counter.Register, units.Register)
	ddb := dynamodb.NewFromConfig(cfg)
	s3c := awstest.S3Client(cfg)
	name := "agentgate-cost-" + strings.ToLower(rand.Text()[:12])
	_, err := dynamo.CreateTable(ctx, ddb, name)
	require.NoError(t, err, "create table (is moto running? scripts/moto.sh start)")
	_, err = s3state.CreateBucket(ctx, s3c, name, cfg.Region, "", 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s3state.NewBucket(s3c, name, s3state.Options{}).DeletePrefix(ctx, "")
		_, _ = s3c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &name})
		_, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name})
	})
	_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("content/pages/pricing.md"), Body: strings.NewReader("# Pricing\n\nTeam: 10 EUR\n")})
	require.NoError(t, err)
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(cycleScript), 0o600))
	model, err := scripted.Load(script)
	require.NoError(t, err)
	env := map[string]string{config.EnvTable: name, config.EnvBucket: name, config.EnvStartRunFunction: "startrun", config.EnvResumeFunction: "resume"}
	c, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	jobs := &jobQueue{}
	a, err := app.NewAWS(app.AWSOptions{Config: c, AWS: cfg, Model: model, Routes: routes.All(), Owner: "cost", Dispatch: jobs})
	require.NoError(t, err)

	call := func(method, path, who, body string) map[string]any {
		headers := map[string]string{"Content-Type": "application/json"}
		if method == "POST" && path == "/runs" {
			// The Go client (and so the CLI) sends every start under an
			// idempotency key: the cycle counts a keyed start.
			headers["Idempotency-Key"] = "cycle-" + strings.ToLower(rand.Text())
		}
		resp, err := a.API.Handle(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			Headers:        headers,
			RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"principalId": who}}})
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, "%s %s: %d %s", method, path, resp.StatusCode, resp.Body)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(resp.Body), &v))
		return v
	}
	type phase struct {
		name      string
		calls     map[string]int
		writeReqs int
		units     float64
		indexCopy float64
		items     []string
		// beforeTool is how many SDK calls the phase made before its
		// first tool call (a document tool's S3 request); -1: none.
		beforeTool int
	}
	var phases []phase
	var s3 s3Requests
	lost := 0
	measure := func(name string, fn func()) {
		counter.Reset()
		units.reset()
		fn()
		lost += counter.Lost()
		s3.add(units.s3Requests())
		phases = append(phases, phase{name, counter.ByOperation(), units.requests, units.table, units.index, units.items, units.beforeTool()})
	}
	var id, digest string
	measure("start (POST /runs, Idempotency-Key)", func() {
		id = call("POST", "/runs", "alice", `{"prompt":"Update the Team price to 12 EUR.","approvers":["bob"]}`)["id"].(string)
	})
	measure("run worker: read tool, suspend", func() { require.NoError(t, a.Worker.Handle(ctx, jobs.next(t))) })
	measure("read (GET /runs/{id})", func() {
		v := call("GET", "/runs/"+id, "bob", "")
		require.Equal(t, string(runs.StatusWaiting), v["status"])
		digest = v["pending"].(map[string]any)["turn_digest"].(string)
	})
	measure("decide (POST /runs/{id}/decision)", func() {
		call("POST", "/runs/"+id+"/decision", "bob", fmt.Sprintf(`{"turn_digest":%q,"action":"approve"}`, digest))
	})
	measure("resume worker: write tool, complete", func() { require.NoError(t, a.Worker.Handle(ctx, jobs.next(t))) })
	require.Equal(t, string(runs.StatusCompleted), call("GET", "/runs/"+id, "alice", "")["status"])

	var sdk, ddbCalls, writes, reads int
	var wu float64
	t.Logf("%-38s %4s %6s %6s %6s  %s", "phase", "SDK", "writes", "WU", "index", "calls")
	for _, p := range phases {
		n := 0
		for op, k := range p.calls {
			n += k
			switch {
			case strings.HasPrefix(op, "DynamoDB."):
				ddbCalls += k
				if op == "DynamoDB.GetItem" || op == "DynamoDB.Query" {
					reads += k
				}
			}
		}
		sdk += n
		writes += p.writeReqs
		wu += p.units + p.indexCopy
		t.Logf("%-38s %4d %6d %6.0f %6.0f  %v", p.name, n, p.writeReqs, p.units, p.indexCopy, p.calls)
		if p.beforeTool >= 0 {
			t.Logf("%-38s   round trips before its first tool call: %d", "", p.beforeTool)
		}
		for _, it := range p.items {
			t.Logf("%-38s   items (kind:bytes): %s", "", strings.TrimPrefix(it, "*dynamodb."))
		}
	}
	// Reads: each GetItem/Query counted as one read unit (eventually
	// consistent rows under 4 KB are half a unit; this rounds up).
	costDDB := wu*usdPerMillionWriteUnits + float64(reads)*usdPerMillionReadUnits
	costS3 := float64(s3.statePuts)*usdPerMillionS3Puts + float64(s3.stateGets)*usdPerMillionS3Gets
	costTools := float64(s3.toolPuts)*usdPerMillionS3Puts + float64(s3.toolGets)*usdPerMillionS3Gets
	sfn := sfnTransitionsPerCycle * usdPerMillionSFNTrans
	t.Logf("whole cycle: %d SDK calls (%d DynamoDB), %d DynamoDB write requests, %.0f write units (index copies included); S3 state blobs (runs/): %d PUTs and LISTs, %d GETs; the document tools' own S3 requests: %d PUTs, %d GETs", sdk, ddbCalls, writes, wu, s3.statePuts, s3.stateGets, s3.toolPuts, s3.toolGets)
	t.Logf("approval-state cost per million cycles: DynamoDB $%.2f + S3 state $%.2f = $%.2f (the document tools' S3 requests: $%.2f more); Step Functions Standard callback variant: %d transitions x $%.3f/1000 = $%.2f (ratio %.2f)",
		costDDB, costS3, costDDB+costS3, costTools, sfnTransitionsPerCycle, usdPerMillionSFNTrans/1000, sfn, (costDDB+costS3)/sfn)
	t.Logf("prices: DynamoDB on-demand $%.3f per million write units, $%.3f per million read units; S3 $%.2f per million PUTs, $%.2f per million GETs; Step Functions Standard $%.0f per million transitions; Lambda, API Gateway, SES and the model are left out of both sides", usdPerMillionWriteUnits, usdPerMillionReadUnits, usdPerMillionS3Puts, usdPerMillionS3Gets, usdPerMillionSFNTrans)

	// Today's figures (see the doc comment for the goals): fail if a change
	// makes a cycle dearer; lower the bounds when it gets cheaper.
	// Measured 2026-12-03 on moto: 27 calls, 13 write requests, 85 units
	// (81 before the approver inbox entries of issue #16); 12 write
	// requests and 85 units (62 table, 23 index) once the estimator counted
	// the index truly (a key change deletes and puts: 98 with projection
	// ALL) and the index projected keys only; 21 calls, 7 write requests,
	// 61 units (48 table, 13 index) with a segment's steps on its next write;
	// 42 units (29 table) once a row was its deflated JSON (250-556 bytes,
	// was 427-1,666): every item of the cycle is under 1 KB; 20 calls once
	// the settle deleted its blobs by key, without a LIST: $32.15 of
	// approval state (DynamoDB $26.75, S3 state blobs $5.40; the document
	// tools' own S3 requests, $11.60, counted apart).
	// 18 calls, 5 write requests, 33 units (24 table, 9 index), $26.52
	// (DynamoDB $21.12) with the claim on the segment's first write.
	// 30 units (21 table, 9 index), $24.65 (DynamoDB $19.25) once the fence
	// wrote the row alone (a conditional PutItem, 1 unit, was a transaction
	// of the row and the claim's event, 4): the claim's event goes with the
	// settle. 28 units (21 table, 7 index), $23.40 (DynamoDB $18.00) once
	// a claim whose dispatch deadline leaves at least half a lease ended
	// the lease there: the fence keeps the run's due-index key (the resume
	// worker's index units 4 -> 2; the settle still moves it).
	// 16 calls (7 DynamoDB), $26.27 (DynamoDB $20.88) once a dispatched job
	// carries the row its dispatcher committed (service.NewJob): neither
	// worker reads the run; the resume worker makes 2 round trips (the
	// state's GET, the fence) before its write tool runs, was 3, and the
	// run worker none before its read tool, was 1. Rows carry their write
	// id as an attribute for the condition of a write from a snapshot
	// (292-597 bytes, still under 1 KB: the units did not change).
	// Both: 16 calls (7 DynamoDB), 5 write requests, 28 units (21 table,
	// 7 index), $23.15 (DynamoDB $17.75 + S3 state $5.40).
	// The start under an Idempotency-Key, as the Go client and the CLI
	// send every start: 30 units (23 table, 7 index), $24.40 (DynamoDB
	// $19.00): the key's item is one more item of the start's transaction
	// (2 units); its run_started event item carries the key's hash, still
	// under 1 KB. The key is read only when the write is refused for it
	// (a replay), so the start makes no request more: 16 calls (17, $24.52,
	// while the API read the key before every keyed start).
	if lost > 0 {
		// See awstest.Exact: the emulator cut an answer off, and the SDK's
		// retry (and the store's recovery) are in the figures above.
		t.Logf("%d answer(s) lost on the way back: the figures count round trips the code did not plan; the bounds are not checked", lost)
		return
	}
	require.Equal(t, map[string]int{"DynamoDB.TransactWriteItems": 1}, phases[0].calls, "a start under a key: its one write, no read before it")
	require.LessOrEqual(t, costDDB+costS3, 24.41, "approval-state cost per million cycles (goal <= $35)")
	require.LessOrEqual(t, sdk, 16, "SDK calls per cycle (goal <= 16)")
	require.Equal(t, 0, phases[1].beforeTool, "round trips of the run worker before its first tool call")
	require.Equal(t, 2, phases[4].beforeTool, "round trips of the resume worker before its first tool call")
	require.LessOrEqual(t, writes, 5, "DynamoDB write requests per cycle (goal <= 5)")
	require.LessOrEqual(t, wu, 30.0, "DynamoDB write units per cycle (goal <= 30)")
	require.Greater(t, wu, 0.0, "the write units were counted")
}

// jobQueue is the dispatcher: it keeps the jobs for the test to run.
type jobQueue struct {
	mu   sync.Mutex
	jobs []service.Job
}

func (q *jobQueue) Dispatch(_ context.Context, job service.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ev service.JobEvent // as the worker function decodes its payload
	if err := json.Unmarshal(job.Payload(), &ev); err != nil {
		return fmt.Errorf("job payload: %w", err)
	}
	if ev.Job == nil {
		return fmt.Errorf("job payload without a job: %s", job.Payload())
	}
	q.jobs = append(q.jobs, *ev.Job)
	return nil
}

func (q *jobQueue) next(t *testing.T) service.Job {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	require.NotEmpty(t, q.jobs, "no job was dispatched")
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	return j
}

// writeUnits estimates DynamoDB write units from the items of every write
// request: ceil(size / 1 KB) per item, doubled inside TransactWriteItems, and
// the index writes of dueIndexProjection (it remembers each item's due key
// to tell). An UpdateItem (or a transaction's Update) of a small item counts
// 1 (2).
type writeUnits struct {
	mu           sync.Mutex
	requests     int
	table, index float64
	// due holds the due-index entry each item written last had.
	due map[string]dueEntry
	// s3 counts the S3 requests.
	s3 s3Requests
	// items lists what each write request wrote, item by item: the sort
	// key's kind and the item's size in bytes.
	items []string
	// calls counts the SDK calls; firstTool is the count before the first
	// S3 request of a tool (not under runs/), -1 before there is one.
	calls, firstTool int
}

// beforeTool is how many SDK calls came before the first tool call's S3
// request since the last reset (-1: there was none).
func (w *writeUnits) beforeTool() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstTool
}

func (w *writeUnits) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests, w.table, w.index, w.items, w.s3 = 0, 0, 0, nil, s3Requests{}
	w.calls, w.firstTool = 0, -1
}

func (w *writeUnits) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("agentgate.writeUnits",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			w.count(in.Parameters)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (w *writeUnits) count(params any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var req []string
	defer func() {
		if req != nil {
			w.items = append(w.items, fmt.Sprintf("%T%v", params, req))
		}
	}()
	put := func(item map[string]types.AttributeValue, factor float64) {
		size := dynamo.ItemSize(item)
		req = append(req, fmt.Sprintf("%s:%d", itemKind(item), size))
		u := math.Ceil(float64(size) / 1024)
		w.table += factor * u
		w.index += w.dueChange(item)
	}
	tool := func(key string) {
		if w.firstTool < 0 && !strings.HasPrefix(key, "runs/") {
			w.firstTool = w.calls
		}
	}
	defer func() { w.calls++ }()
	switch p := params.(type) {
	case *s3.PutObjectInput:
		tool(aws.ToString(p.Key))
		w.s3.count(aws.ToString(p.Key), true)
	case *s3.CopyObjectInput:
		w.s3.count(aws.ToString(p.Key), true)
	case *s3.ListObjectsV2Input:
		w.s3.count(aws.ToString(p.Prefix), true) // LIST is priced as a PUT
	case *s3.GetObjectInput:
		tool(aws.ToString(p.Key))
		w.s3.count(aws.ToString(p.Key), false)
	case *s3.HeadObjectInput:
		tool(aws.ToString(p.Key))
		w.s3.count(aws.ToString(p.Key), false)
	case *dynamodb.PutItemInput:
		w.requests++
		put(p.Item, 1)
	case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		w.requests++
		w.table++
	case *dynamodb.BatchWriteItemInput:
		w.requests++
		for _, reqs := range p.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					put(r.PutRequest.Item, 1)
				} else {
					w.table++
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		w.requests++
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				put(it.Put.Item, 2)
			case it.Update != nil, it.Delete != nil, it.ConditionCheck != nil:
				w.table += 2
			}
		}
	}
}

// itemKind names an item by its sort key's prefix (RUN, EVT, TOKEN...), or by
// its partition key's when the sort key says nothing (tokens, inbox).
func itemKind(item map[string]types.AttributeValue) string {
	k := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			kind, _, _ := strings.Cut(v.Value, "#")
			return kind
		}
		return "?"
	}
	if sk := k("sk"); sk != "TOKEN" && !strings.HasPrefix(k("pk"), "INBOX") {
		return sk
	}
	return k("pk")
}

// dueChange returns the due-index write units of writing item and
// remembers its due key and size. With projection ALL an index entry
// costs what the item costs (ceil(size / 1 KB)), and a write that changes
// projected attributes but not the key rewrites it.
func (w *writeUnits) dueChange(item map[string]types.AttributeValue) float64 {
	s := func(name string) string {
		switch v := item[name].(type) {
		case *types.AttributeValueMemberS:
			return v.Value
		case *types.AttributeValueMemberN:
			return v.Value
		}
		return ""
	}
	if w.due == nil {
		w.due = map[string]dueEntry{}
	}
	id := s("pk") + "/" + s("sk")
	old := w.due[id]
	now := dueEntry{size: 1}
	if s("due_pk") != "" {
		now.key = s("due_pk") + "/" + s("due_at")
	}
	if dueIndexProjection == "ALL" {
		now.size = math.Ceil(float64(dynamo.ItemSize(item)) / 1024)
	}
	w.due[id] = now
	switch {
	case old.key == "" && now.key == "":
		return 0
	case old.key == "":
		return now.size
	case now.key == "":
		return old.size
	case old.key != now.key:
		return old.size + now.size
	case dueIndexProjection == "ALL":
		return now.size
	}
	return 0
}

// dueEntry is an item's due-index entry as the estimator knows it: its key
// ("" when the item is not in the index) and its write units.
type dueEntry struct {
	key  string
	size float64
}

// s3Requests counts S3's priced requests (DELETE is free): those on the
// state blobs (keys under runs/) apart from the document tools' own.
type s3Requests struct {
	statePuts, stateGets, toolPuts, toolGets int
}

func (c *s3Requests) count(key string, put bool) {
	state := strings.HasPrefix(key, "runs/")
	switch {
	case state && put:
		c.statePuts++
	case state:
		c.stateGets++
	case put:
		c.toolPuts++
	default:
		c.toolGets++
	}
}

func (c *s3Requests) add(o s3Requests) {
	c.statePuts += o.statePuts
	c.stateGets += o.stateGets
	c.toolPuts += o.toolPuts
	c.toolGets += o.toolGets
}

func (w *writeUnits) s3Requests() s3Requests {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s3
}

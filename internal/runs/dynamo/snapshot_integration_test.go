//go:build integration

package dynamo_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// putKeys records the sort keys of the items a DynamoDB client puts.
type putKeys struct {
	mu   sync.Mutex
	keys []string
}

func (p *putKeys) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("test.putKeys",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			p.record(in.Parameters)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (p *putKeys) record(params any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sk := func(item map[string]types.AttributeValue) string {
		if v, ok := item["sk"].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return "?"
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		p.keys = append(p.keys, sk(in.Item))
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Put != nil {
				p.keys = append(p.keys, sk(it.Put.Item))
			}
		}
	}
}

func (p *putKeys) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys
	p.keys = nil
	return k
}

// hidePrimer is a RowStore that does not pass PrimeRow on: a worker whose
// table was never told of the snapshot.
type hidePrimer struct{ runs.RowStore }

// TestSnapshotClaimPrimesParts: a worker process that claims a run from a
// snapshot (runs.Store.ClaimSnapshot), never having read it, does not
// write again the part items the row keeps apart (a start request over
// 1 KiB): its table is primed with the snapshot. Without the priming it
// would. A snapshot that is not the stored row (a forged request at the
// stored version) makes the write fail, never leaves a row that names a
// part item nobody wrote.
func TestSnapshotClaimPrimesParts(t *testing.T) {
	env := awstest.New(t)
	ctx := t.Context()
	api := runs.NewStore(env.Table, env.Bucket, runs.Options{})
	request := json.RawMessage(`{"prompt":"` + strings.Repeat("a long prompt ", 200) + `"}`)
	create := func(t *testing.T) *runs.Run {
		t.Helper()
		r, err := api.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: request})
		require.NoError(t, err)
		return r
	}
	// worker returns a store as in a new worker process: a table of its own
	// (nothing cached) whose puts are recorded.
	worker := func(t *testing.T, primed bool) (*runs.Store, *putKeys) {
		t.Helper()
		keys := &putKeys{}
		table := dynamo.NewTable(dynamodb.NewFromConfig(awstest.Config(t, keys.Register)), env.Table.Name(), dynamo.Options{})
		var rows runs.RowStore = table
		if !primed {
			rows = hidePrimer{table}
		}
		return runs.NewStore(rows, env.Bucket, runs.Options{}), keys
	}
	partKey := "RUN#request"

	tests := []struct {
		name        string
		primed      bool
		wantRewrite bool
	}{
		{"primed from the snapshot", true, false},
		{"not primed", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := create(t)
			store, keys := worker(t, tt.primed)
			cur, err := store.ClaimSnapshot(r, "w1")
			require.NoError(t, err)
			cur, err = store.RenewLease(ctx, cur, "w1") // the claim's write
			require.NoError(t, err)
			first := keys.take()
			assert.Contains(t, first, "RUN")
			assert.Equal(t, tt.wantRewrite, contains(first, partKey), "the request's part item in the claim's write: %v", first)
			_, err = store.RenewLease(ctx, cur, "w1")
			require.NoError(t, err)
			assert.NotContains(t, keys.take(), partKey, "a later write knows the part from the one before")
			got, err := api.Get(ctx, r.ID)
			require.NoError(t, err)
			assert.JSONEq(t, string(request), string(got.Request))
			assert.Equal(t, runs.StatusRunning, got.Status)
		})
	}

	t.Run("a snapshot that is not the stored row", func(t *testing.T) {
		r := create(t)
		forged := r.Clone()
		forged.Request = json.RawMessage(`{"prompt":"` + strings.Repeat("another prompt ", 200) + `"}`)
		store, keys := worker(t, true)
		_, err := store.ClaimSnapshot(forged, "w1")
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err), "changed under the stored write id: refused at once (got %v)", err)
		// Made up whole (its write id digests it): the worker's table is
		// primed with the forged request's part, at the stored version;
		// the write leaves the part out, and its condition (the stored
		// write id, the stored row naming the part with that hash) fails.
		runs.SealWriteID(forged)
		cur, err := store.ClaimSnapshot(forged, "w1")
		require.NoError(t, err)
		_, err = store.RenewLease(ctx, cur, "w1")
		assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "got %v", err)
		assert.NotContains(t, keys.take(), partKey)
		got, err := api.Get(ctx, r.ID)
		require.NoError(t, err, "the run still reads")
		assert.Equal(t, r.Version, got.Version)
		assert.JSONEq(t, string(request), string(got.Request))
	})
}

func contains(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

//go:build integration

package dynamo_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs/dynamo"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// TestATornReadOfARowAndItsPartsIsReadAgain: a run's row and the parts it
// keeps apart are written in one transaction, but a Query reads each item
// as committed, not the transaction's items together, and the sweep reads
// rows and parts in two BatchGetItem calls: a read may find the row of one
// write beside a part of another. That read is made again (GetRun up to
// three Queries; the sweep reads such a run on its own), not answered with
// an error (a 500 on GET /runs/{id}, a failed sweep page). Here the part
// item is made to be of another version, and put back once the first read
// of it is over, as the writing transaction would.
func TestATornReadOfARowAndItsPartsIsReadAgain(t *testing.T) {
	env := awstest.New(t)
	e := runstest.NewEnv(t, env.Harness())
	ctx := t.Context()
	r := suspendedWithLargeParts(t, e)

	table := aws.String(env.Table.Name())
	stored, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: partKey(r.ID, "pending_calls"), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.NotNil(t, stored.Item, "the held calls are an item of their own")
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		_, err := env.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item})
		require.NoError(t, err)
	}
	tear := func() {
		t.Helper()
		other := map[string]types.AttributeValue{}
		for k, v := range stored.Item {
			other[k] = v
		}
		other["sha256"] = &types.AttributeValueMemberS{Value: strings.Repeat("0", 64)}
		put(other)
	}

	// A client whose Queries of run items are counted, and that puts the
	// part back after the first one made once mend is set.
	var mu sync.Mutex
	queries, mend := 0, false
	cfg := awstest.Config(t, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("torn", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if q, ok := in.Parameters.(*dynamodb.QueryInput); ok && q.IndexName == nil { // a run's read, not the sweep's index
				mu.Lock()
				queries++
				fix := mend
				mend = false
				mu.Unlock()
				if fix {
					put(stored.Item)
				}
			}
			return out, md, err
		}), middleware.After)
	})
	reader := dynamo.NewTable(dynamodb.NewFromConfig(cfg), env.Table.Name(), dynamo.Options{})
	reset := func(mended bool) {
		mu.Lock()
		defer mu.Unlock()
		queries, mend = 0, mended
	}

	t.Run("GetRun", func(t *testing.T) {
		tear()
		reset(true)
		got, err := reader.GetRun(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r.PendingCalls, got.PendingCalls)
		assert.Equal(t, 2, queries, "read again once")
	})
	t.Run("the sweep's read", func(t *testing.T) {
		tear()
		reset(true)
		due, _, err := reader.Due(ctx, r.DueAt, 10, "")
		require.NoError(t, err)
		require.Len(t, due, 1)
		assert.Equal(t, r.PendingCalls, due[0].PendingCalls)
		assert.Equal(t, 2, queries, "the run read on its own, twice")
	})
	t.Run("a part that stays of another version", func(t *testing.T) {
		tear()
		reset(false)
		_, err := reader.GetRun(ctx, r.ID)
		require.ErrorContains(t, err, "not the one the row names")
		assert.Equal(t, 3, queries, "three reads, then the error")
		put(stored.Item)
	})
}

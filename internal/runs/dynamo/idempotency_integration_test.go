//go:build integration

package dynamo_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// TestIdempotencyKeyItem: a start without a key writes the run and its
// event alone (no key item, no extra request); a start under a key puts
// the key item in the run's own transaction (one TransactWriteItems, no
// other write), so neither can be stored without the other; the purge
// deletes the key with the run.
func TestIdempotencyKeyItem(t *testing.T) {
	env := awstest.New(t)
	e := runstest.NewEnv(t, env.Harness())
	ctx := t.Context()
	keyItems := func() []string {
		out, err := env.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(env.Table.Name()), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		var pks []string
		for _, it := range out.Items {
			if pk := it["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "IDEMKEY#") {
				pks = append(pks, pk)
			}
		}
		return pks
	}
	req := json.RawMessage(`{"prompt":"file the report"}`)

	var err error
	trips := env.Counter.Measure(func() {
		_, err = e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	})
	require.NoError(t, err)
	awstest.AssertTrips(t, env.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips, "a start without a key: the run and its event")
	assert.Empty(t, keyItems(), "no key, no key item")

	digest := strings.Repeat("a", 64)
	var r *runs.Run
	trips = env.Counter.Measure(func() {
		r, _, err = e.Store.Start(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req, IdempotencyKey: "k-1", RequestSHA256: digest})
	})
	require.NoError(t, err)
	awstest.AssertTrips(t, env.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1}, trips, "the key item goes in the run's transaction")
	assert.Equal(t, []string{"IDEMKEY#" + runs.IdempotencyKeyHash("alice", "k-1")}, keyItems())

	trips = env.Counter.Measure(func() { _, err = e.Store.KeyedRun(ctx, "alice", "k-1", digest) })
	require.NoError(t, err)
	awstest.AssertTrips(t, env.Counter, map[string]int{"DynamoDB.GetItem": 1, "DynamoDB.Query": 1}, trips, "a replay's look-up: the key, then its run")

	// The same start sent again: the write comes first (a start makes no
	// read before it), its condition on the key refuses it, and then the
	// key and its run are read; nothing else.
	var again *runs.Run
	var replayed bool
	trips = env.Counter.Measure(func() {
		again, replayed, err = e.Store.Start(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req, IdempotencyKey: "k-1", RequestSHA256: digest})
	})
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, r.ID, again.ID)
	awstest.AssertTrips(t, env.Counter, map[string]int{"DynamoDB.TransactWriteItems": 1, "DynamoDB.GetItem": 1, "DynamoDB.Query": 1}, trips, "a replay through Start: the refused write, the key, its run")

	_, err = e.Store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	require.NoError(t, e.Store.Purge(ctx, r.ID))
	assert.Empty(t, keyItems(), "the purge deletes the key with its run")
}

//go:build integration

package s3state_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

func TestStateBlobOnS3(t *testing.T) {
	e := awstest.New(t)
	ctx := t.Context()
	state := []byte(`{"schema_version":1,"transcript":[{"role":"user","text":"` + strings.Repeat("hello ", 1000) + `"}]}`)

	ref, err := e.Bucket.PutState(ctx, "r1", state)
	require.NoError(t, err)
	assert.Equal(t, runs.StateKey("r1", ref.SHA256), ref.Key)
	assert.Less(t, ref.Size, int64(len(state)), "stored gzip'd")
	assert.Equal(t, s3types.ServerSideEncryptionAes256, e.HeadSSE(t, ref.Key), "SSE requested on put")

	got, err := e.Bucket.LoadState(ctx, ref)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	again, err := e.Bucket.PutState(ctx, "r1", state)
	require.NoError(t, err)
	assert.Equal(t, ref, again, "content addressed: the same state lands on the same key")
	assert.Len(t, e.Keys(t, runs.RunPrefix("r1")), 1)
}

func TestDeleteRunStatesInBatches(t *testing.T) {
	e := awstest.New(t)
	ctx := t.Context()
	const n = 1001 // one over a batch: two DeleteObjects calls
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				_, err := e.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Bucket.Name()), Key: aws.String(k), Body: strings.NewReader("x")})
				assert.NoError(t, err)
			}
		})
	}
	for i := range n {
		keys <- fmt.Sprintf("%sstate/%05d.json.gz", runs.RunPrefix("big"), i)
	}
	keys <- runs.RunPrefix("other") + "state/keep.json.gz"
	close(keys)
	wg.Wait()
	require.Len(t, e.Keys(t, runs.RunPrefix("big")), n)

	trips := e.Counter.Measure(func() { require.NoError(t, e.Bucket.DeleteRunStates(ctx, "big")) })
	if awstest.Exact(t, e.Counter) {
		assert.Equal(t, 2, trips["S3.DeleteObjects"], "1001 keys = 2 DeleteObjects calls of at most 1000")
	}
	assert.Empty(t, e.Keys(t, runs.RunPrefix("big")))
	assert.Len(t, e.Keys(t, runs.RunPrefix("other")), 1, "other runs' blobs stay")
	require.NoError(t, e.Bucket.DeleteRunStates(ctx, "big"), "deleting an empty prefix is fine")
}

// TestDeleteStatesByKey: the blobs a settled run points at go with one
// DeleteObjects call and no LIST (S3 prices a LIST as a PUT); other blobs
// of the run stay for purge.
func TestDeleteStatesByKey(t *testing.T) {
	e := awstest.New(t)
	ctx := t.Context()
	state, err := e.Bucket.PutState(ctx, "r1", []byte(`{"n":1}`))
	require.NoError(t, err)
	checkpoint, err := e.Bucket.PutState(ctx, "r1", []byte(`{"n":2}`))
	require.NoError(t, err)
	older, err := e.Bucket.PutState(ctx, "r1", []byte(`{"n":0}`))
	require.NoError(t, err)

	trips := e.Counter.Measure(func() {
		require.NoError(t, e.Bucket.DeleteStates(ctx, state, runs.StateRef{}, checkpoint, state))
	})
	awstest.AssertTrips(t, e.Counter, map[string]int{"S3.DeleteObjects": 1}, trips)
	assert.Equal(t, []string{older.Key}, e.Keys(t, runs.RunPrefix("r1")), "only the blobs named are deleted")

	trips = e.Counter.Measure(func() { require.NoError(t, e.Bucket.DeleteStates(ctx)) })
	assert.Empty(t, trips, "nothing to delete: no call")
	require.NoError(t, e.Bucket.DeleteStates(ctx, state), "deleting what is gone is fine")
}

package dynamo

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// A write deflates its row (with rowDict) and its events (without): the
// compressors are reused, not made anew (about 1 MB each), and a reused
// one never carries the other kind's dictionary or an earlier input.
// Under the race detector a new compressor costs 0.2 s, hence the mark.
//
//agentgate:megabytes
func TestWritesReuseCompressors(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	run := func(i int) *runs.Run {
		return &runs.Run{ID: fmt.Sprintf("r%d", i), Status: runs.StatusQueued, Version: int64(i + 1), CreatedAt: at, UpdatedAt: at,
			Initiator: "alice", Approvers: []string{"bob"}, Request: json.RawMessage(fmt.Sprintf(`{"prompt":"p%d"}`, i)), DueAt: at, LastSeq: 1}
	}
	encode := func(i int) {
		it, err := newRowItem(run(i), 8)
		require.NoError(t, err)
		m, err := attributevalue.MarshalMap(it)
		require.NoError(t, err)
		got, _, err := decodeRowItem(m)
		require.NoError(t, err)
		assert.Equal(t, run(i).Request, got.Request)

		b, err := deflateJSON(map[string]int{"seq": i})
		require.NoError(t, err)
		var back map[string]int
		require.NoError(t, inflateJSON(b, &back))
		assert.Equal(t, i, back["seq"])
	}

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				encode(g*100 + i)
			}
		})
	}
	wg.Wait()

	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		encode(i)
	}
	runtime.ReadMemStats(&after)
	perWrite := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per row and event encoded and decoded", perWrite)
	// New compressors cost 1.6 MB per row and event.
	assert.Less(t, perWrite, uint64(256<<10), "bytes allocated per row and event: compressors are made anew")
}

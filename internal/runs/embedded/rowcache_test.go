package embedded

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestRowCacheCopiesAndFollowsWrites checks what the row cache must keep
// from GetRun: each read is a copy of its own (changing one changes neither
// the stored row nor the next read), and a read after a write sees the
// write.
func TestRowCacheCopiesAndFollowsWrites(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "agentgate.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	at := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	r := &runs.Run{ID: "r1", Status: runs.StatusQueued, Version: 1, CreatedAt: at, UpdatedAt: at,
		Initiator: "alice", Approvers: []string{"bob"}, Metadata: map[string]string{"k": "v"}, DueAt: at}
	require.NoError(t, db.Write(ctx, runs.Write{Run: r, Create: true}))

	first, err := db.GetRun(ctx, "r1")
	require.NoError(t, err)
	first.Approvers[0] = "mallory"
	first.Metadata["k"] = "changed"
	first.Status = runs.StatusFailed
	second, err := db.GetRun(ctx, "r1")
	require.NoError(t, err)
	if second.Approvers[0] != "bob" || second.Metadata["k"] != "v" || second.Status != runs.StatusQueued {
		t.Errorf("second read = approvers %v, metadata %v, status %s; want [bob], map[k:v], QUEUED (a change to the first read leaked)",
			second.Approvers, second.Metadata, second.Status)
	}

	next := second.Clone()
	next.Status, next.Version, next.DueAt = runs.StatusRunning, 2, at.Add(time.Minute)
	require.NoError(t, db.Write(ctx, runs.Write{Run: next, ExpectStatus: runs.StatusQueued, ExpectVersion: 1}))
	third, err := db.GetRun(ctx, "r1")
	require.NoError(t, err)
	if third.Status != runs.StatusRunning || third.Version != 2 {
		t.Errorf("read after the write = %s at version %d, want RUNNING at version 2", third.Status, third.Version)
	}
	// The write's condition is checked against the row as stored, cached
	// or not: the stale version is refused.
	stale := third.Clone()
	stale.Version = 3
	err = db.Write(ctx, runs.Write{Run: stale, ExpectStatus: runs.StatusQueued, ExpectVersion: 1})
	require.True(t, runs.ErrorCode(err) == runs.EConflict, "write on a stale version: got %v, want a conflict", err)
}

// TestRowCacheDecodesLikeJSON checks that a cached read equals a fresh
// decode of the same bytes, and that the cache stays within its bound.
func TestRowCacheDecodesLikeJSON(t *testing.T) {
	var c rowCache
	raw := []byte(`{"id":"r1","status":"WAITING_FOR_APPROVAL","version":4,"approvers":["bob"],"request":{"prompt":"p"},` +
		`"pending_calls":[{"id":"c1","tool":"write","input":{"a":1},"needs_approval":true}],"due_at":"2026-12-03T20:00:00Z","last_seq":3}`)
	miss, err := c.decode("r1", raw)
	require.NoError(t, err)
	hit, err := c.decode("r1", raw)
	require.NoError(t, err)
	if !reflect.DeepEqual(miss, hit) {
		t.Errorf("cached read = %+v, want %+v", hit, miss)
	}
	h, err := c.header("r1", raw)
	require.NoError(t, err)
	if h.Status != runs.StatusWaiting || h.Version != 4 || !h.DueAt.Equal(time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)) {
		t.Errorf("header = %+v, want WAITING_FOR_APPROVAL, version 4, due 2026-12-03T20:00:00Z", h)
	}
	for i := range rowCacheSize + 10 {
		_, err := c.decode(fmt.Sprintf("r%d", i), raw)
		require.NoError(t, err)
	}
	if n := len(c.rows); n > rowCacheSize {
		t.Errorf("cache holds %d rows, want at most %d", n, rowCacheSize)
	}

	big := []byte(fmt.Sprintf(`{"id":"big","status":"QUEUED","version":1,"request":{"prompt":%q}}`, strings.Repeat("x", rowCacheBytes/64)))
	for i := range 100 {
		_, err := c.decode(fmt.Sprintf("big%d", i), big)
		require.NoError(t, err)
	}
	sum := 0
	for _, e := range c.rows {
		sum += len(e.raw)
	}
	if sum != c.bytes || sum > rowCacheBytes {
		t.Errorf("cache holds %d bytes of rows (counted %d), want at most %d", sum, c.bytes, rowCacheBytes)
	}
	if _, err := c.decode("huge", []byte(`{"id":"huge","purpose":"`+strings.Repeat("x", rowCacheBytes/8)+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.rows["huge"]; ok {
		t.Error("a row over rowCacheBytes/16 was kept")
	}
}

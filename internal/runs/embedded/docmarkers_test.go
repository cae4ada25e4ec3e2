package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	berrors "go.etcd.io/bbolt/errors"
)

func testMarker(i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "run/-/call-%d", i))
	return hex.EncodeToString(sum[:])
}

func TestDocMarkers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentgate.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m := testMarker(0)
	if rec, ok, err := db.Applied(ctx, m); ok || err != nil || rec != nil {
		t.Errorf("Applied(missing) = %q, %v, %v; want nil, false, nil", rec, ok, err)
	}
	record := []byte(`{"tool":"write_document","result":"created a.md"}`)
	if err := db.MarkApplied(ctx, m, record); err != nil {
		t.Fatalf("MarkApplied: %v", err)
	}
	record[0] = 'X' // the database kept its own copy
	rec, ok, err := db.Applied(ctx, m)
	if !ok || err != nil || string(rec) != `{"tool":"write_document","result":"created a.md"}` {
		t.Errorf("Applied = %q, %v, %v; want the record, true, nil", rec, ok, err)
	}
	if err := db.MarkApplied(ctx, m, []byte(`{"result":"replaced"}`)); err != nil {
		t.Fatalf("MarkApplied (replace): %v", err)
	}
	if rec, ok, err := db.Applied(ctx, m); !ok || err != nil || string(rec) != `{"result":"replaced"}` {
		t.Errorf("Applied after replace = %q, %v, %v; want the new record", rec, ok, err)
	}
	empty := testMarker(1)
	if err := db.MarkApplied(ctx, empty, nil); err != nil {
		t.Fatalf("MarkApplied (empty record): %v", err)
	}
	if rec, ok, err := db.Applied(ctx, empty); !ok || err != nil || len(rec) != 0 {
		t.Errorf("Applied(empty record) = %q, %v, %v; want empty, true, nil", rec, ok, err)
	}
	// A prefix of a stored marker, or a key after the last, is missing.
	for _, missing := range []string{m[:10], "ffff" + m} {
		if _, ok, err := db.Applied(ctx, missing); ok || err != nil {
			t.Errorf("Applied(%q) = %v, %v; want false, nil", missing, ok, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := db.Applied(cancelled, m); !errors.Is(err, context.Canceled) {
		t.Errorf("Applied(cancelled) error = %v, want context.Canceled", err)
	}
	if err := db.MarkApplied(cancelled, testMarker(2), []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("MarkApplied(cancelled) error = %v, want context.Canceled", err)
	}

	// Committed means on disk: a reopened database has the markers.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Applied(ctx, m); !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Errorf("Applied on a closed database: error = %v, want ErrDatabaseNotOpen", err)
	}
	if err := db.MarkApplied(ctx, m, []byte("x")); !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Errorf("MarkApplied on a closed database: error = %v, want ErrDatabaseNotOpen", err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rec, ok, err := db.Applied(ctx, m); !ok || err != nil || string(rec) != `{"result":"replaced"}` {
		t.Errorf("Applied after reopen = %q, %v, %v; want the last record", rec, ok, err)
	}
}

// Concurrent markers share group commits and every one is stored.
func TestDocMarkersConcurrent(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "agentgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 64
	writesBefore := db.group.writes.Load()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = db.MarkApplied(ctx, testMarker(i), fmt.Appendf(nil, `{"i":%d}`, i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("MarkApplied %d: %v", i, err)
		}
	}
	if got := db.group.writes.Load() - writesBefore; got != n {
		t.Errorf("writes through the group commit = %d, want %d", got, n)
	}
	for i := range n {
		rec, ok, err := db.Applied(ctx, testMarker(i))
		if want := fmt.Sprintf(`{"i":%d}`, i); !ok || err != nil || string(rec) != want {
			t.Errorf("Applied %d = %q, %v, %v; want %q", i, rec, ok, err, want)
		}
	}
}

package docstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// memMarkers is a MarkerStore in memory; err, when set, fails every call.
type memMarkers struct {
	mu      sync.Mutex
	records map[string][]byte
	err     error
}

func newMemMarkers() *memMarkers { return &memMarkers{records: map[string][]byte{}} }

func (m *memMarkers) Applied(ctx context.Context, marker string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, false, m.err
	}
	rec, ok := m.records[marker]
	return slices.Clone(rec), ok, nil
}

func (m *memMarkers) MarkApplied(ctx context.Context, marker string, record []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.records[marker] = slices.Clone(record)
	return nil
}

func (m *memMarkers) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

func newMarkerStoreDirBackend(t *testing.T, dir string, m MarkerStore) *DirBackend {
	t.Helper()
	b, err := NewDirBackend(dir, WithMarkerStore(m))
	if err != nil {
		t.Fatalf("NewDirBackend(WithMarkerStore): %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// markerFiles returns the names in ".applied/" other than the folder of
// temporary files.
func markerFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, appliedDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != ".tmp" {
			names = append(names, e.Name())
		}
	}
	return names
}

func markerOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func TestDirBackendWithMarkerStore(t *testing.T) {
	testBackend(t, func(t *testing.T) Backend {
		return newMarkerStoreDirBackend(t, filepath.Join(t.TempDir(), "content"), newMemMarkers())
	})
}

// The suite again on the marker store the local server uses: the embedded
// database. (A test-only import: embedded does not import docstore; the
// application wires the two.)
func TestDirBackendWithEmbeddedMarkers(t *testing.T) {
	testBackend(t, func(t *testing.T) Backend {
		t.Helper()
		dir := t.TempDir()
		db, err := embedded.Open(filepath.Join(dir, "agentgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		b := newMarkerStoreDirBackend(t, filepath.Join(dir, "content"), db)
		t.Cleanup(func() {
			if names := markerFiles(t, b.Dir()); len(names) != 0 {
				t.Errorf("marker files = %v, want none with a marker store", names)
			}
		})
		return b
	})
}

func TestDirBackendMarkerStoreKeepsMarkers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "content")
	m := newMemMarkers()
	b := newMarkerStoreDirBackend(t, dir, m)
	cb := &countingBackend{Backend: b}
	write := toolByName(t, cb, ToolWriteDocument)
	const key, input = "run-1/s-1/call-1", `{"path":"new/folder/a.md","text":"one\n"}`
	wantResult(t, call(t, write, key, input), false, "created new/folder/a.md (4 bytes)")
	wantResult(t, call(t, write, key, input), false, "created new/folder/a.md (4 bytes)")
	if got := cb.puts.Load(); got != 1 {
		t.Errorf("puts = %d, want 1 (the repeat is answered by the marker)", got)
	}
	if got := m.len(); got != 1 {
		t.Errorf("records in the marker store = %d, want 1", got)
	}
	if rec, ok, err := m.Applied(context.Background(), markerOf(key)); !ok || err != nil {
		t.Errorf("store's Applied(marker of the key) = %q, %v, %v; want the record", rec, ok, err)
	}
	if names := markerFiles(t, dir); len(names) != 0 {
		t.Errorf("marker files = %v, want none with a marker store", names)
	}
	del := toolByName(t, cb, ToolDeleteDocument)
	wantResult(t, call(t, del, "run-1/s-1/call-2", `{"path":"new/folder/a.md"}`), false, "deleted new/folder/a.md (4 bytes)")
	wantResult(t, call(t, del, "run-1/s-1/call-2", `{"path":"new/folder/a.md"}`), false, "deleted new/folder/a.md (4 bytes)")
	if got := cb.deletes.Load(); got != 1 {
		t.Errorf("deletes = %d, want 1", got)
	}
	if names := markerFiles(t, dir); len(names) != 0 {
		t.Errorf("marker files = %v, want none with a marker store", names)
	}
}

func TestDirBackendMarkerStoreErrors(t *testing.T) {
	ctx := context.Background()
	eio := errors.New("disk on fire")
	m := newMemMarkers()
	m.err = eio
	b := newMarkerStoreDirBackend(t, filepath.Join(t.TempDir(), "content"), m)
	marker := markerOf("k")
	if _, _, err := b.Applied(ctx, marker); !errors.Is(err, eio) {
		t.Errorf("Applied error = %v, want the store's", err)
	}
	if err := b.MarkApplied(ctx, marker, []byte("{}")); !errors.Is(err, eio) {
		t.Errorf("MarkApplied error = %v, want the store's", err)
	}
	// A malformed marker never reaches the store.
	m.err = nil
	if err := b.MarkApplied(ctx, "../x", []byte("{}")); err == nil || m.len() != 0 {
		t.Errorf("MarkApplied(malformed) = %v with %d records stored; want an error and none", err, m.len())
	}
	if _, _, err := b.Applied(ctx, "ABC"); err == nil {
		t.Errorf("Applied(malformed) succeeded, want an error")
	}
}

// A folder used before the marker store was configured keeps its marker
// files; a call made again under its key after the upgrade is still
// answered from its file.
func TestDirBackendMarkerStoreUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "content")
	const key, input = "run-1/s-1/call-1", `{"path":"a.md","text":"one\n"}`
	old, err := NewDirBackend(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, call(t, toolByName(t, old, ToolWriteDocument), key, input), false, "created a.md (4 bytes)")
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if names := markerFiles(t, dir); len(names) != 1 {
		t.Fatalf("marker files before the upgrade = %v, want one", names)
	}

	m := newMemMarkers()
	b := newMarkerStoreDirBackend(t, dir, m)
	if !b.fileMarkers {
		t.Errorf("fileMarkers = false for a folder holding a marker file")
	}
	cb := &countingBackend{Backend: b}
	wantResult(t, call(t, toolByName(t, cb, ToolWriteDocument), key, input), false, "created a.md (4 bytes)")
	if cb.puts.Load() != 0 || cb.marks.Load() != 0 {
		t.Errorf("puts, marks = %d, %d; want 0, 0 (answered by the old marker file)", cb.puts.Load(), cb.marks.Load())
	}
	// A new call is marked in the store, not in a file.
	wantResult(t, call(t, toolByName(t, cb, ToolWriteDocument), "run-1/s-1/call-2", `{"path":"b.md","text":"two\n"}`), false, "created b.md (4 bytes)")
	if names := markerFiles(t, dir); len(names) != 1 {
		t.Errorf("marker files after the upgrade = %v, want only the old one", names)
	}
	if m.len() != 1 {
		t.Errorf("records in the marker store = %d, want 1", m.len())
	}
	// The store's record wins over a file for the same marker.
	ctx := context.Background()
	if err := b.MarkApplied(ctx, markerOf(key), []byte(`{"from":"store"}`)); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := b.Applied(ctx, markerOf(key)); !ok || err != nil || string(rec) != `{"from":"store"}` {
		t.Errorf("Applied = %q, %v, %v; want the store's record", rec, ok, err)
	}
}

// Without marker files at open, a miss in the store is final: no file is
// looked for (a file planted afterwards is not found).
func TestDirBackendMarkerStoreSkipsFilesWhenThereWereNone(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"new folder", func(*testing.T, string) {}},
		{"temporary files only", func(t *testing.T, dir string) {
			t.Helper()
			if err := os.MkdirAll(filepath.Join(dir, appliedDir, ".tmp"), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, appliedDir, ".tmp", "0123"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, appliedDir, "not-a-marker"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "content")
			tt.setup(t, dir)
			b := newMarkerStoreDirBackend(t, dir, newMemMarkers())
			if b.fileMarkers {
				t.Errorf("fileMarkers = true, want false")
			}
			marker := markerOf("k")
			if err := os.MkdirAll(filepath.Join(dir, appliedDir), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, appliedDir, marker), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
			if rec, ok, err := b.Applied(context.Background(), marker); ok || err != nil {
				t.Errorf("Applied = %q, %v, %v; want false, nil (no file fallback)", rec, ok, err)
			}
		})
	}
}

// BenchmarkDirBackendWrite measures what an applied write_document costs the
// backend: Put of a changed text, then MarkApplied of a new marker, with
// marker files and with the markers in the embedded database (whose Put
// also fsyncs the document's folder), from 1 and from 16 writers at once
// (each on its own document). Besides ns/op it reports cpu-ns/op, the
// process's user and system CPU per write.
func BenchmarkDirBackendWrite(b *testing.B) {
	for _, tt := range []struct {
		name string
		open func(b *testing.B, dir string) *DirBackend
	}{
		{"marker files", func(b *testing.B, dir string) *DirBackend {
			b.Helper()
			d, err := NewDirBackend(filepath.Join(dir, "content"))
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
		{"embedded markers", func(b *testing.B, dir string) *DirBackend {
			b.Helper()
			db, err := embedded.Open(filepath.Join(dir, "agentgate.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = db.Close() })
			d, err := NewDirBackend(filepath.Join(dir, "content"), WithMarkerStore(db))
			if err != nil {
				b.Fatal(err)
			}
			return d
		}},
	} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/writers=%d", tt.name, writers), func(b *testing.B) {
				d := tt.open(b, b.TempDir())
				defer d.Close()
				ctx := context.Background()
				var next, docs atomic.Int64
				cpu0 := processCPU(b)
				b.ResetTimer()
				var wg sync.WaitGroup
				for range writers {
					doc := fmt.Sprintf("pages/p%d.md", docs.Add(1))
					wg.Go(func() {
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							n := strconv.FormatInt(i, 10)
							if err := d.Put(ctx, doc, "# Pricing\n\n"+n+"\n"); err != nil {
								b.Error(err)
								return
							}
							if err := d.MarkApplied(ctx, markerOf(n), []byte(`{"tool":"write_document"}`)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

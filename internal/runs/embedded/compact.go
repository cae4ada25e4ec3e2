package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Deleting from bbolt frees the pages that held the data without
// overwriting them, and every write goes to newly allocated pages (copy
// on write), so zeroing a value before deleting it would only leave the
// zeros on a new page beside the old bytes. What a purged run held (its
// prompt in the stored request, events, state blobs) stays in the file
// until its pages are reused by later writes. Compact is what removes it:
// a new file holding only what the store holds now.

// compactTxBytes bounds each transaction of a compaction (keys and values
// copied), so a large file does not need its whole content in memory.
const compactTxBytes = 64 << 20

// CompactResult is what Compact did: the file's size before and after.
type CompactResult struct {
	Before, After int64
}

// Compact rewrites the database file at path with only the keys and
// values it holds now: freed pages, and whatever deleted data they still
// held, are not copied. The new file is written beside the old one
// (path + ".compact", mode 0600), synced, and renamed over it. It fails
// with ErrInUse while another process has the store open (a running
// serve); it holds the file's lock throughout, and for a while after the
// rename, so that a process that opened the old file just before the
// rename gives up rather than run on the replaced file.
func Compact(path string) (CompactResult, error) {
	return compact(path, 2*openTimeout)
}

func compact(path string, hold time.Duration) (CompactResult, error) {
	before, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return CompactResult{}, fmt.Errorf("compact %s: %w (it holds the file's lock; waited %s for it)", path, ErrInUse, openTimeout)
	case err != nil:
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if renamed {
			time.Sleep(hold)
		}
		_ = src.Close()
	}()
	tmp := path + ".compact"
	// A file of that name is a compaction that stopped before its rename.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: openTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	err = bolt.Compact(dst, src, compactTxBytes)
	if err == nil {
		err = dst.Sync()
	}
	err = errors.Join(err, dst.Close())
	if err != nil {
		_ = os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	after, err := os.Stat(tmp)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	renamed = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename is durable
		_ = d.Close()
	}
	return CompactResult{Before: before.Size(), After: after.Size()}, nil
}

package embedded

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestGroupCommit runs many concurrent writers through one groupCommit, some
// of which fail or panic: every succeeding write is on disk after a reopen,
// no failing one left a trace, and each caller got its own result.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bucket := []byte("b")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		t.Fatal(err)
	}
	g := &groupCommit{db: db}
	errBad := errors.New("refused")
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = g.update(func(tx *bolt.Tx) error {
				if err := tx.Bucket(bucket).Put(fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
					return err
				}
				switch i % 8 {
				case 3:
					return errBad
				case 5:
					panic("boom")
				}
				return nil
			})
		})
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for i := range n {
			got := tx.Bucket(bucket).Get(fmt.Appendf(nil, "k%02d", i)) != nil
			switch i % 8 {
			case 3:
				if !errors.Is(errs[i], errBad) || got {
					t.Errorf("write %d: err %v, stored %t; want its own error and nothing stored", i, errs[i], got)
				}
			case 5:
				if errs[i] == nil || got {
					t.Errorf("write %d (panics): err %v, stored %t; want an error and nothing stored", i, errs[i], got)
				}
			default:
				if errs[i] != nil || !got {
					t.Errorf("write %d: err %v, stored %t; want it committed", i, errs[i], got)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Command fsyncbench measures what bounds the embedded store's group
// commit on a machine's disk: the time of one bbolt-style commit (N random
// 4 KiB pages written, fdatasync, a meta write, fdatasync again) for N from
// 1 to 32, and the commits per second of 1, 2 and 4 files committing at
// once. Run it on the filesystem that holds the server's --dir:
//
//	go run ./tools/fsyncbench -dir .agentgate
//
// It writes a 64 MiB scratch file per lane under -dir and removes them.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
)

const (
	pageSize  = 4096
	filePages = 16384 // 64 MiB
)

func main() {
	dir := flag.String("dir", ".", "folder on the filesystem to measure")
	iters := flag.Int("iters", 400, "commits per measurement")
	flag.Parse()
	if err := run(*dir, *iters); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncbench:", err)
		os.Exit(1)
	}
}

func run(dir string, iters int) error {
	fmt.Printf("one file, one commit = N pages + fdatasync + meta + fdatasync (%d commits each)\n", iters)
	for _, n := range []int{1, 2, 4, 8, 13, 16, 32} {
		s, err := scratch(dir, 0)
		if err != nil {
			return err
		}
		start := time.Now()
		err = s.commits(iters, n)
		el := time.Since(start)
		if cerr := s.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Printf("  pages=%-3d %.3f ms per commit\n", n, el.Seconds()*1000/float64(iters))
	}
	fmt.Println("files committing at once, 4 pages per commit")
	for _, files := range []int{1, 2, 4} {
		el, err := parallel(dir, files, iters)
		if err != nil {
			return err
		}
		fmt.Printf("  files=%d   %.0f commits/s in all\n", files, float64(files*iters)/el.Seconds())
	}
	return nil
}

// parallel makes iters commits of 4 pages in each of files files at once.
func parallel(dir string, files, iters int) (time.Duration, error) {
	lanes := make([]*scratchFile, 0, files)
	errs := make([]error, files)
	defer func() {
		for _, s := range lanes {
			_ = s.close()
		}
	}()
	for i := range files {
		s, err := scratch(dir, i)
		if err != nil {
			return 0, err
		}
		lanes = append(lanes, s)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range lanes {
		wg.Go(func() { errs[i] = s.commits(iters, 4) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

type scratchFile struct {
	f   *os.File
	buf []byte
}

func scratch(dir string, lane int) (*scratchFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf(".fsyncbench-%d-%d", os.Getpid(), lane)), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	s := &scratchFile{f: f, buf: make([]byte, pageSize)}
	if err := f.Truncate(filePages * pageSize); err != nil {
		_ = s.close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// commits makes n commits of pages random pages each, as bbolt's Tx.Commit
// does: the data pages, fdatasync, the meta page, fdatasync.
func (s *scratchFile) commits(n, pages int) error {
	for range n {
		for range pages {
			// A changed page at a random offset (not secrets).
			binary.LittleEndian.PutUint64(s.buf, rand.Uint64()) //nolint:gosec
			off := int64(1+rand.IntN(filePages-1)) * pageSize   //nolint:gosec
			if _, err := s.f.WriteAt(s.buf, off); err != nil {
				return err
			}
		}
		if err := fdatasync(s.f); err != nil {
			return err
		}
		if _, err := s.f.WriteAt(s.buf[:64], 0); err != nil {
			return err
		}
		if err := fdatasync(s.f); err != nil {
			return err
		}
	}
	return nil
}

func (s *scratchFile) close() error {
	name := s.f.Name()
	return errors.Join(s.f.Close(), os.Remove(name))
}

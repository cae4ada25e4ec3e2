package embedded

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// groupCommit commits the writes of concurrent callers together: bbolt has
// one writer, and each transaction ends in its own fsyncs, so writers that
// arrive while a commit is in flight queue up and the next transaction
// applies all of them, one commit (and one set of fsyncs) for the lot.
//
// Durability is unchanged: update returns only after the transaction that
// holds the caller's function has been committed to disk. A function that
// fails rolls its transaction back; it then runs alone in its own
// transaction (so its error, or its success against the state without the
// others, is its own), and the rest are committed again without it. The
// functions must therefore only touch tx (bbolt's DB.Batch has the same
// rule); ours read and write the transaction only.
//
// bbolt's DB.Batch is built for this but waits up to MaxBatchDelay (10 ms)
// for a batch to fill, which would cost a lone writer 10 ms per write; here
// a commit starts as soon as the previous one ends, so one writer waits for
// nobody.
type groupCommit struct {
	db      *bolt.DB
	mu      sync.Mutex
	queue   []*pendingWrite
	running bool
	// commits and writes count the transactions committed and the writes
	// they held (writes per commit is the group commit's batch size).
	commits, writes atomic.Int64
}

// pendingWrite is one caller's function and where its result goes.
type pendingWrite struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// update runs fn in a read-write transaction shared with the writers that
// are queued at the same time, and returns fn's error or the commit's.
func (g *groupCommit) update(fn func(*bolt.Tx) error) error {
	w := &pendingWrite{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if !g.running {
		g.running = true
		go g.drain()
	}
	g.mu.Unlock()
	return <-w.done
}

// drain commits the queue, batch after batch, until it is empty.
func (g *groupCommit) drain() {
	for {
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit applies batch in one transaction; a failing function is split off
// and run alone, and the others are tried again without it.
func (g *groupCommit) commit(batch []*pendingWrite) {
	for len(batch) > 0 {
		g.commits.Add(1)
		g.writes.Add(int64(len(batch)))
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if err := safely(w.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, w := range batch {
				w.done <- err
			}
			if len(batch) > 1 {
				// The writers just woken wait in this goroutine's run
				// queue (a channel send readies its receiver on the
				// sender's P), behind the next commit's CPU work, until
				// another P steals them or a sync hands this P over; and
				// their next writes are what the next commit should hold.
				// Let them run first. A lone writer (one client) is not
				// held up: it waits for nobody and nobody waits for it.
				runtime.Gosched()
			}
			return
		}
		if len(batch) == 1 {
			batch[0].done <- err
			return
		}
		alone := batch[failed]
		g.commits.Add(1)
		g.writes.Add(1)
		alone.done <- g.db.Update(func(tx *bolt.Tx) error { return safely(alone.fn, tx) })
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// safely calls fn, turning a panic into an error: fn runs on the committing
// goroutine, where a panic would take the process down rather than the one
// request that caused it.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a write: %v", p)
		}
	}()
	return fn(tx)
}

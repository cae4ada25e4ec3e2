package embedded

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// blobQueue holds the state blobs put and deleted but not yet written, so
// that neither costs a commit of its own (a cycle of a run puts a blob at
// its suspension and deletes it at its end, each a commit the caller
// waited for):
//
//   - A blob put (PutState) is written in the transaction of its run's
//     next row write that commits: every row write of the run carries the
//     run's queued blobs, so the row that points at a blob (the runs.Store
//     writes it after the blob) commits with it. Row and blob are durable
//     together, which is stronger than before: no row ever points at a
//     blob a crash lost. A blob whose row write never comes (a refused
//     suspension) is never written, as if it had been deleted at once; it
//     is dropped from memory after abandonAfter.
//   - A blob deleted (DeleteStates) is deleted in the transaction of the
//     next row write of any run, or at Close. A crash before that leaves
//     it in the file, as a failed delete does; the run's purge deletes
//     every blob of the run (DeleteRunStates).
//
// Reads see the queue: LoadState finds a blob put and not yet written,
// and no longer finds one deleted.
type blobQueue struct {
	mu      sync.Mutex
	seq     uint64
	puts    map[string]queuedBlob // blob key -> blob
	deletes map[string]uint64     // blob key -> seq of the delete
}

type queuedBlob struct {
	runID string
	blob  []byte
	at    time.Time
	seq   uint64
}

// abandonAfter is how long a blob put waits for its row write before it is
// taken for abandoned (its write was refused and not retried).
const abandonAfter = 10 * time.Minute

func (q *blobQueue) put(runID, key string, blob []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	if q.puts == nil {
		q.puts = map[string]queuedBlob{}
	}
	for k, b := range q.puts {
		if now.Sub(b.at) > abandonAfter {
			delete(q.puts, k)
		}
	}
	delete(q.deletes, key)
	q.seq++
	q.puts[key] = queuedBlob{runID: runID, blob: blob, at: now, seq: q.seq}
}

// get returns a blob put and not yet written; gone reports a blob deleted
// and not yet written.
func (q *blobQueue) get(key string) (blob []byte, queued, gone bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if b, ok := q.puts[key]; ok {
		return b.blob, true, false
	}
	_, gone = q.deletes[key]
	return nil, false, gone
}

func (q *blobQueue) delete(keys ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deletes == nil {
		q.deletes = map[string]uint64{}
	}
	for _, k := range keys {
		if _, ok := q.puts[k]; ok {
			delete(q.puts, k) // never written
			continue
		}
		q.seq++
		q.deletes[k] = q.seq
	}
}

// dropRun forgets the queued blobs of a run whose blobs are being deleted
// all at once (DeleteRunStates).
func (q *blobQueue) dropRun(prefix string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := range q.puts {
		if strings.HasPrefix(k, prefix) {
			delete(q.puts, k)
		}
	}
	for k := range q.deletes {
		if strings.HasPrefix(k, prefix) {
			delete(q.deletes, k)
		}
	}
}

// pending is the work a row write of a run applies: the blobs of that run
// and every delete, as queued when the write began.
type pending struct {
	puts    map[string]queuedBlob
	deletes map[string]uint64
}

// take copies the queued blobs of runID and every delete for a row write
// to apply. They stay queued until done: a row write that fails leaves
// them, and two writes of one run at once both carry the blobs (so the one
// that commits holds the blob its row may point at).
func (q *blobQueue) take(runID string) pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	var p pending
	for k, b := range q.puts {
		if b.runID == runID {
			if p.puts == nil {
				p.puts = map[string]queuedBlob{}
			}
			p.puts[k] = b
		}
	}
	if len(q.deletes) > 0 {
		p.deletes = maps.Clone(q.deletes)
	}
	return p
}

// done removes from the queue what a committed write applied, unless it
// was queued again since.
func (q *blobQueue) done(p pending) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, b := range p.puts {
		if cur, ok := q.puts[k]; ok && cur.seq == b.seq {
			delete(q.puts, k)
		}
	}
	for k, seq := range p.deletes {
		if q.deletes[k] == seq {
			delete(q.deletes, k)
		}
	}
}

// apply writes p in tx.
func (p pending) apply(tx *bolt.Tx) error {
	b := tx.Bucket(bucketBlobs)
	for k, q := range p.puts {
		if err := b.Put([]byte(k), q.blob); err != nil {
			return err
		}
	}
	for k := range p.deletes {
		if err := b.Delete([]byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// empty reports whether p holds nothing.
func (p pending) empty() bool { return len(p.puts) == 0 && len(p.deletes) == 0 }

// visible returns the keys under prefix a reader sees: those in the file
// and those put, less those deleted, not yet written.
func (q *blobQueue) visible(prefix string, inFile []string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, k := range inFile {
		if _, gone := q.deletes[k]; !gone {
			out = append(out, k)
		}
	}
	for k := range q.puts {
		if strings.HasPrefix(k, prefix) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

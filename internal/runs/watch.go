package runs

import (
	"context"
	"sync"
	"time"
)

// MaxWait bounds how long GET /runs/{id} waits (GetAfter): API Gateway ends
// a request after 29 s, so a waiting request answers well before that.
const MaxWait = 20 * time.Second

// WaitPoll is how often GetAfter reads the row again while it waits (the
// default of Options.WaitPoll). Writes
// made through the same Store (the local server: its API, workers and
// sweep) wake it at once; the re-read finds the writes of other processes
// (the deployed functions, another server on the same table).
const WaitPoll = time.Second

// rowWatch wakes the readers waiting for a run's row to be written through
// this Store. One channel per watched run is shared by its waiters and
// closed by the next write; a run nobody watches costs a write one map
// lookup.
type rowWatch struct {
	mu sync.Mutex
	m  map[string]*watchEntry
}

type watchEntry struct {
	ch chan struct{}
	n  int // waiters holding ch
}

// watch returns a channel closed after the next write of run id through
// the Store, and a func that releases it (the caller stops watching).
func (w *rowWatch) watch(id string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[string]*watchEntry)
	}
	e := w.m[id]
	if e == nil {
		e = &watchEntry{ch: make(chan struct{})}
		w.m[id] = e
	}
	e.n++
	var once sync.Once
	return e.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			e.n--
			if e.n == 0 && w.m[id] == e {
				delete(w.m, id)
			}
		})
	}
}

// changed wakes the waiters of run id. It is called after every write of
// the row, whatever its outcome (a failed conditional write wakes them for
// nothing; they read the row again and wait on).
func (w *rowWatch) changed(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[id]; e != nil {
		close(e.ch)
		delete(w.m, id)
	}
}

// Watch returns a channel that is closed after the next write of run id's
// row through this Store (whatever its outcome), and a func that releases
// the watch; call it when done waiting.
func (s *Store) Watch(id string) (<-chan struct{}, func()) { return s.watch.watch(id) }

// Waiters returns how many watches of run id are held now: the GetAfter
// calls waiting on it and any other holder of Watch.
func (s *Store) Waiters(id string) int {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	if e := s.watch.m[id]; e != nil {
		return e.n
	}
	return 0
}

// StopWaits ends every GetAfter wait, now and later, with the run as last
// read: a server that is shutting down answers its waiting requests
// instead of holding its shutdown until they end.
func (s *Store) StopWaits() { s.stopOnce.Do(func() { close(s.stopWaits) }) }

// GetAfter returns run id once its version is above after, or once it is
// terminal, waiting at most wait for that (the API caps it at MaxWait); when the
// wait ends first it returns the run as last read. A wait of zero or less
// is Get. ctx ending ends the wait too, and so does StopWaits: it then
// returns the run as last read (the caller has gone, its deadline is near,
// or the server is stopping), or ctx's error when it ended before the
// first read.
//
// The caller checks first that the run may be read (Get); GetAfter reads
// the row again each time it is written through this Store and every
// Options.WaitPoll.
func (s *Store) GetAfter(ctx context.Context, id string, after int64, wait time.Duration) (*Run, error) {
	if wait <= 0 {
		return s.Get(ctx, id)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var last *Run
	for {
		// Watch before reading: a write that lands between the read and
		// the wait still closes the channel.
		changed, release := s.Watch(id)
		r, err := s.Get(ctx, id)
		if err != nil && last != nil && ctx.Err() != nil {
			release()
			return last, nil // the caller left during a re-read
		}
		if err != nil || r.Version > after || r.Status.Terminal() {
			release()
			return r, err
		}
		last = r
		poll := time.NewTimer(s.opts.WaitPoll)
		ended := false // the wait is over: its time, the caller or the server
		select {
		case <-changed:
		case <-poll.C:
		case <-timer.C:
			ended = true
		case <-ctx.Done():
			ended = true
		case <-s.stopWaits:
			ended = true
		}
		poll.Stop()
		release()
		if ended || ctx.Err() != nil {
			return r, nil // (woken as the caller left: a re-read would fail)
		}
	}
}

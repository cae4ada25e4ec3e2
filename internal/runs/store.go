package runs

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Options.
const (
	DefaultLeaseTTL      = 2 * time.Minute
	DefaultDispatchGrace = 2 * time.Minute
	DefaultRetention     = 720 * time.Hour
)

// maxRetries bounds how often a caller-intent transition (Decide, Cancel,
// Expire, RecordNotification) re-reads and retries when only the version
// moved under it.
const maxRetries = 4

// maxVoteRetries bounds the retries of a vote: at most one vote per
// possible voter can land while the suspension waits, plus the
// notifications recorded meanwhile.
const maxVoteRetries = 2*MaxApprovers + maxRetries

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Now is the clock; time.Now when nil. Store truncates it to
	// milliseconds, the resolution every adapter keeps.
	Now func() time.Time
	// LeaseTTL is how long a claim or a renewal holds a run.
	LeaseTTL time.Duration
	// DispatchGrace is how long a QUEUED or RESUMING run may wait for its
	// worker before the due index hands it to purge for re-dispatch.
	DispatchGrace time.Duration
	// Retention is how long a terminal run is kept before purge deletes it.
	Retention time.Duration
	// Outbound, when set, schedules the outbox entries (webhook
	// deliveries) of a subscribed run's transitions in the same write.
	Outbound OutboundFunc
	// Logger receives failures of best-effort cleanups; slog.Default when nil.
	Logger *slog.Logger
	// WaitPoll is how often GetAfter reads a run again while it waits
	// (default WaitPoll; tests make it long to see the wake-ups alone).
	WaitPoll time.Duration
}

// Store applies the run life cycle on a RowStore and a StateStore. Every
// transition takes the run as the caller last read it and is written only if
// the stored row still has that status and version; the returned run is the
// new row. Methods are safe for concurrent use.
type Store struct {
	rows   RowStore
	states StateStore
	opts   Options
	// watch wakes GetAfter's waiters when a row is written (watch.go);
	// stopWaits, closed by StopWaits, ends every wait.
	watch     rowWatch
	stopWaits chan struct{}
	stopOnce  sync.Once
	// scheduled is NotifyScheduled's function (outbox.go).
	scheduled atomic.Pointer[func(runID string)]
}

// NewStore returns a Store over the given adapters.
func NewStore(rows RowStore, states StateStore, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.DispatchGrace <= 0 {
		opts.DispatchGrace = DefaultDispatchGrace
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WaitPoll <= 0 {
		opts.WaitPoll = WaitPoll
	}
	return &Store{rows: legacyRows{rows}, states: states, opts: opts, stopWaits: make(chan struct{})}
}

func (s *Store) now() time.Time { return ms(s.opts.Now()) }

// InstantLayout is how messages print an instant, such as the deadline of
// a window that closed: RFC 3339 in UTC with the milliseconds every adapter
// keeps (ms), so the deadline printed is the one applied, never a moment
// earlier than decisions that were accepted.
const InstantLayout = "2006-01-02T15:04:05.000Z07:00"

// ms normalizes t to UTC milliseconds, the resolution every adapter keeps.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// DispatchGrace is how long a QUEUED or RESUMING run waits for its worker
// before it is due for re-dispatch.
func (s *Store) DispatchGrace() time.Duration { return s.opts.DispatchGrace }

// LeaseTTL is how long a claim or a renewal holds a run.
func (s *Store) LeaseTTL() time.Duration { return s.opts.LeaseTTL }

// Retention is how long a settled run is kept before the sweep purges it.
func (s *Store) Retention() time.Duration { return s.opts.Retention }

package loop

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// ToolSource is a set of tools that may change while the process runs:
// the MCP servers of a tool-sources file, of which one may be down when
// the process starts and come back later, and which may offer more tools
// later. A toolbox made by NewToolboxWithSource follows it.
type ToolSource interface {
	// Tools returns the source's tools as they are now.
	Tools() []Tool
	// NoteAbsent notes on tb (NoteAbsent) why the source's tools that are
	// missing now are missing.
	NoteAbsent(tb *Toolbox)
	// Revision changes whenever Tools or NoteAbsent would answer otherwise.
	Revision() uint64
	// Seek looks again, now, for tools a run needs that the toolbox lacks:
	// names are such tools (names of other sources' tools are ignored),
	// and absent asks for every tool of the source that is absent. It
	// returns once the source looked (and then Revision tells whether it
	// found anything) or decided not to (it asks its servers at most so
	// often), or when ctx ends; it bounds how long it looks.
	Seek(ctx context.Context, names []string, absent bool)
}

// liveTools are the tools of a toolbox with a source: the fixed ones and
// the source's, as of the source's revision of the current snapshot.
type liveTools struct {
	src   ToolSource
	fixed []Tool
	cur   atomic.Pointer[snapshot]
	// mu serializes making snapshots and noting absences.
	mu    sync.Mutex
	notes []absentTools
}

// snapshot is a toolbox of the source's tools at one revision.
type snapshot struct {
	rev uint64
	tb  *Toolbox
	// stale: made again at the next look, whatever the revision.
	stale bool
}

// NewToolboxWithSource builds a toolbox of the given tools and those of
// src, under the rules of NewToolbox, that follows src: when the source's
// tools change (Revision), the toolbox is made again from the fixed tools
// and the source's current ones. A change whose tools do not fit (two of
// the same name, a schema that does not compile) is not taken: the
// toolbox keeps the tools it had (a source should offer only tools that
// fit: NewToolbox(tool) accepts each).
func NewToolboxWithSource(src ToolSource, tools ...Tool) (*Toolbox, error) {
	l := &liveTools{src: src, fixed: slices.Clone(tools)}
	rev := src.Revision()
	tb, err := l.build()
	if err != nil {
		return nil, err
	}
	l.cur.Store(&snapshot{rev: rev, tb: tb})
	return &Toolbox{live: l}, nil
}

// build makes a snapshot toolbox of the fixed tools and the source's.
// The caller holds l.mu (or has not shared l yet).
func (l *liveTools) build() (*Toolbox, error) {
	tb, err := NewToolbox(append(slices.Clone(l.fixed), l.src.Tools()...)...)
	if err != nil {
		return nil, err
	}
	l.src.NoteAbsent(tb)
	tb.absent = append(tb.absent, l.notes...)
	tb.from, tb.base = l, tb
	return tb, nil
}

// current returns the snapshot of the source's revision now, making it
// when the source changed since the last one.
func (l *liveTools) current() *Toolbox {
	if s := l.cur.Load(); !s.stale && s.rev == l.src.Revision() {
		return s.tb
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The revision is read before the tools: a change that comes while
	// they are read makes the next look build again.
	rev := l.src.Revision()
	s := l.cur.Load()
	if !s.stale && s.rev == rev {
		return s.tb
	}
	tb, err := l.build()
	if err != nil {
		// Keep the tools the toolbox had, until the source changes again.
		tb = s.tb
	}
	l.cur.Store(&snapshot{rev: rev, tb: tb})
	return tb
}

// note adds a noted absence to every later snapshot.
func (l *liveTools) note(a absentTools) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, a)
	s := l.cur.Load()
	l.cur.Store(&snapshot{rev: s.rev, tb: s.tb, stale: true})
}

// view returns the toolbox whose fields hold tb's tools: tb itself, or,
// for a toolbox with a source, its current snapshot.
func (tb *Toolbox) view() *Toolbox {
	if tb.live != nil {
		return tb.live.current()
	}
	return tb
}

// Revive returns the toolbox a run is to use, after asking the source of
// tb's tools (NewToolboxWithSource; tb itself, a snapshot of it, or one
// made from it by With) to look again for the tools the run needs that
// tb lacks: the named ones (the tools a run may call, or the tools of the
// calls it is about to run; names tb has are left out), and with absent
// also every tool the source has noted absent (a run that may call every
// tool). The source asks its servers at most so often and bounds how long
// it waits (ToolSource.Seek), so a run that needs nothing missing waits
// for nothing.
//
// The result is fixed: a snapshot of the source's tools as they are after
// the look, with the tools With added to tb; tb itself when that is what
// it holds already, or when it has no source. A run keeps it, so the tools
// it sees do not change while it runs (runs that start later see what the
// source found).
func (tb *Toolbox) Revive(ctx context.Context, names []string, absent bool) *Toolbox {
	if tb == nil {
		return nil
	}
	l := tb.live
	if l == nil {
		l = tb.from
	}
	if l == nil {
		return tb
	}
	view := tb.view()
	var missing []string
	for _, n := range names {
		if _, ok := view.tools[n]; !ok && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if absent && len(view.absent) == 0 {
		absent = false
	}
	if len(missing) > 0 || absent {
		l.src.Seek(ctx, missing, absent)
	}
	now := l.current()
	if tb.live != nil {
		return now
	}
	if now == tb.base {
		return tb
	}
	if len(tb.own) == 0 {
		return now
	}
	out, err := now.With(tb.own...)
	if err != nil {
		// The run's own tools no longer fit beside the source's (a client
		// tool's name the source now offers): the run keeps its toolbox.
		return tb
	}
	return out
}

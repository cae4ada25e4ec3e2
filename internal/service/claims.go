package service

import "sync"

// runClaims are the runs that a pass of one Sweeper (a Sweep, or a
// DeliverRun) has taken up in this process: a run is had by one pass at a
// time, so two passes never attempt its deliveries at the same time (they
// would not see each other's records: an entry would be sent twice, and a
// later one could overtake an older one), nor write its row at once. A
// pass that finds a run had by another leaves it: a Sweep to its next
// tick, a DeliverRun to the pass that has it, which gives the run to
// Sweeper.QueueDeliveries when it lets it go.
//
// A Sweep reads its runs a page at a time and takes each up afterwards;
// a DeliverRun that had one of them in between may have recorded
// attempts the page does not show. So passes that let a run go while a
// sweep is under way are numbered, and a sweep reads again a run let go
// since it began (endedSince) rather than send from its page.
type runClaims struct {
	mu sync.Mutex
	// held maps each run taken up to whether it is to be given to
	// QueueDeliveries when let go.
	held map[string]bool
	// ended numbers the passes that let a run go while a sweep was under
	// way; endedAt is the number of the last such pass on each run. Both
	// are kept while sweeps are under way, and endedAt is dropped once
	// none is.
	ended   uint64
	endedAt map[string]uint64
	sweeps  int
}

// take takes run id up for a pass, and reports false when another pass
// has it (asked: DeliverRun was called for it, and the pass that has it
// is to give it to QueueDeliveries when it lets it go).
func (c *runClaims) take(id string, asked bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]bool{}
	}
	if again, had := c.held[id]; had {
		c.held[id] = again || asked
		return false
	}
	c.held[id] = false
	return true
}

// ask notes that run id, which the caller has, is to be given to
// QueueDeliveries when it is let go.
func (c *runClaims) ask(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, had := c.held[id]; had {
		c.held[id] = true
	}
}

// release lets run id go, and reports whether it is to be given to
// QueueDeliveries (ask, or DeliverRun was called for it meanwhile).
func (c *runClaims) release(id string) (asked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	asked = c.held[id]
	delete(c.held, id)
	if c.sweeps > 0 {
		c.ended++
		if c.endedAt == nil {
			c.endedAt = map[string]uint64{}
		}
		c.endedAt[id] = c.ended
	}
	return asked
}

// sweepBegins notes a sweep under way; what it returns is the mark that
// endedSince compares with.
func (c *runClaims) sweepBegins() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweeps++
	return c.ended
}

// sweepEnds notes the end of a sweep begun with sweepBegins.
func (c *runClaims) sweepEnds() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweeps--
	if c.sweeps == 0 {
		c.endedAt = nil
	}
}

// endedSince reports whether a pass let run id go after the sweep that
// got mark from sweepBegins began.
func (c *runClaims) endedSince(id string, mark uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endedAt[id] > mark
}

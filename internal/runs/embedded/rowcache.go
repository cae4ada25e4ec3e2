package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentgate/agentgate/internal/runs"
)

// rowCacheSize bounds how many decoded rows rowCache keeps, and
// rowCacheBytes the stored size of the rows it keeps (a row's decoded copy
// is about as large again): a run's start request can make its row a few
// hundred KB.
const (
	rowCacheSize  = 1024
	rowCacheBytes = 8 << 20
)

// rowCache keeps recently read rows decoded, each beside the exact bytes it
// was decoded from. A client waiting on a run polls GET /runs/{id}, which
// reads the same row many times between two writes, and decoding its JSON
// was the largest cost of that read (and of a write's condition check on
// the committing goroutine, which every writer waits on).
//
// An entry is used only when the stored bytes are equal to its own, so it
// is never stale whatever was written since, and nothing has to invalidate
// it; a reader gets a deep copy (runs.Run.Clone), never the entry itself.
// Entries are never changed after they are put, so copying one needs no
// lock.
type rowCache struct {
	mu   sync.Mutex
	rows map[string]cachedRow
	// bytes is the sum of the kept rows' stored sizes.
	bytes int
}

// cachedRow is a row's stored bytes and the run they decode to.
type cachedRow struct {
	raw []byte
	run *runs.Run
}

// lookup returns the entry for id if it was decoded from exactly raw.
func (c *rowCache) lookup(id string, raw []byte) (*runs.Run, bool) {
	c.mu.Lock()
	e, ok := c.rows[id]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return nil, false
	}
	return e.run, true
}

// decode returns a copy of the run stored as raw under id, from the cache
// when raw is what it holds for id, else decoded (and then kept). raw may
// be memory of a bbolt transaction: it is copied before it is kept.
func (c *rowCache) decode(id string, raw []byte) (*runs.Run, error) {
	if r, ok := c.lookup(id, raw); ok {
		return r.Clone(), nil
	}
	var r runs.Run
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", id, err)
	}
	if len(raw) > rowCacheBytes/16 {
		return &r, nil // too large to keep
	}
	e := cachedRow{raw: bytes.Clone(raw), run: r.Clone()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = make(map[string]cachedRow)
	}
	if old, ok := c.rows[id]; ok {
		delete(c.rows, id)
		c.bytes -= len(old.raw)
	}
	for k, old := range c.rows { // evict whichever entries the map yields first
		if len(c.rows) < rowCacheSize && c.bytes+len(e.raw) <= rowCacheBytes {
			break
		}
		delete(c.rows, k)
		c.bytes -= len(old.raw)
	}
	c.rows[id] = e
	c.bytes += len(e.raw)
	return &r, nil
}

// header returns what a write needs of the row stored as raw under id:
// from the cache when it holds exactly raw, else by decoding only those
// fields.
func (c *rowCache) header(id string, raw []byte) (*rowHeader, error) {
	if r, ok := c.lookup(id, raw); ok {
		return &rowHeader{Status: r.Status, Version: r.Version, DueAt: r.DueAt, WriteID: r.WriteID}, nil
	}
	var h rowHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", id, err)
	}
	return &h, nil
}

package dynamo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentgate/agentgate/internal/runs"
)

// rowItem is the stored form of a run row: as attributes, only what
// DynamoDB itself reads (the keys, the due index's key, the TTL) and what
// the write conditions compare (status, version); the whole row in Row,
// deflated JSON. Attribute names and JSON compress well together, so a
// row costs about half the write units it did as one attribute per field
// (runItem, which rows written before still are: both read alike).
type rowItem struct {
	key
	DuePK     string `dynamodbav:"due_pk,omitempty"`
	DueAt     int64  `dynamodbav:"due_at,omitempty"`
	ExpiresAt int64  `dynamodbav:"expires_at,omitempty"`
	Status    string `dynamodbav:"status"`
	Version   int64  `dynamodbav:"version"`
	// WriteID is Run.WriteID, for the condition of a write that expects
	// it (runs.Write.ExpectWriteID); rows written the old way (runItem)
	// keep it under the same name.
	WriteID string `dynamodbav:"write_id,omitempty"`
	// TokenHashes are Run.TokenHashes of rows written before, kept as an
	// attribute because DeleteRun reads it from every item of the run's
	// partition.
	TokenHashes []string `dynamodbav:"token_hashes,omitempty"`
	Row         []byte   `dynamodbav:"row"`
	// Apart names the parts of the row stored in their own items (partItem)
	// instead of in Row, each with the SHA-256 (hex) of its JSON.
	Apart map[string]string `dynamodbav:"apart,omitempty"` // apartAttr
}

// apartAttr is the attribute name of rowItem.Apart.
const apartAttr = "apart"

// partApartSize is the JSON size over which a part of a row that rarely
// changes (the start request, the held calls' summary) is stored in its
// own item: written when it changes, not with every write of the row.
const partApartSize = 1 << 10

// The parts of a row that may be stored apart.
const (
	partRequest = "request"
	partCalls   = "pending_calls"
)

// partSK is the sort key of a row part's item: after the row's own, so one
// Query (begins_with RUN) reads the row and its parts.
func partSK(name string) string { return runSK + "#" + name }

// partItem is a part of a run row stored apart: its JSON, deflated.
type partItem struct {
	key
	SHA256 string `dynamodbav:"sha256"`
	Data   []byte `dynamodbav:"data"`
}

// rowParts returns the JSON of r's parts that go apart (over
// partApartSize), by name.
func rowParts(r *runs.Run) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(r.Request) > partApartSize {
		out[partRequest] = r.Request
	}
	if len(r.PendingCalls) > 0 {
		b, err := json.Marshal(r.PendingCalls)
		if err != nil {
			return nil, fmt.Errorf("encode pending calls of run %s: %w", r.ID, err)
		}
		if len(b) > partApartSize {
			out[partCalls] = b
		}
	}
	return out, nil
}

// encodeRow returns the stored form of r: the row item and the items of
// the parts it keeps apart (rowItem.Apart says which, with their hashes).
func encodeRow(r *runs.Run, shards int) (rowItem, []partItem, error) {
	parts, err := rowParts(r)
	if err != nil {
		return rowItem{}, nil, err
	}
	inRow := r
	var items []partItem
	apart := map[string]string{}
	if len(parts) > 0 {
		c := *r
		inRow = &c
		for _, name := range []string{partRequest, partCalls} {
			js, ok := parts[name]
			if !ok {
				continue
			}
			data, err := deflateJSON(json.RawMessage(js))
			if err != nil {
				return rowItem{}, nil, err
			}
			sum := sha256.Sum256(js)
			sha := hex.EncodeToString(sum[:])
			apart[name] = sha
			items = append(items, partItem{key: key{PK: runPK(r.ID), SK: partSK(name)}, SHA256: sha, Data: data})
			switch name {
			case partRequest:
				c.Request = nil
			case partCalls:
				c.PendingCalls = nil
			}
		}
	}
	it, err := newRowItem(inRow, shards)
	if err != nil {
		return rowItem{}, nil, err
	}
	if len(apart) > 0 {
		it.Apart = apart
	}
	return it, items, nil
}

// errTornRow marks a row read beside a part item of another version of
// the row: a read that overlapped the transaction writing them (a Query
// reads each item as committed, not the items of one transaction
// together), or two reads with a write between them. Reading again gives
// the row and its parts as one write left them.
var errTornRow = errors.New("the row and its parts were read at different versions")

// tornReadAttempts is how many times GetRun reads a row whose parts it
// found of another version before it gives up.
const tornReadAttempts = 3

// joinParts puts the parts the row keeps apart (found among items, keyed
// by sort key) back into r, verified against their hashes; a part missing
// or of another version is errTornRow.
func joinParts(r *runs.Run, apart map[string]string, items map[string]partItem) error {
	for name, sha := range apart {
		it, ok := items[partSK(name)]
		if !ok || it.SHA256 != sha {
			return fmt.Errorf("run %s: its %s item is missing or not the one the row names: %w", r.ID, name, errTornRow)
		}
		var js json.RawMessage
		if err := inflateJSON(it.Data, &js); err != nil {
			return fmt.Errorf("decode %s of run %s: %w", name, r.ID, err)
		}
		switch name {
		case partRequest:
			r.Request = js
		case partCalls:
			if err := json.Unmarshal(js, &r.PendingCalls); err != nil {
				return fmt.Errorf("decode pending calls of run %s: %w", r.ID, err)
			}
		default:
			return fmt.Errorf("run %s: unknown part %s", r.ID, name)
		}
	}
	return nil
}

// rowFormat is the first byte of rowItem.Row: raw deflate (RFC 1951) of
// the row's JSON with rowDict as the preset dictionary. A new format gets
// a new number; the ones written stay readable.
const rowFormat = 1

// rowDict primes the deflate of a row with the names and values most rows
// hold, so even a small row compresses. It must never change: rows
// written with it are read with it (a new dictionary is a new rowFormat).
const rowDict = `{"id":"","status":"QUEUED","version":1,"created_at":"2026-12-03T17:00:00.000Z","updated_at":"2026-12-03T17:00:00.000Z",` +
	`"counters":{"iterations":0,"model_calls":0,"input_tokens":0,"output_tokens":0,"tool_calls":0},"initiator":"","approvers":[""],` +
	`"four_eyes":true,"purpose":"","metadata":{},"request":{"prompt":"","model":"","messages":[{"role":"user","content":[{"type":"text","text":""}]}],` +
	`"allowed_tools":[""],"approvers":[""],"approval_ttl":"","max_iterations":0},"suspension_id":"","turn_digest":"",` +
	`"pending_calls":[{"id":"","tool":"","input":{"path":"","text":""},"input_size":0,"input_truncated":true,"needs_approval":true,"effect":"write",` +
	`"preview":"--- a/\n+++ b/\n@@ -1,3 +1,3 @@\n","preview_size":0,"preview_truncated":true,"rule":"default","approval":{"required_approvals":1},` +
	`"denied":"","approved_by":""}],"suspended_at":"2026-12-03T17:00:00.000Z","inbox_keys":[""],` +
	`"state":{"key":"runs//state/.json.gz","sha256":"","size":0},"checkpoint":{"key":"runs//state/.json.gz","sha256":"","size":0},` +
	`"lease_owner":"","lease_until":"2026-12-03T17:00:00.000Z","pending_effect":"","pending_idempotent":true,"wrote_since_claim":true,"reclaims":1,` +
	`"approval_deadline":"2026-12-03T17:00:00.000Z","remind_at":"2026-12-03T17:00:00.000Z","reminder_sent":true,"notification":"pending","sent","failed",` +
	`"votes_needed":1,"votes":[{"by":"","person":"","action":"approve","via":"api","at":""}],` +
	`"decision":{"turn_digest":"","action":"approve","deny","calls":[{"id":"","action":"approve","edit","message":"","input":{}}]},` +
	`"decided_by":"","decided_via":"link","api","decided_at":"2026-12-03T17:00:00.000Z",` +
	`"output":{"text":"","reason":"completed","detail":""},"retain_until":"2026-12-03T17:00:00.000Z","due_at":"2026-12-03T17:00:00.000Z",` +
	`"write_id":"","last_seq":0,"webhook":{"url":"https://","events":[""]},"outbox":[],"tool_executors":[""],"hand_over":{},` +
	`"status":"RUNNING","status":"WAITING_FOR_APPROVAL","status":"RESUMING","status":"COMPLETED","reason":"completed"`

// newRowItem returns the stored form of r.
func newRowItem(r *runs.Run, shards int) (rowItem, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return rowItem{}, fmt.Errorf("encode run %s: %w", r.ID, err)
	}
	var buf bytes.Buffer
	buf.WriteByte(rowFormat)
	if err := deflateTo(rowWriters, rowDict, &buf, func(w io.Writer) error { _, err := w.Write(js); return err }); err != nil {
		return rowItem{}, err
	}
	it := rowItem{
		key:         key{PK: runPK(r.ID), SK: runSK},
		Status:      string(r.Status),
		Version:     r.Version,
		WriteID:     r.WriteID,
		TokenHashes: r.TokenHashes,
		Row:         buf.Bytes(),
	}
	if !r.DueAt.IsZero() {
		it.DuePK = duePK(shardOf(r.ID, shards))
		it.DueAt = toMS(r.DueAt)
	}
	if r.Status.Terminal() && !r.RetainUntil.IsZero() {
		it.ExpiresAt = r.RetainUntil.Add(ttlGrace).Unix()
	}
	return it, nil
}

// decodeRun returns the run row stored as m, in either form (rowItem, or
// runItem as rows were written before), with the parts it keeps apart
// from parts (partItems by sort key), and what it keeps apart.
func decodeRun(m map[string]types.AttributeValue, parts map[string]partItem) (*runs.Run, map[string]string, error) {
	r, it, err := decodeRowItem(m)
	if err != nil {
		return nil, nil, err
	}
	if err := joinParts(r, it.Apart, parts); err != nil {
		return nil, nil, err
	}
	return r, it.Apart, nil
}

// decodeRowItem returns the run row stored as m without the parts it keeps
// apart, and the item (zero for a row written before).
func decodeRowItem(m map[string]types.AttributeValue) (*runs.Run, rowItem, error) {
	if _, ok := m["row"]; !ok {
		var old runItem
		if err := attributevalue.UnmarshalMap(m, &old); err != nil {
			return nil, rowItem{}, fmt.Errorf("decode run: %w", err)
		}
		r, err := old.run()
		return r, rowItem{}, err
	}
	var it rowItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return nil, rowItem{}, fmt.Errorf("decode run: %w", err)
	}
	if len(it.Row) == 0 || it.Row[0] != rowFormat {
		return nil, rowItem{}, fmt.Errorf("decode run %s: unknown row format", it.PK)
	}
	var js []byte
	err := inflateFrom(rowReaders, rowDict, it.Row[1:], func(r io.Reader) (err error) {
		js, err = io.ReadAll(io.LimitReader(r, 16*MaxItemSize))
		return err
	})
	if err != nil {
		return nil, rowItem{}, fmt.Errorf("decode run %s: %w", it.PK, err)
	}
	r := new(runs.Run)
	if err := json.Unmarshal(js, r); err != nil {
		return nil, rowItem{}, fmt.Errorf("decode run %s: %w", it.PK, err)
	}
	return r, it, nil
}

// rowCacheMax bounds the rows a Table remembers (rowCache).
const rowCacheMax = 1024

// rowCache remembers, for the runs a Table read or wrote last, the version
// and the parts that version keeps apart (with their hashes). A Write
// conditional on that version can then leave out a part item whose content
// did not change: the condition on the version guarantees the stored row
// is the one remembered, and a part item changes only with a row that
// names its new hash. A run it does not know gets its parts written again:
// never wrong, only dearer.
type rowCache struct {
	mu sync.Mutex
	m  map[string]cachedRow
}

type cachedRow struct {
	version int64
	apart   map[string]string
}

func (c *rowCache) put(id string, version int64, apart map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(id, version, apart)
}

func (c *rowCache) putLocked(id string, version int64, apart map[string]string) {
	if c.m == nil || len(c.m) >= rowCacheMax {
		c.m = map[string]cachedRow{}
	}
	c.m[id] = cachedRow{version: version, apart: apart}
}

// prime remembers apart for run id at version unless the cache knows the
// run at that version or a later one (from a read or a write, which it
// trusts more).
func (c *rowCache) prime(id string, version int64, apart map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if known, ok := c.m[id]; ok && known.version >= version {
		return
	}
	c.putLocked(id, version, apart)
}

// stored returns the parts the row of run id at version keeps apart, and
// whether it knows.
func (c *rowCache) stored(id string, version int64) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[id]
	if !ok || r.version != version {
		return nil, false
	}
	return r.apart, true
}

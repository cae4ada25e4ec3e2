package dynamo

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"

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
	// TokenHashes are Run.TokenHashes of rows written before, kept as an
	// attribute because DeleteRun reads it from every item of the run's
	// partition.
	TokenHashes []string `dynamodbav:"token_hashes,omitempty"`
	Row         []byte   `dynamodbav:"row"`
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
	zw, err := flate.NewWriterDict(&buf, flate.BestCompression, []byte(rowDict))
	if err != nil {
		return rowItem{}, err
	}
	if _, err := zw.Write(js); err != nil {
		return rowItem{}, err
	}
	if err := zw.Close(); err != nil {
		return rowItem{}, err
	}
	it := rowItem{
		key:         key{PK: runPK(r.ID), SK: runSK},
		Status:      string(r.Status),
		Version:     r.Version,
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
// runItem as rows were written before).
func decodeRun(m map[string]types.AttributeValue) (*runs.Run, error) {
	if _, ok := m["row"]; !ok {
		var it runItem
		if err := attributevalue.UnmarshalMap(m, &it); err != nil {
			return nil, fmt.Errorf("decode run: %w", err)
		}
		return it.run()
	}
	var it rowItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return nil, fmt.Errorf("decode run: %w", err)
	}
	if len(it.Row) == 0 || it.Row[0] != rowFormat {
		return nil, fmt.Errorf("decode run %s: unknown row format", it.PK)
	}
	zr := flate.NewReaderDict(bytes.NewReader(it.Row[1:]), []byte(rowDict))
	defer zr.Close()
	js, err := io.ReadAll(io.LimitReader(zr, 16*MaxItemSize))
	if err != nil {
		return nil, fmt.Errorf("decode run %s: %w", it.PK, err)
	}
	r := new(runs.Run)
	if err := json.Unmarshal(js, r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", it.PK, err)
	}
	return r, nil
}

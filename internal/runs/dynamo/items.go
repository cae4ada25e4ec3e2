package dynamo

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// Key prefixes and sort keys of the single table.
const (
	runPrefix   = "RUN#"
	runSK       = "RUN"
	eventPrefix = "EVT#"
	tokenPrefix = "TOKEN#"
	tokenSK     = "TOKEN"
	duePrefix   = "DUE#"
	inboxPrefix = "INBOX#"
	// tokenListPrefix starts the sort key of a token list item: the hashes
	// of tokens issued by a write without events, in the run's partition.
	tokenListPrefix = "TOKENS#"
	// idemKeyPrefix and idemKeySK key an idempotency key:
	// pk=IDEMKEY#<hash>, sk=IDEMKEY.
	idemKeyPrefix = "IDEMKEY#"
	idemKeySK     = "IDEMKEY"
	// idemKeyAttr names, on the first event item of the write that
	// created a run under an idempotency key, that key's hash, for
	// DeleteRun (never part of an event as read).
	idemKeyAttr = "idempotency_key"
	// tokenHashesAttr lists, on an item of the run's partition (the first
	// event of the write that issued them, or a token list item), the
	// hashes of approval tokens issued to the run, for DeleteRun. Rows
	// written before carry the same attribute (runs.Run.TokenHashes).
	tokenHashesAttr = "token_hashes"
	// DueIndex is the name of the due GSI.
	DueIndex = "due-index"
	// TTLAttribute is the table's TTL attribute (unix seconds), a backstop
	// for rows and tokens that purge somehow missed.
	TTLAttribute = "expires_at"
	// ttlGrace is how long after its retention or expiry an item may linger
	// before the TTL backstop deletes it.
	ttlGrace = 7 * 24 * time.Hour
)

func runPK(id string) string       { return runPrefix + id }
func eventSK(seq int64) string     { return fmt.Sprintf("%s%020d", eventPrefix, seq) }
func tokenPK(hash string) string   { return tokenPrefix + hash }
func idemKeyPK(hash string) string { return idemKeyPrefix + hash }
func duePK(shard int) string       { return fmt.Sprintf("%s%d", duePrefix, shard) }

// inboxPK is the partition of an approver's inbox entries.
func inboxPK(approver string) string { return inboxPrefix + approver }

// maxInboxMS inverts unix ms in inbox sort keys (13 digits, up to 2286).
const maxInboxMS = 9_999_999_999_999

// inboxSK orders an approver's entries newest suspension first, then by
// run id, in ascending key order.
func inboxSK(at time.Time, runID string) string {
	return fmt.Sprintf("%013d#%s", maxInboxMS-at.UnixMilli(), runID)
}
func shardOf(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))        // a hash.Hash never returns an error
	return int(h.Sum32() % uint32(n)) //nolint:gosec // n is the shard count, positive (New defaults 0 to DefaultDueShards)
}

func toMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// key is the primary key of any item.
type key struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
}

// counters are loop.Counters with attribute names.
type counters struct {
	Iterations   int   `dynamodbav:"iterations"`
	ModelCalls   int   `dynamodbav:"model_calls"`
	InputTokens  int64 `dynamodbav:"input_tokens"`
	OutputTokens int64 `dynamodbav:"output_tokens"`
	ToolCalls    int   `dynamodbav:"tool_calls"`
}

// runItem is the stored form of a run row as rows were written before
// rowItem, one attribute per field: still read (decodeRun), never written.
// Times are unix milliseconds (0 = unset); JSON documents are kept as
// strings.
type runItem struct {
	key
	DuePK     string `dynamodbav:"due_pk,omitempty"`
	DueAt     int64  `dynamodbav:"due_at,omitempty"`
	ExpiresAt int64  `dynamodbav:"expires_at,omitempty"`

	ID               string            `dynamodbav:"id"`
	Status           string            `dynamodbav:"status"`
	Reason           string            `dynamodbav:"reason,omitempty"`
	Version          int64             `dynamodbav:"version"`
	CreatedAt        int64             `dynamodbav:"created_at"`
	UpdatedAt        int64             `dynamodbav:"updated_at"`
	Counters         counters          `dynamodbav:"counters"`
	Initiator        string            `dynamodbav:"initiator"`
	Approvers        []string          `dynamodbav:"approvers,omitempty"`
	FourEyes         bool              `dynamodbav:"four_eyes,omitempty"`
	Purpose          string            `dynamodbav:"purpose,omitempty"`
	Metadata         map[string]string `dynamodbav:"metadata,omitempty"`
	Request          string            `dynamodbav:"request,omitempty"`
	SuspensionID     string            `dynamodbav:"suspension_id,omitempty"`
	TurnDigest       string            `dynamodbav:"turn_digest,omitempty"`
	SuspendedAt      int64             `dynamodbav:"suspended_at,omitempty"`
	InboxKeys        []string          `dynamodbav:"inbox_keys,omitempty"`
	PendingCalls     string            `dynamodbav:"pending_calls,omitempty"`
	StateKey         string            `dynamodbav:"state_key,omitempty"`
	StateSHA256      string            `dynamodbav:"state_sha256,omitempty"`
	StateSize        int64             `dynamodbav:"state_size,omitempty"`
	LeaseOwner       string            `dynamodbav:"lease_owner,omitempty"`
	LeaseUntil       int64             `dynamodbav:"lease_until,omitempty"`
	PendingEffect    string            `dynamodbav:"pending_effect,omitempty"`
	PendingIdem      bool              `dynamodbav:"pending_idempotent,omitempty"`
	WroteSinceClaim  bool              `dynamodbav:"wrote_since_claim,omitempty"`
	Reclaims         int               `dynamodbav:"reclaims,omitempty"`
	CheckpointKey    string            `dynamodbav:"checkpoint_key,omitempty"`
	CheckpointSHA256 string            `dynamodbav:"checkpoint_sha256,omitempty"`
	CheckpointSize   int64             `dynamodbav:"checkpoint_size,omitempty"`
	ApprovalDeadline int64             `dynamodbav:"approval_deadline,omitempty"`
	RemindAt         int64             `dynamodbav:"remind_at,omitempty"`
	ReminderSent     bool              `dynamodbav:"reminder_sent,omitempty"`
	Notification     string            `dynamodbav:"notification,omitempty"`
	Decision         string            `dynamodbav:"decision,omitempty"`
	DecidedBy        string            `dynamodbav:"decided_by,omitempty"`
	DecidedVia       string            `dynamodbav:"decided_via,omitempty"`
	DecidedAt        int64             `dynamodbav:"decided_at,omitempty"`
	Output           string            `dynamodbav:"output,omitempty"`
	RetainUntil      int64             `dynamodbav:"retain_until,omitempty"`
	WriteID          string            `dynamodbav:"write_id,omitempty"`
	LastSeq          int64             `dynamodbav:"last_seq"`
	TokenHashes      []string          `dynamodbav:"token_hashes,omitempty"`
	Webhook          string            `dynamodbav:"webhook,omitempty"`
	Outbox           string            `dynamodbav:"outbox,omitempty"`
	VotesNeeded      int               `dynamodbav:"votes_needed,omitempty"`
	Votes            string            `dynamodbav:"votes,omitempty"`
	ToolExecutors    []string          `dynamodbav:"tool_executors,omitempty"`
	HandOver         string            `dynamodbav:"hand_over,omitempty"`
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func (it runItem) run() (*runs.Run, error) {
	r := &runs.Run{
		ID:                it.ID,
		Status:            runs.Status(it.Status),
		Reason:            loop.TerminationReason(it.Reason),
		Version:           it.Version,
		CreatedAt:         fromMS(it.CreatedAt),
		UpdatedAt:         fromMS(it.UpdatedAt),
		Counters:          loop.Counters(it.Counters),
		Initiator:         it.Initiator,
		Approvers:         it.Approvers,
		FourEyes:          it.FourEyes,
		Purpose:           it.Purpose,
		Metadata:          it.Metadata,
		Request:           raw(it.Request),
		SuspensionID:      it.SuspensionID,
		TurnDigest:        it.TurnDigest,
		SuspendedAt:       fromMS(it.SuspendedAt),
		InboxKeys:         it.InboxKeys,
		State:             runs.StateRef{Key: it.StateKey, SHA256: it.StateSHA256, Size: it.StateSize},
		LeaseOwner:        it.LeaseOwner,
		LeaseUntil:        fromMS(it.LeaseUntil),
		PendingEffect:     it.PendingEffect,
		PendingIdempotent: it.PendingIdem,
		WroteSinceClaim:   it.WroteSinceClaim,
		Reclaims:          it.Reclaims,
		Checkpoint:        runs.StateRef{Key: it.CheckpointKey, SHA256: it.CheckpointSHA256, Size: it.CheckpointSize},
		ApprovalDeadline:  fromMS(it.ApprovalDeadline),
		RemindAt:          fromMS(it.RemindAt),
		ReminderSent:      it.ReminderSent,
		Notification:      runs.NotificationState(it.Notification),
		DecidedBy:         it.DecidedBy,
		DecidedVia:        it.DecidedVia,
		DecidedAt:         fromMS(it.DecidedAt),
		Output:            raw(it.Output),
		RetainUntil:       fromMS(it.RetainUntil),
		DueAt:             fromMS(it.DueAt),
		WriteID:           it.WriteID,
		LastSeq:           it.LastSeq,
		TokenHashes:       it.TokenHashes,
		ToolExecutors:     it.ToolExecutors,
	}
	if it.HandOver != "" {
		r.HandOver = new(runs.HandOverRecord)
		if err := json.Unmarshal([]byte(it.HandOver), r.HandOver); err != nil {
			return nil, fmt.Errorf("decode hand-over of run %s: %w", it.ID, err)
		}
	}
	if it.PendingCalls != "" {
		if err := json.Unmarshal([]byte(it.PendingCalls), &r.PendingCalls); err != nil {
			return nil, fmt.Errorf("decode pending calls of run %s: %w", it.ID, err)
		}
	}
	if it.Webhook != "" {
		r.Webhook = new(runs.Subscription)
		if err := json.Unmarshal([]byte(it.Webhook), r.Webhook); err != nil {
			return nil, fmt.Errorf("decode webhook of run %s: %w", it.ID, err)
		}
	}
	r.VotesNeeded = it.VotesNeeded
	if it.Votes != "" {
		if err := json.Unmarshal([]byte(it.Votes), &r.Votes); err != nil {
			return nil, fmt.Errorf("decode votes of run %s: %w", it.ID, err)
		}
	}
	if it.Outbox != "" {
		if err := json.Unmarshal([]byte(it.Outbox), &r.Outbox); err != nil {
			return nil, fmt.Errorf("decode outbox of run %s: %w", it.ID, err)
		}
	}
	if it.Decision != "" {
		r.Decision = new(loop.Decision)
		if err := json.Unmarshal([]byte(it.Decision), r.Decision); err != nil {
			return nil, fmt.Errorf("decode decision of run %s: %w", it.ID, err)
		}
	}
	return r, nil
}

// eventItem is the stored form of a run's events. A Write stores the
// events it appends in one item (or a few, when they are over
// maxEventBatchSize together), sorted under the last one's Seq:
// Events, the deflated JSON of the batch (batchEvent, in Seq order), and
// First, the first one's Seq. Items written before hold one event each in
// their own attributes (Seq, Type, At, Actor, Data); both read alike.
// TokenHashes, on the first item of a write that issued approval tokens,
// are their hashes (never part of an event as read back): the run's
// partition lists its tokens, so the row does not.
type eventItem struct {
	key
	RunID       string   `dynamodbav:"run_id,omitempty"`
	First       int64    `dynamodbav:"first,omitempty"`
	Events      []byte   `dynamodbav:"events,omitempty"`
	Seq         int64    `dynamodbav:"seq,omitempty"`
	Type        string   `dynamodbav:"type,omitempty"`
	At          int64    `dynamodbav:"at,omitempty"`
	Actor       string   `dynamodbav:"actor,omitempty"`
	Data        string   `dynamodbav:"data,omitempty"`
	TokenHashes []string `dynamodbav:"token_hashes,omitempty"`
	// IdempotencyKey, on the first item of the write that created the run
	// under an idempotency key, is that key's hash.
	IdempotencyKey string `dynamodbav:"idempotency_key,omitempty"`
}

// idemKeyItem is the stored form of an idempotency key. It has no TTL:
// DeleteRun deletes it with its run (a key that outlives its run, its row
// deleted by the TTL backstop, is taken over by the next start under it).
type idemKeyItem struct {
	key
	RunID         string `dynamodbav:"run_id"`
	RequestSHA256 string `dynamodbav:"request_sha256"`
	CreatedAt     int64  `dynamodbav:"created_at"`
}

func newIdemKeyItem(k runs.IdempotencyKey) idemKeyItem {
	return idemKeyItem{key: key{PK: idemKeyPK(k.Hash), SK: idemKeySK}, RunID: k.RunID, RequestSHA256: k.RequestSHA256, CreatedAt: toMS(k.CreatedAt)}
}

func (it idemKeyItem) idempotencyKey() *runs.IdempotencyKey {
	return &runs.IdempotencyKey{
		Hash: it.PK[len(idemKeyPrefix):], RunID: it.RunID, RequestSHA256: it.RequestSHA256, CreatedAt: fromMS(it.CreatedAt),
	}
}

// batchEvent is one event inside an event item's Events.
type batchEvent struct {
	Seq   int64           `json:"s"`
	Type  string          `json:"t"`
	At    int64           `json:"a"`
	Actor string          `json:"u,omitempty"`
	Data  json.RawMessage `json:"d,omitempty"`
}

// maxEventBatchSize bounds the JSON of the events one item holds (before
// deflating), below DynamoDB's 400 KB per item with room for the keys.
const maxEventBatchSize = 300 << 10

// tokenListItem lists the hashes of the approval tokens of a write that
// appends no event, in the run's partition (the Store's writes that issue
// tokens always append one; this keeps the adapter whole).
type tokenListItem struct {
	key
	TokenHashes []string `dynamodbav:"token_hashes"`
}

// newEventItems returns the items that store evs (one Write's events, in
// Seq order): as few as hold them within maxEventBatchSize each.
func newEventItems(evs []runs.Event) ([]eventItem, error) {
	var (
		out   []eventItem
		batch []json.RawMessage
		size  int
		first int64
	)
	flush := func(last int64) error {
		if len(batch) == 0 {
			return nil
		}
		b, err := deflateJSON(batch)
		if err != nil {
			return err
		}
		out = append(out, eventItem{key: key{PK: runPK(evs[0].RunID), SK: eventSK(last)}, First: first, Events: b})
		batch, size = nil, 0
		return nil
	}
	for i, ev := range evs {
		b, err := json.Marshal(batchEvent{Seq: ev.Seq, Type: ev.Type, At: toMS(ev.At), Actor: ev.Actor, Data: ev.Data})
		if err != nil {
			return nil, fmt.Errorf("encode event %d of run %s: %w", ev.Seq, ev.RunID, err)
		}
		if len(batch) > 0 && size+len(b) > maxEventBatchSize {
			if err := flush(evs[i-1].Seq); err != nil {
				return nil, err
			}
		}
		if len(batch) == 0 {
			first = ev.Seq
		}
		batch = append(batch, b)
		size += len(b) + 1
	}
	if len(evs) > 0 {
		if err := flush(evs[len(evs)-1].Seq); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// events returns the events the item holds, in Seq order.
func (it eventItem) events(runID string) ([]runs.Event, error) {
	if it.Events == nil {
		return []runs.Event{{RunID: it.RunID, Seq: it.Seq, Type: it.Type, At: fromMS(it.At), Actor: it.Actor, Data: raw(it.Data)}}, nil
	}
	var batch []batchEvent
	if err := inflateJSON(it.Events, &batch); err != nil {
		return nil, fmt.Errorf("decode events %s of run %s: %w", it.SK, runID, err)
	}
	out := make([]runs.Event, len(batch))
	for i, e := range batch {
		out[i] = runs.Event{RunID: runID, Seq: e.Seq, Type: e.Type, At: fromMS(e.At), Actor: e.Actor, Data: e.Data}
	}
	return out, nil
}

// tokenItem is the stored form of an approval token. Its own expiry is
// link_expires_at (ms); expires_at is the TTL backstop (s).
type tokenItem struct {
	key
	Hash          string `dynamodbav:"hash"`
	RunID         string `dynamodbav:"run_id"`
	SuspensionID  string `dynamodbav:"suspension_id"`
	Approver      string `dynamodbav:"approver"`
	Person        string `dynamodbav:"person,omitempty"`
	LinkExpiresAt int64  `dynamodbav:"link_expires_at"`
	UsedAt        int64  `dynamodbav:"used_at,omitempty"`
	ExpiresAt     int64  `dynamodbav:"expires_at"`
}

func newTokenItem(t runs.ApprovalToken) tokenItem {
	return tokenItem{
		key:  key{PK: tokenPK(t.Hash), SK: tokenSK},
		Hash: t.Hash, RunID: t.RunID, SuspensionID: t.SuspensionID, Approver: t.Approver, Person: t.Person,
		LinkExpiresAt: toMS(t.ExpiresAt), UsedAt: toMS(t.UsedAt),
		ExpiresAt: t.ExpiresAt.Add(ttlGrace).Unix(),
	}
}

func (it tokenItem) token() *runs.ApprovalToken {
	return &runs.ApprovalToken{
		Hash: it.Hash, RunID: it.RunID, SuspensionID: it.SuspensionID, Approver: it.Approver, Person: it.Person,
		ExpiresAt: fromMS(it.LinkExpiresAt), UsedAt: fromMS(it.UsedAt),
	}
}

// inboxItem is the stored form of an inbox entry, in the approver's
// partition; expires_at is the TTL backstop (s) past the deadline.
type inboxItem struct {
	key
	Approver     string   `dynamodbav:"approver"`
	RunID        string   `dynamodbav:"run_id"`
	SuspensionID string   `dynamodbav:"suspension_id"`
	TurnDigest   string   `dynamodbav:"turn_digest"`
	Initiator    string   `dynamodbav:"initiator"`
	Purpose      string   `dynamodbav:"purpose"`
	Tools        []string `dynamodbav:"tools"`
	Deadline     int64    `dynamodbav:"deadline"`
	SuspendedAt  int64    `dynamodbav:"suspended_at"`
	VotesNeeded  int      `dynamodbav:"votes_needed"`
	Approvals    int      `dynamodbav:"approvals,omitempty"` // runs.InboxEntry.Counted
	// ApprovingPersons is absent on an item written before it was kept.
	ApprovingPersons *int  `dynamodbav:"approving_persons,omitempty"`
	ExpiresAt        int64 `dynamodbav:"expires_at"`
}

func inboxKeyOf(k runs.InboxKey) key {
	return key{PK: inboxPK(k.Approver), SK: inboxSK(k.SuspendedAt, k.RunID)}
}

func newInboxItem(e runs.InboxEntry) inboxItem {
	return inboxItem{
		key:      inboxKeyOf(e.Key()),
		Approver: e.Approver, RunID: e.RunID, SuspensionID: e.SuspensionID, TurnDigest: e.TurnDigest,
		Initiator: e.Initiator, Purpose: e.Purpose, Tools: e.Tools,
		Deadline: toMS(e.Deadline), SuspendedAt: toMS(e.SuspendedAt), VotesNeeded: e.VotesNeeded,
		Approvals: e.Counted, ApprovingPersons: e.ApprovingPersons, ExpiresAt: e.Deadline.Add(ttlGrace).Unix(),
	}
}

func (it inboxItem) entry() runs.InboxEntry {
	tools := it.Tools
	if tools == nil {
		tools = []string{}
	}
	return runs.InboxEntry{
		Approver: it.Approver, RunID: it.RunID, SuspensionID: it.SuspensionID, TurnDigest: it.TurnDigest,
		Initiator: it.Initiator, Purpose: it.Purpose, Tools: tools,
		Deadline: fromMS(it.Deadline), SuspendedAt: fromMS(it.SuspendedAt), VotesNeeded: it.VotesNeeded,
		Counted: it.Approvals, ApprovingPersons: it.ApprovingPersons,
	}
}

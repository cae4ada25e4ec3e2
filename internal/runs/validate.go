package runs

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Size limits that keep a run row well under DynamoDB's 400 KB item limit.
// A caller's input above them (approvers, request, decision) is refused with
// ETooLarge; the worker's own (pending calls, output, event data) with
// EInvalid.
const (
	MaxRequestSize      = 128 << 10 // Run.Request
	MaxPendingCallsSize = 64 << 10  // Run.PendingCalls, as JSON (a bounded summary: SummarizeCalls)
	MaxOutputSize       = 96 << 10  // Run.Output
	MaxDecisionSize     = 32 << 10  // Run.Decision
	// MaxVoteMessagesSize bounds the messages of one vote under a quorum
	// together (its whole-turn message, or its denials'): the row keeps
	// every vote (at most MaxApprovers) until the turn is decided.
	MaxVoteMessagesSize = 1 << 10
	MaxEventDataSize    = 128 << 10 // Event.Data
	MaxApprovers        = 20
	MaxPendingCalls     = loop.MaxHeldCalls // calls of one held turn
	MaxPurposeBytes     = 1 << 10           // Run.Purpose, copied into each inbox entry
	MaxMetadataEntries  = 20                // Run.Metadata
	MaxMetadataBytes    = 16 << 10          // Run.Metadata, keys and values together
)

// NewRunID returns a new run id: 32 hex digits, the first 12 the current
// unix time in milliseconds and the other 20 random (80 bits). Ids made
// close together sort side by side, so the runs that are active at once
// share pages of the embedded store's B+tree (a batch of writes to recent
// runs rewrites fewer pages than one to runs spread over the whole file);
// DynamoDB hashes the id (and shardOf its due-index shard), so the prefix
// makes no hot key there; the state blobs' S3 keys (runs/<id>/...) now
// sort by time, which S3 scales per prefix on its own at the request rates
// of approvals. An id carries no meaning: nothing reads the time back
// (though anyone who sees an id can), and ids given by callers need not
// have it.
func NewRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(time.Now().UnixMilli()) //nolint:gosec // after 1970
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return hex.EncodeToString(b[:])
}

// ValidRunID reports whether id may name a run: 1 to 64 characters out of
// letters, digits, '-' and '_' (ids appear in keys and S3 paths).
func ValidRunID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ValidTokenHash reports whether h is a lowercase hex SHA-256.
func ValidTokenHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkJSON refuses b unless it is empty (when optional) or valid JSON of at
// most max bytes.
func checkJSON(what string, b []byte, max int, optional bool) error {
	if len(b) == 0 {
		if optional {
			return nil
		}
		return Errorf(EInvalid, "%s is required", what)
	}
	if len(b) > max {
		return Errorf(EInvalid, "%s is %d bytes, over the %d-byte limit", what, len(b), max)
	}
	if !json.Valid(b) {
		return Errorf(EInvalid, "%s is not valid JSON", what)
	}
	return nil
}

// mustJSON marshals v, which is always one of the package's own event
// payload structs.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runs: marshal event data: " + err.Error())
	}
	return b
}

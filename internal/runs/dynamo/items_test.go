package dynamo

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestRunItemRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	full := &runs.Run{
		ID: "r1", Status: runs.StatusCompleted, Reason: loop.ReasonCompleted, Version: 9,
		CreatedAt: at, UpdatedAt: at.Add(time.Minute),
		Counters:  loop.Counters{Iterations: 1, ModelCalls: 2, InputTokens: 3, OutputTokens: 4, ToolCalls: 5},
		Initiator: "alice", Approvers: []string{"bob", "carol"}, FourEyes: true, Purpose: "p", Metadata: map[string]string{"k": "v"},
		Request:      json.RawMessage(`{"prompt":"hi"}`),
		SuspensionID: "s1", TurnDigest: "d1", SuspendedAt: at.Add(time.Second), InboxKeys: []string{"bob", "group:sre"},
		PendingCalls: []runs.CallSummary{{ID: "c1", Tool: "send", Input: json.RawMessage(`{"to":"x"}`), NeedsApproval: true, Effect: "write", Preview: "p"}},
		State:        runs.StateRef{Key: "runs/r1/state/x.json.gz", SHA256: "x", Size: 10},
		Checkpoint:   runs.StateRef{Key: "runs/r1/state/y.json.gz", SHA256: "y", Size: 11},
		LeaseOwner:   "w1", LeaseUntil: at.Add(2 * time.Minute), PendingEffect: "c1", PendingIdempotent: true, WroteSinceClaim: true,
		ApprovalDeadline: at.Add(time.Hour), RemindAt: at.Add(30 * time.Minute), ReminderSent: true,
		Notification: runs.NotificationSent,
		Decision:     &loop.Decision{TurnDigest: "d1", Action: loop.ActionApprove}, DecidedBy: "bob", DecidedVia: runs.ViaLink, DecidedAt: at.Add(3 * time.Minute),
		Output:      json.RawMessage(`{"text":"done"}`),
		RetainUntil: at.Add(24 * time.Hour), DueAt: at.Add(24 * time.Hour),
		WriteID: "w", LastSeq: 7, TokenHashes: []string{"h1", "h2"},
		ToolExecutors: []string{"svc-1", "ops@example.com"},
		HandOver: &runs.HandOverRecord{
			ID: "tr1", At: at.Add(4 * time.Minute), Deadline: at.Add(time.Hour),
			Calls:   []runs.ClientCallSummary{{ID: "c2", Name: "lookup", Input: json.RawMessage(`{"sku":"A"}`), InputSize: 11, Edited: true}},
			Results: runs.StateRef{Key: "runs/r1/state/y.json.gz", SHA256: "y", Size: 20}, SubmittedBy: "alice", SubmittedAt: at.Add(5 * time.Minute),
		},
	}
	tests := []struct {
		name string
		run  *runs.Run
	}{
		{"every field", full},
		{"a fresh queued run", &runs.Run{ID: "r2", Status: runs.StatusQueued, Version: 1, CreatedAt: at, UpdatedAt: at, Initiator: "alice", DueAt: at, LastSeq: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it, err := newRowItem(tt.run, 8)
			require.NoError(t, err)
			m, err := attributevalue.MarshalMap(it)
			require.NoError(t, err)
			got, _, err := decodeRun(m, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.run, got)
		})
		t.Run(tt.name+", as rows were written before", func(t *testing.T) {
			it, err := newRunItem(tt.run, 8)
			require.NoError(t, err)
			m, err := attributevalue.MarshalMap(it)
			require.NoError(t, err)
			got, _, err := decodeRun(m, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.run, got)
		})
	}

	t.Run("keys and sparse index attributes", func(t *testing.T) {
		it, err := newRowItem(full, 8)
		require.NoError(t, err)
		m, err := attributevalue.MarshalMap(it)
		require.NoError(t, err)
		assert.Equal(t, &types.AttributeValueMemberS{Value: "RUN#r1"}, m["pk"])
		assert.Equal(t, &types.AttributeValueMemberS{Value: "RUN"}, m["sk"])
		assert.Regexp(t, `^DUE#[0-7]$`, m["due_pk"].(*types.AttributeValueMemberS).Value)
		assert.Equal(t, strconv.FormatInt(full.DueAt.UnixMilli(), 10), m["due_at"].(*types.AttributeValueMemberN).Value, "due_at is unix ms")
		_, hasTTL := m[TTLAttribute]
		assert.True(t, hasTTL, "a terminal row carries the TTL backstop")

		noDue := *full
		noDue.DueAt, noDue.Status = time.Time{}, runs.StatusRunning
		it, err = newRowItem(&noDue, 8)
		require.NoError(t, err)
		m, err = attributevalue.MarshalMap(it)
		require.NoError(t, err)
		for _, attr := range []string{"due_pk", "due_at", TTLAttribute} {
			_, ok := m[attr]
			assert.False(t, ok, "%s must be absent", attr)
		}
	})

	t.Run("what conditions and DeleteRun read are attributes", func(t *testing.T) {
		it, err := newRowItem(full, 8)
		require.NoError(t, err)
		m, err := attributevalue.MarshalMap(it)
		require.NoError(t, err)
		assert.Equal(t, &types.AttributeValueMemberS{Value: string(runs.StatusCompleted)}, m["status"])
		assert.Equal(t, &types.AttributeValueMemberN{Value: "9"}, m["version"])
		assert.Equal(t, &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "h1"}, &types.AttributeValueMemberS{Value: "h2"}}}, m[tokenHashesAttr])
	})

	t.Run("a row is about half its size as one attribute per field", func(t *testing.T) {
		it, err := newRowItem(full, 8)
		require.NoError(t, err)
		m, err := attributevalue.MarshalMap(it)
		require.NoError(t, err)
		old, err := newRunItem(full, 8)
		require.NoError(t, err)
		om, err := attributevalue.MarshalMap(old)
		require.NoError(t, err)
		t.Logf("row of every field: %d bytes, %d as written before", ItemSize(m), ItemSize(om))
		assert.Less(t, ItemSize(m), ItemSize(om)*6/10)
	})
}

func TestLargePartsAreStoredApart(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	long := strings.Repeat("Review the quarterly figures and update the pricing page. ", 40)
	r := &runs.Run{
		ID: "r1", Status: runs.StatusWaiting, Version: 4, CreatedAt: at, UpdatedAt: at, Initiator: "alice",
		Request:      json.RawMessage(`{"prompt":` + strconv.Quote(long) + `}`),
		PendingCalls: []runs.CallSummary{{ID: "c1", Tool: "write_document", Input: json.RawMessage(`{"text":` + strconv.Quote(long) + `}`), NeedsApproval: true, Preview: long}},
		SuspensionID: "s1", LastSeq: 4, DueAt: at,
	}
	row, parts, err := encodeRow(r, 8)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	assert.Len(t, row.Apart, 2)
	m, err := attributevalue.MarshalMap(row)
	require.NoError(t, err)
	t.Logf("row %d bytes with its request and held calls apart", ItemSize(m))
	assert.Less(t, ItemSize(m), 1024, "the row stays under 1 KB")
	byKey := map[string]partItem{}
	for _, p := range parts {
		assert.Equal(t, runPK("r1"), p.PK)
		byKey[p.SK] = p
	}
	got, apart, err := decodeRun(m, byKey)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.Equal(t, row.Apart, apart)

	delete(byKey, partSK(partCalls))
	_, _, err = decodeRun(m, byKey)
	assert.ErrorContains(t, err, "missing", "a row never reads without a part it names")

	small := r.Clone()
	small.Request, small.PendingCalls = json.RawMessage(`{"prompt":"hi"}`), nil
	row, parts, err = encodeRow(small, 8)
	require.NoError(t, err)
	assert.Empty(t, parts, "small parts stay in the row")
	assert.Empty(t, row.Apart)
}

func TestUnknownRowFormatIsAnError(t *testing.T) {
	m, err := attributevalue.MarshalMap(rowItem{key: key{PK: runPK("r1"), SK: runSK}, Status: "RUNNING", Version: 1, Row: []byte{99, 1, 2}})
	require.NoError(t, err)
	_, _, err = decodeRun(m, nil)
	assert.ErrorContains(t, err, "unknown row format")
}

func TestEventAndTokenItems(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	ev := runs.Event{RunID: "r1", Seq: 12, Type: runs.EventDecision, At: at, Actor: "bob", Data: json.RawMessage(`{"a":1}`)}
	its, err := newEventItems([]runs.Event{ev})
	require.NoError(t, err)
	require.Len(t, its, 1)
	assert.Equal(t, "EVT#00000000000000000012", its[0].SK, "sort keys order numerically")
	got, err := its[0].events("r1")
	require.NoError(t, err)
	assert.Equal(t, []runs.Event{ev}, got)

	old := eventItem{key: key{PK: runPK("r1"), SK: eventSK(12)}, RunID: "r1", Seq: 12, Type: runs.EventDecision, At: toMS(at), Actor: "bob", Data: `{"a":1}`}
	got, err = old.events("r1")
	require.NoError(t, err)
	assert.Equal(t, []runs.Event{ev}, got, "an item written before, one event per item, reads alike")

	tok := runs.ApprovalToken{Hash: "h", RunID: "r1", SuspensionID: "s1", Approver: "bob", ExpiresAt: at, UsedAt: at.Add(-time.Minute)}
	ti := newTokenItem(tok)
	assert.Equal(t, "TOKEN#h", ti.PK)
	assert.Equal(t, at.Add(ttlGrace).Unix(), ti.ExpiresAt, "the TTL backstop is in seconds, after the link's expiry")
	assert.Equal(t, &tok, ti.token())
}

func TestEventItemsSplitLargeWrites(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	noise := make([]byte, runs.MaxEventDataSize*3/4-16)
	_, _ = rand.Read(noise)
	big := json.RawMessage(`"` + base64.StdEncoding.EncodeToString(noise) + `"`) // does not deflate much
	var evs []runs.Event
	for seq := int64(5); seq < 15; seq++ {
		evs = append(evs, runs.Event{RunID: "r1", Seq: seq, Type: "model_called", At: at, Data: big})
	}
	its, err := newEventItems(evs)
	require.NoError(t, err)
	require.Greater(t, len(its), 1, "ten events of 128 KB do not fit one item")
	var got []runs.Event
	for _, it := range its {
		m, err := attributevalue.MarshalMap(it)
		require.NoError(t, err)
		assert.LessOrEqual(t, ItemSize(m), MaxItemSize, "item %s", it.SK)
		evs, err := it.events("r1")
		require.NoError(t, err)
		assert.Equal(t, eventSK(evs[len(evs)-1].Seq), it.SK, "an item is sorted under its last event")
		assert.Equal(t, evs[0].Seq, it.First)
		got = append(got, evs...)
	}
	assert.Equal(t, evs, got, "every event once, in order")
}

func TestShardOfIsStableAndSpread(t *testing.T) {
	seen := map[int]int{}
	for range 800 {
		id := runs.NewRunID()
		s := shardOf(id, 8)
		require.Equal(t, s, shardOf(id, 8))
		seen[s]++
	}
	assert.Len(t, seen, 8, "every shard gets runs")
}

func TestTranslate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"condition failed", &types.ConditionalCheckFailedException{Message: aws.String("x")}, runs.EConflict},
		{"transaction cancelled on a condition", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("ConditionalCheckFailed")}}}, runs.EConflict},
		{"transaction conflict", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}}}, runs.EConflict},
		{"transaction cancelled by throttling", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("ThrottlingError")}}}, runs.EInternal},
		{"idempotency mismatch", &types.IdempotentParameterMismatchException{}, runs.EConflict},
		// An earlier attempt of the same write may still commit: unknown, not refused.
		{"transaction in progress", &types.TransactionInProgressException{Message: aws.String("in progress")}, runs.EInternal},
		{"table missing", &types.ResourceNotFoundException{Message: aws.String("no table")}, runs.EInternal},
		{"anything else", errors.New("boom"), runs.EInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, runs.ErrorCode(translate(tt.err)))
		})
	}
}

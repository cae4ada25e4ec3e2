package runstest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// Harness is one adapter pair under test, with the raw blob access the suite
// needs to fault it behind the store's back.
type Harness struct {
	Rows   runs.RowStore
	States runs.StateStore
	// PutBlob stores body under key as is (to plant corrupted or orphan blobs).
	PutBlob func(t *testing.T, key string, body []byte)
	// DeleteBlob deletes the blob at key.
	DeleteBlob func(t *testing.T, key string)
	// BlobKeys lists the keys under prefix.
	BlobKeys func(t *testing.T, prefix string) []string
	// RowSize returns the size of the stored run row as the adapter's
	// database counts it against its limits (DynamoDB's item size; the
	// bytes of the embedded store's record).
	RowSize func(t *testing.T, runID string) int
	// DropRow deletes the run row alone, behind the store's back, as
	// DynamoDB's TTL backstop would (nil: the cases that need it skip).
	DropRow func(t *testing.T, runID string)
	// Cycles is how many suspensions the bound cases drive one run through
	// (0: DefaultCycles); an emulator that copies its table in every
	// transaction (moto) takes fewer.
	Cycles int
	// Racers is how many goroutines the concurrency cases race on one run
	// (0: DefaultRacers); a harness that sends one request at a time
	// (awstest over moto, whose writes are not atomic under concurrency)
	// gets no more interleavings from 50 than from a dozen, only a longer
	// queue.
	Racers int
}

// Options the suite builds its stores with.
const (
	LeaseTTL      = time.Minute
	DispatchGrace = 2 * time.Minute
	Retention     = 24 * time.Hour
)

// Epoch is where every suite clock starts.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// Run runs the conformance suite but for its megabyte cases (RunMegabytes);
// newHarness must return a fresh, isolated adapter pair for each call (a new
// file, table, bucket or key namespace).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	runCases(t, newHarness, []suiteCase{
		{"Lifecycle", testLifecycle},
		{"CreateRefusals", testCreateRefusals},
		{"TypedRequestFields", testTypedFields},
		{"NotFound", testNotFound},
		{"ClaimRefusals", testClaimRefusals},
		{"LeaseGuards", testLeaseGuards},
		{"StaleLeaseSettledBySweeper", testStaleLease},
		{"SuspendRefusals", testSuspendRefusals},
		{"ResuspendAfterResume", testResuspend},
		{"DecideRefusals", testDecideRefusals},
		{"DecideThroughLink", testDecideThroughLink},
		{"DecideRetriesVersionOnlyMoves", testDecideRetry},
		{"LoadStateFaults", testLoadStateFaults},
		{"TerminalIsTerminal", testTerminal},
		{"Cancel", testCancel},
		{"Expire", testExpire},
		{"EventsOrderAndPaging", testEvents},
		{"DueIndex", testDue},
		{"Redispatch", testRedispatch},
		{"Renotify", testRenotify},
		{"KeptNotice", testKeptNotice},
		{"KeptNoticeAfterRenotify", testKeptNoticeAfterRenotify},
		{"MailRetry", testMailRetry},
		{"PutEvent", testPutEvent},
		{"Purge", testPurge},
		{"TokensOffTheRow", testTokensOffTheRow},
		{"TokensOnOldRows", testTokensOnOldRows},
		{"ConcurrentDecide", testConcurrentDecide},
		{"ConcurrentLinkDecide", testConcurrentLinkDecide},
		{"ConcurrentClaim", testConcurrentClaim},
		{"ClaimRetriesVersionOnlyMoves", testClaimRetry},
		{"Inbox", testInbox},
		{"InboxPaging", testInboxPaging},
		{"InboxConcurrent", testInboxConcurrent},
		{"WroteSinceClaim", testWroteSinceClaim},
		{"HandOver", testHandOver},
		{"HandOverRefusals", testHandOverRefusals},
		{"SubmitToolResultsRefusals", testSubmitRefusals},
		{"ConcurrentSubmitToolResults", testConcurrentSubmit},
		{"ToolResultsExpire", testToolResultsExpire},
		{"Votes", testVotes},
		{"VoteAfterEveryAliasChanged", testVoteAfterEveryAliasChanged},
		{"ResumeDecided", testResumeDecided},
		{"VoteThroughLinks", testVoteThroughLinks},
		{"ConcurrentVotes", testConcurrentVotes},
		{"PerCallVotes", testPerCallVotes},
		{"VotesReadByTheReleaseBefore", testVotesReadByTheReleaseBefore},
		{"PerCallVotesOfOneApproval", testPerCallVotesOfOneApproval},
		{"PerCallVotesReadByTheReleaseBefore", testPerCallVotesReadByTheReleaseBefore},
		{"PerCallVoteEdits", testPerCallVoteEdits},
		{"ResolvedDecisionFits", testResolvedDecisionFits},
		{"NoVoteOnDecidedCalls", testNoVoteOnDecidedCalls},
		{"VoteDropsTheDone", testVoteDropsTheDone},
		{"QuorumDeciders", testQuorumDeciders},
		{"InboxCountsPersons", testInboxCountsPersons},
		{"StaleChoicesLeftOut", testStaleChoicesLeftOut},
		{"QuorumCheck", testQuorumCheck},
		{"EndUnmeetable", testEndUnmeetable},
		{"ReviseDeciders", testReviseDeciders},
		{"Checkpoint", testCheckpoint},
		{"IdempotentFence", testIdempotentFence},
		{"Reclaims", testReclaims},
		{"UnwrittenSteps", testUnwrittenSteps},
		{"ClaimOnWrite", testClaimOnWrite},
		{"ClaimKeepsDispatchDeadline", testClaimKeepsDispatchDeadline},
		{"ClaimSnapshot", testClaimSnapshot},
		{"ClaimSnapshotNotStored", testClaimSnapshotNotStored},
		{"GetAfter", testGetAfter},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"ConcurrentIdempotentStarts", testConcurrentIdempotentStarts},
		{"IdempotencyKeyOutlivesItsRun", testKeyOutlivesItsRun},
	})
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, newHarness(t)) })
}

// RunMegabytes runs the conformance cases that move megabytes through the
// store: held turns and hand-overs at the row's and the state's limits and
// past them. They are a test of their own in each adapter's package
// (TestConformanceMegabytes, TestConformanceMegabytesOnAWS) so that scripts/test.sh can run them without
// the race detector, which checks every byte copied and makes them about 14
// times slower (70 s instead of 5 s on the embedded store); the cases with
// small states in Run cover the same code under -race.
func RunMegabytes(t *testing.T, newHarness func(t *testing.T) Harness) {
	runCases(t, newHarness, []suiteCase{
		{"LargeHeldTurn", testLargeHeldTurn},
		{"StateTooLarge", testStateTooLarge},
		{"ManyHeldCalls", testManyHeldCalls},
		{"LargeHandOver", testLargeHandOver},
	})
}

type suiteCase struct {
	name string
	fn   func(t *testing.T, e *Env)
}

func runCases(t *testing.T, newHarness func(t *testing.T) Harness, cases []suiteCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, NewEnv(t, newHarness(t)))
		})
	}
}

// Env is a Store over one Harness with a settable clock, plus helpers to
// bring runs into each status.
type Env struct {
	H     Harness
	Clock *clocktest.Clock
	Store *runs.Store
	ctx   context.Context
	n     atomic.Int64
}

// NewEnv builds a Store over h with the suite's options and a clock at Epoch.
func NewEnv(t testing.TB, h Harness) *Env {
	c := clocktest.New(Epoch)
	return &Env{
		H:     h,
		Clock: c,
		Store: runs.NewStore(h.Rows, h.States, runs.Options{Now: c.Now, LeaseTTL: LeaseTTL, DispatchGrace: DispatchGrace, Retention: Retention}),
		ctx:   t.Context(),
	}
}

// Queued creates a QUEUED run with approvers bob and carol.
func (e *Env) Queued(t testing.TB) *runs.Run {
	t.Helper()
	r, err := e.Store.Create(e.ctx, runs.NewRun{
		ID:        fmt.Sprintf("run-%d-%s", e.n.Add(1), rand.Text()[:8]),
		Initiator: "alice",
		Approvers: []string{"bob", "carol"},
		Request:   json.RawMessage(`{"prompt":"file the report","model":"scripted:demo"}`),
	})
	require.NoError(t, err)
	return r
}

// Running creates a run claimed by owner "w1".
func (e *Env) Running(t testing.TB) *runs.Run {
	t.Helper()
	r := e.Queued(t)
	r, err := e.Store.Claim(e.ctx, r.ID, "w1")
	require.NoError(t, err)
	return r
}

// Waiting creates a run suspended (by "w1") on suspension "s1" and returns it
// with the raw approval tokens issued to bob and carol.
func (e *Env) Waiting(t testing.TB) (*runs.Run, []string) {
	t.Helper()
	r := e.Running(t)
	sp, raws := e.Suspension(r, "s1")
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	return r, raws
}

// Suspension returns a valid suspension of run r with two calls, an
// hour-long window and tokens for bob and carol (raw tokens returned).
func (e *Env) Suspension(r *runs.Run, id string) (runs.Suspension, []string) {
	rawBob, rawCarol := NewToken(), NewToken()
	return runs.Suspension{
		State:    SuspendedState(r.ID, id),
		Deadline: e.Clock.Now().Add(time.Hour),
		Tokens:   []runs.TokenGrant{{Hash: HashToken(rawBob), Approver: "bob", Person: "person:bob"}, {Hash: HashToken(rawCarol), Approver: "carol"}},
	}, []string{rawBob, rawCarol}
}

// SuspendedState returns a loop state of run runID held on suspension id with
// two calls: a write that needs approval (with a preview) and a read.
func SuspendedState(runID, id string) *loop.SuspendedState {
	return &loop.SuspendedState{
		SchemaVersion: loop.SchemaVersion,
		RunID:         runID,
		SuspensionID:  id,
		Transcript: loop.Transcript{Messages: []loop.Message{
			loop.UserText("hi"),
			{Role: loop.RoleAssistant, Content: []loop.Block{
				loop.ToolUseBlock("call-1", "send_email", json.RawMessage(`{"to":"x@example.com"}`)),
				loop.ToolUseBlock("call-2", "read_doc", json.RawMessage(`{"path":"a.txt"}`)),
			}},
		}},
		PendingCalls: []loop.PendingCall{
			{ID: "call-1", Name: "send_email", Input: json.RawMessage(`{"to":"x@example.com"}`), NeedsApproval: true, Effect: loop.EffectWrite},
			{ID: "call-2", Name: "read_doc", Input: json.RawMessage(`{"path":"a.txt"}`), Effect: loop.EffectRead},
		},
		Counters:   loop.Counters{Iterations: 1, ModelCalls: 1, InputTokens: 120, OutputTokens: 30},
		ToolHashes: map[string]string{"send_email": "h1", "read_doc": "h2"},
		Previews:   map[string]string{"call-1": "Send mail to x@example.com"},
		TurnDigest: "digest-" + id,
	}
}

// Approve is a decision approving the whole held turn.
var Approve = loop.Decision{TurnDigest: "digest-s1", Action: loop.ActionApprove}

// approveCall1 are the choices of a whole-turn approving vote on
// SuspendedState's turn: call-1 is its one call that needs approval.
var approveCall1 = []runs.VoteChoice{{CallID: "call-1", Action: loop.ActionApprove}}

// NewToken returns a random raw approval token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HashToken returns the stored hash of a raw token.
func HashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// Unchanged asserts that the stored run still equals before (as stored:
// Clone leaves out what a worker's row holds unwritten, AddStep).
func (e *Env) Unchanged(t *testing.T, before *runs.Run) {
	t.Helper()
	got, err := e.Store.Get(e.ctx, before.ID)
	require.NoError(t, err)
	require.Equal(t, before.Clone(), got, "the run must be unchanged after a refusal")
}

// AssertCode asserts that err carries the wanted code.
func AssertCode(t *testing.T, want string, err error) {
	t.Helper()
	require.Error(t, err, "want a %s error", want)
	require.Equal(t, want, runs.ErrorCode(err), "want code %s, got error %v", want, err)
}

// stored returns the run id as the store holds it now.
func (e *Env) stored(t *testing.T, id string) *runs.Run {
	t.Helper()
	r, err := e.Store.Get(t.Context(), id)
	require.NoError(t, err)
	return r
}

func (e *Env) eventTypes(t *testing.T, id string) []string {
	t.Helper()
	evs, err := e.Store.Events(e.ctx, id, 0, 1000)
	require.NoError(t, err)
	var types []string
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq, "events are numbered 1..n")
		types = append(types, ev.Type)
	}
	return types
}

func testLifecycle(t *testing.T, e *Env) {
	ctx := t.Context()
	t0 := e.Clock.Now().UTC().Truncate(time.Millisecond)
	r, err := e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob", "carol"}, Request: json.RawMessage(`{"prompt":"hi"}`)})
	require.NoError(t, err)
	assert.True(t, runs.ValidRunID(r.ID))
	assert.Equal(t, runs.StatusQueued, r.Status)
	assert.Equal(t, int64(1), r.Version)
	assert.Equal(t, t0, r.CreatedAt)
	assert.Equal(t, t0.Add(DispatchGrace), r.DueAt)
	e.Unchanged(t, r)

	r, err = e.Store.Claim(ctx, r.ID, "w1")
	require.NoError(t, err)
	assert.Equal(t, runs.StatusRunning, r.Status)
	assert.Equal(t, "w1", r.LeaseOwner)
	assert.Equal(t, t0.Add(LeaseTTL), r.LeaseUntil)
	assert.Equal(t, r.LeaseUntil, r.DueAt)
	assert.Equal(t, int64(2), r.Version)

	e.Clock.Advance(10 * time.Second)
	r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepModelTurn, StopReason: loop.StopToolUse, ToolCalls: 1})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(10*time.Second+LeaseTTL), r.LeaseUntil, "a step renews the lease")

	r, err = e.Store.MarkPendingEffect(ctx, r, "w1", "call-0")
	require.NoError(t, err)
	assert.Equal(t, "call-0", r.PendingEffect)
	e.Unchanged(t, r)
	r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "call-0", Tool: "send_email", Effect: loop.EffectWrite})
	require.NoError(t, err)
	assert.Empty(t, r.PendingEffect, "the fenced call's result clears the fence")

	r, err = e.Store.RenewLease(ctx, r, "w1")
	require.NoError(t, err)

	sp, raws := e.Suspension(r, "s1")
	blob, err := sp.State.Encode()
	require.NoError(t, err)
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, r.Status)
	assert.Equal(t, "s1", r.SuspensionID)
	assert.Equal(t, "digest-s1", r.TurnDigest)
	assert.Equal(t, []runs.CallSummary{
		{ID: "call-1", Tool: "send_email", Input: json.RawMessage(`{"to":"x@example.com"}`), InputSize: 22, NeedsApproval: true, Effect: loop.EffectWrite, Preview: "Send mail to x@example.com", PreviewSize: 26},
		{ID: "call-2", Tool: "read_doc", Input: json.RawMessage(`{"path":"a.txt"}`), InputSize: 16, Effect: loop.EffectRead},
	}, r.PendingCalls)
	assert.Equal(t, sp.State.Counters, r.Counters, "suspend stores the state's counters")
	sum := sha256.Sum256(blob)
	assert.Equal(t, hex.EncodeToString(sum[:]), r.State.SHA256)
	assert.Equal(t, runs.StateKey(r.ID, r.State.SHA256), r.State.Key)
	assert.Positive(t, r.State.Size)
	assert.Empty(t, r.LeaseOwner)
	assert.True(t, r.LeaseUntil.IsZero())
	assert.Equal(t, runs.NotificationPending, r.Notification)
	assert.Equal(t, sp.Deadline.UTC().Truncate(time.Millisecond), r.ApprovalDeadline)
	assert.Equal(t, r.ApprovalDeadline, r.DueAt)
	assert.Empty(t, r.TokenHashes, "the row lists no tokens: the adapter keeps them under the run")
	e.Unchanged(t, r)

	state, err := e.Store.LoadState(ctx, r)
	require.NoError(t, err)
	assert.JSONEq(t, string(blob), string(state))

	tok, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	assert.Equal(t, &runs.ApprovalToken{Hash: HashToken(raws[0]), RunID: r.ID, SuspensionID: "s1", Approver: "bob", Person: "person:bob", ExpiresAt: r.ApprovalDeadline}, tok, "the token keeps who it was sent to")

	r, err = e.Store.RecordNotification(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Data: json.RawMessage(`{"channels":["email"]}`)})
	require.NoError(t, err)
	assert.Equal(t, runs.NotificationSent, r.Notification)

	e.Clock.Advance(time.Minute)
	r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: Approve})
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, r.Status)
	assert.Equal(t, "bob", r.DecidedBy)
	assert.Equal(t, runs.ViaLink, r.DecidedVia)
	assert.Equal(t, e.Clock.Now().UTC().Truncate(time.Millisecond), r.DecidedAt)
	assert.Equal(t, &Approve, r.Decision)
	e.Unchanged(t, r)
	tok, err = e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	assert.Equal(t, r.DecidedAt, tok.UsedAt, "a link decision uses its token")

	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)
	assert.Equal(t, runs.StatusRunning, r.Status)
	assert.Equal(t, "w2", r.LeaseOwner)
	state, err = e.Store.LoadState(ctx, r)
	require.NoError(t, err, "the resuming worker loads the state")
	assert.JSONEq(t, string(blob), string(state))

	final := loop.Counters{Iterations: 2, ModelCalls: 2, InputTokens: 300, OutputTokens: 80, ToolCalls: 3}
	r, err = e.Store.Settle(ctx, r, "w2", runs.Settlement{Status: runs.StatusCompleted, Output: json.RawMessage(`{"text":"done"}`), Counters: &final})
	require.NoError(t, err)
	assert.Equal(t, runs.StatusCompleted, r.Status)
	assert.Equal(t, loop.ReasonCompleted, r.Reason)
	assert.Equal(t, final, r.Counters)
	assert.True(t, r.State.IsZero())
	assert.Empty(t, r.LeaseOwner)
	assert.Equal(t, e.Clock.Now().UTC().Truncate(time.Millisecond).Add(Retention), r.RetainUntil)
	assert.Equal(t, r.RetainUntil, r.DueAt)
	e.Unchanged(t, r)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "settle deletes the state blob")

	assert.Equal(t, []string{
		runs.EventRunStarted, runs.EventClaimed, runs.EventModelTurn, runs.EventToolExecuted,
		runs.EventSuspended, runs.EventNotified, runs.EventDecision, runs.EventResumed, runs.EventSettled,
	}, e.eventTypes(t, r.ID))
	assert.Equal(t, int64(9), r.LastSeq)
	evs, err := e.Store.Events(ctx, r.ID, 6, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, runs.EventDecision, evs[0].Type)
	assert.Equal(t, "bob", evs[0].Actor)
	assert.Equal(t, r.ID, evs[0].RunID)
	assert.JSONEq(t, `{"suspension_id":"s1","turn_digest":"digest-s1","via":"link","decision":{"turn_digest":"digest-s1","action":"approve"}}`, string(evs[0].Data))
}

func testCreateRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	many := make([]string, runs.MaxApprovers+1)
	for i := range many {
		many[i] = fmt.Sprintf("a%d", i)
	}
	tests := []struct {
		name string
		in   runs.NewRun
		code string
	}{
		{"bad id", runs.NewRun{ID: "a/b", Initiator: "alice"}, runs.EInvalid},
		{"no initiator", runs.NewRun{}, runs.EInvalid},
		{"request not JSON", runs.NewRun{Initiator: "alice", Request: json.RawMessage(`{"prompt":`)}, runs.EInvalid},
		{"request too large", runs.NewRun{Initiator: "alice", Request: json.RawMessage(`"` + string(make([]byte, runs.MaxRequestSize)) + `"`)}, runs.ETooLarge},
		{"too many approvers", runs.NewRun{Initiator: "alice", Approvers: many}, runs.ETooLarge},
		{"empty approver", runs.NewRun{Initiator: "alice", Approvers: []string{""}}, runs.EInvalid},
		{"purpose too long", runs.NewRun{Initiator: "alice", Purpose: strings.Repeat("p", runs.MaxPurposeBytes+1)}, runs.ETooLarge},
		{"too many metadata entries", runs.NewRun{Initiator: "alice", Metadata: manyLabels(runs.MaxMetadataEntries+1, 1)}, runs.ETooLarge},
		{"metadata too large", runs.NewRun{Initiator: "alice", Metadata: manyLabels(2, runs.MaxMetadataBytes/2)}, runs.ETooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Store.Create(ctx, tt.in)
			AssertCode(t, tt.code, err)
		})
	}
	r := e.Queued(t)
	_, err := e.Store.Create(ctx, runs.NewRun{ID: r.ID, Initiator: "mallory"})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)
	assert.Equal(t, []string{runs.EventRunStarted}, e.eventTypes(t, r.ID))
}

func manyLabels(n, size int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = strings.Repeat("v", size)
	}
	return m
}

// testTypedFields: four-eyes, purpose and metadata are fields of the row,
// kept through every transition, and a row whose request says four_eyes
// (or cannot be read) is four-eyes even when the field was never written.
func testTypedFields(t *testing.T, e *Env) {
	ctx := t.Context()
	labels := map[string]string{"ticket": "OPS-1", "team": "ops"}
	r, err := e.Store.Create(ctx, runs.NewRun{
		Initiator: "alice", Approvers: []string{"bob", "group:ops"}, Request: json.RawMessage(`{"prompt":"x"}`),
		FourEyes: true, Purpose: "rotate the keys", Metadata: labels,
	})
	require.NoError(t, err)
	check := func(r *runs.Run) {
		t.Helper()
		assert.True(t, r.FourEyes)
		assert.Equal(t, "rotate the keys", r.Purpose)
		assert.Equal(t, labels, r.Metadata)
		assert.Equal(t, []string{"bob", "group:ops"}, r.Approvers)
	}
	check(r)
	e.Unchanged(t, r)
	r, err = e.Store.Claim(ctx, r.ID, "w1")
	require.NoError(t, err)
	sp, _ := e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	check(r)
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	check(got)
	r.Metadata["ticket"] = "changed"
	got, err = e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "OPS-1", got.Metadata["ticket"], "a returned run is a copy")

	plain, err := e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Request: json.RawMessage(`{"prompt":"x"}`)})
	require.NoError(t, err)
	assert.False(t, plain.FourEyes)
	assert.Nil(t, plain.Metadata)
	e.Unchanged(t, plain)
	for _, req := range []string{`{"prompt":"x","four_eyes":true}`, `["not","an","object"]`} {
		old, err := e.Store.Create(ctx, runs.NewRun{Initiator: "alice", Request: json.RawMessage(req)})
		require.NoError(t, err)
		got, err := e.Store.Get(ctx, old.ID)
		require.NoError(t, err)
		assert.True(t, got.FourEyes, "a row without the field whose request is %s must read as four-eyes", req)
	}
}

func testNotFound(t *testing.T, e *Env) {
	ctx := t.Context()
	_, err := e.Store.Get(ctx, "nope")
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.Claim(ctx, "nope", "w1")
	AssertCode(t, runs.ENotFound, err)
	ghost := &runs.Run{ID: "ghost", Status: runs.StatusRunning, Version: 3, LeaseOwner: "w1", LastSeq: 2}
	_, err = e.Store.RenewLease(ctx, ghost, "w1")
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.RecordStep(ctx, ghost, "w1", loop.Step{Kind: loop.StepModelTurn})
	AssertCode(t, runs.ENotFound, err)
	sp, _ := e.Suspension(ghost, "s1")
	_, err = e.Store.Suspend(ctx, ghost, "w1", sp)
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.Settle(ctx, ghost, "w1", runs.Settlement{Status: runs.StatusCompleted})
	AssertCode(t, runs.ENotFound, err)
	waitingGhost := &runs.Run{ID: "ghost", Status: runs.StatusWaiting, Version: 4, SuspensionID: "s1", ApprovalDeadline: e.Clock.Now().Add(time.Hour)}
	_, err = e.Store.Decide(ctx, waitingGhost, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.Cancel(ctx, waitingGhost, "alice")
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.LookupToken(ctx, HashToken(NewToken()))
	AssertCode(t, runs.ENotFound, err)
	_, err = e.Store.LookupToken(ctx, "not-a-hash")
	AssertCode(t, runs.ENotFound, err)
	evs, err := e.Store.Events(ctx, "nope", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, evs)
	require.NoError(t, e.Store.Purge(ctx, "nope"), "purging what is gone is not an error")
	_, err = e.Store.Get(ctx, "ghost")
	AssertCode(t, runs.ENotFound, err)
}

func testClaimRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	running := e.Running(t)
	waiting, _ := e.Waiting(t)
	done := e.Running(t)
	done, err := e.Store.Settle(ctx, done, "w1", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	for _, r := range []*runs.Run{running, waiting, done} {
		t.Run(string(r.Status), func(t *testing.T) {
			_, err := e.Store.Claim(ctx, r.ID, "w9")
			AssertCode(t, runs.EConflict, err)
			e.Unchanged(t, r)
		})
	}
	q := e.Queued(t)
	_, err = e.Store.Claim(ctx, q.ID, "")
	AssertCode(t, runs.EInvalid, err)
	e.Unchanged(t, q)
}

func testLeaseGuards(t *testing.T, e *Env) {
	ctx := t.Context()
	stale := e.Running(t)
	cur, err := e.Store.RecordStep(ctx, stale, "w1", loop.Step{Kind: loop.StepModelTurn})
	require.NoError(t, err)
	sp, _ := e.Suspension(cur, "s1")
	ops := []struct {
		name string
		fn   func(r *runs.Run, owner string) (*runs.Run, error)
	}{
		{"RenewLease", func(r *runs.Run, o string) (*runs.Run, error) { return e.Store.RenewLease(ctx, r, o) }},
		{"RecordStep", func(r *runs.Run, o string) (*runs.Run, error) {
			return e.Store.RecordStep(ctx, r, o, loop.Step{Kind: loop.StepModelTurn})
		}},
		{"MarkPendingEffect", func(r *runs.Run, o string) (*runs.Run, error) { return e.Store.MarkPendingEffect(ctx, r, o, "call-9") }},
		{"Suspend", func(r *runs.Run, o string) (*runs.Run, error) { return e.Store.Suspend(ctx, r, o, sp) }},
		{"Settle", func(r *runs.Run, o string) (*runs.Run, error) {
			return e.Store.Settle(ctx, r, o, runs.Settlement{Status: runs.StatusCompleted})
		}},
	}
	for _, op := range ops {
		t.Run(op.name+"/other owner", func(t *testing.T) {
			_, err := op.fn(cur, "w2")
			AssertCode(t, runs.EConflict, err)
			e.Unchanged(t, cur)
		})
		t.Run(op.name+"/stale version", func(t *testing.T) {
			_, err := op.fn(stale, "w1")
			AssertCode(t, runs.EConflict, err)
			e.Unchanged(t, cur)
		})
	}
	// A stale-version suspend is found out only by the row write, after the
	// blob put: the orphan blob is swept with the run's prefix, and the row
	// never points at it (checked by Unchanged above).

	t.Run("fences", func(t *testing.T) {
		r, err := e.Store.MarkPendingEffect(ctx, cur, "w1", "call-1")
		require.NoError(t, err)
		_, err = e.Store.MarkPendingEffect(ctx, r, "w1", "call-2")
		AssertCode(t, runs.EConflict, err)
		_, err = e.Store.ClearPendingEffect(ctx, r, "w1", "call-2", true)
		AssertCode(t, runs.EConflict, err)
		r2, err := e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "call-2", Effect: loop.EffectRead})
		require.NoError(t, err)
		assert.Equal(t, "call-1", r2.PendingEffect, "another call's result leaves the fence")
		r = r2
		_, err = e.Store.Suspend(ctx, r, "w1", sp)
		AssertCode(t, runs.EConflict, err)
		_, err = e.Store.ClearPendingEffect(ctx, r, "w2", "call-1", true)
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, r)
		r, err = e.Store.ClearPendingEffect(ctx, r, "w1", "call-1", true)
		require.NoError(t, err)
		assert.Empty(t, r.PendingEffect)
		e.Unchanged(t, r)
	})
	t.Run("missing owner", func(t *testing.T) {
		_, err := e.Store.RenewLease(ctx, cur, "")
		AssertCode(t, runs.EInvalid, err)
	})
}

func testStaleLease(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	r, err := e.Store.MarkPendingEffect(ctx, r, "w1", "call-1")
	require.NoError(t, err)
	_, err = e.Store.Settle(ctx, r, "", runs.Settlement{Status: runs.StatusFailed, Reason: loop.ReasonInterruptedWrite})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	e.Clock.Advance(LeaseTTL)
	due, _, err := e.Store.Due(ctx, e.Clock.Now(), 10, "")
	require.NoError(t, err)
	require.Len(t, due, 1, "a stale lease is due")
	assert.Equal(t, r.ID, due[0].ID)
	_, err = e.Store.Settle(ctx, due[0], "", runs.Settlement{Status: runs.StatusFailed})
	AssertCode(t, runs.EInvalid, err)
	r, err = e.Store.Settle(ctx, due[0], "", runs.Settlement{Status: runs.StatusFailed, Reason: loop.ReasonInterruptedWrite})
	require.NoError(t, err)
	assert.Equal(t, runs.StatusFailed, r.Status)
	assert.Equal(t, loop.ReasonInterruptedWrite, r.Reason)
	assert.Equal(t, "call-1", r.PendingEffect, "the fence stays on the row for the audit")
	evs, err := e.Store.Events(ctx, r.ID, r.LastSeq-1, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "purge", evs[0].Actor)
	assert.JSONEq(t, `{"status":"FAILED","reason":"interrupted_write","lease_owner":"w1","pending_effect":"call-1"}`, string(evs[0].Data),
		"the audit names the worker and the write whose outcome is unknown")

	// The worker itself ends its run with a fence stamped (a write whose
	// outcome its tool reported unknown): its settled event names the call.
	r = e.Running(t)
	r, err = e.Store.MarkPendingEffect(ctx, r, "w1", "call-2")
	require.NoError(t, err)
	r, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusFailed, Reason: loop.ReasonInterruptedWrite})
	require.NoError(t, err)
	evs, err = e.Store.Events(ctx, r.ID, r.LastSeq-1, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "w1", evs[0].Actor)
	assert.JSONEq(t, `{"status":"FAILED","reason":"interrupted_write","pending_effect":"call-2"}`, string(evs[0].Data),
		"the worker's own settle names the write whose outcome is unknown")
}

func testSuspendRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	valid, _ := e.Suspension(r, "s1")
	tests := []struct {
		name   string
		change func(sp *runs.Suspension)
	}{
		{"no state", func(sp *runs.Suspension) { sp.State = nil }},
		{"state of another run", func(sp *runs.Suspension) { sp.State.RunID = "other" }},
		{"no id", func(sp *runs.Suspension) { sp.State.SuspensionID = "" }},
		{"no digest", func(sp *runs.Suspension) { sp.State.TurnDigest = "" }},
		{"no pending calls", func(sp *runs.Suspension) { sp.State.PendingCalls = nil }},
		{"duplicate call ids", func(sp *runs.Suspension) { sp.State.PendingCalls[1].ID = sp.State.PendingCalls[0].ID }},
		{"call without tool", func(sp *runs.Suspension) { sp.State.PendingCalls[0].Name = "" }},
		{"input not JSON", func(sp *runs.Suspension) { sp.State.PendingCalls[0].Input = json.RawMessage(`{"to":`) }},
		{"deadline passed", func(sp *runs.Suspension) { sp.Deadline = e.Clock.Now() }},
		{"reminder after deadline", func(sp *runs.Suspension) { sp.RemindAt = sp.Deadline.Add(time.Second) }},
		{"bad token hash", func(sp *runs.Suspension) { sp.Tokens[0].Hash = "abc" }},
		{"token without approver", func(sp *runs.Suspension) { sp.Tokens[0].Approver = "" }},
		{"same token twice", func(sp *runs.Suspension) { sp.Tokens[1].Hash = sp.Tokens[0].Hash }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := valid
			sp.State = SuspendedState(r.ID, "s1")
			sp.Tokens = slices.Clone(valid.Tokens)
			tt.change(&sp)
			_, err := e.Store.Suspend(ctx, r, "w1", sp)
			AssertCode(t, runs.EInvalid, err)
			e.Unchanged(t, r)
		})
	}
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "refused suspensions store no blob")
	_, err := e.Store.Suspend(ctx, r, "w1", valid)
	require.NoError(t, err, "the run still suspends after the refusals")
}

// bigCall returns a held write call whose input carries a text of about n
// bytes that gzip cannot shrink, and a preview of about n bytes.
func bigCall(id string, n int) (loop.PendingCall, string) {
	text := Incompressible(n)
	in := json.RawMessage(`{"path":"pages/` + id + `.md","text":` + string(text) + `}`)
	preview := "--- /dev/null\n+++ b/pages/" + id + ".md\n@@ -0,0 +1 @@\n+" + string(text[1:len(text)-1]) + "\n"
	return loop.PendingCall{ID: id, Name: "write_document", Input: in, NeedsApproval: true, Effect: loop.EffectWrite}, preview
}

// withCalls replaces a suspension's held turn by calls and their previews.
func withCalls(st *loop.SuspendedState, calls []loop.PendingCall, previews map[string]string) {
	uses := make([]loop.Block, len(calls))
	for i, c := range calls {
		uses[i] = loop.ToolUseBlock(c.ID, c.Name, c.Input)
	}
	st.Transcript.Messages[1] = loop.Message{Role: loop.RoleAssistant, Content: uses}
	st.PendingCalls, st.Previews = calls, previews
	st.ToolHashes = map[string]string{"write_document": "h3", "read_doc": "h2"}
}

// testLargeHeldTurn: a held write of about 1 MB (the document tools'
// limit) suspends; the row keeps a bounded, marked summary and the state
// keeps every byte, which HeldCall returns.
func testLargeHeldTurn(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	big, preview := bigCall("call-1", 1<<20)
	small := sp.State.PendingCalls[1]
	withCalls(sp.State, []loop.PendingCall{big, small}, map[string]string{"call-1": preview})
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err, "a 1 MB write suspends")
	assert.Equal(t, runs.StatusWaiting, r.Status)

	row, err := json.Marshal(r.PendingCalls)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(row), runs.MaxPendingCallsSize, "the row's summary is bounded")
	got := r.PendingCalls[0]
	assert.True(t, got.InputTruncated)
	assert.Equal(t, len(big.Input), got.InputSize)
	assert.True(t, json.Valid(got.Input), "a shortened input is still JSON")
	assert.Contains(t, string(got.Input), `"path":"pages/call-1.md"`, "short values are kept whole")
	assert.True(t, got.PreviewTruncated)
	assert.Equal(t, len(preview), got.PreviewSize)
	assert.True(t, strings.HasPrefix(got.Preview, preview[:1000]))
	assert.Contains(t, got.Preview, fmt.Sprintf("of %d bytes shown", len(preview)))
	assert.Equal(t, runs.CallSummary{ID: small.ID, Tool: small.Name, Input: small.Input, InputSize: len(small.Input), Effect: loop.EffectRead}, r.PendingCalls[1], "a small call is kept whole")

	fresh, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r.PendingCalls, fresh.PendingCalls, "the summary round-trips through the store")
	call, pre, err := e.Store.HeldCall(ctx, fresh, "call-1")
	require.NoError(t, err)
	assert.Equal(t, string(big.Input), string(call.Input), "the state keeps the whole input")
	assert.Equal(t, preview, pre, "the state keeps the whole preview")
	_, pre, err = e.Store.HeldCall(ctx, fresh, "call-2")
	require.NoError(t, err)
	assert.Empty(t, pre)

	_, _, err = e.Store.HeldCall(ctx, fresh, "call-9")
	AssertCode(t, runs.ENotFound, err)
	r, err = e.Store.Decide(ctx, fresh, runs.NewDecision{SuspensionID: "s1", Decider: "carol", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	_, _, err = e.Store.HeldCall(ctx, r, "call-1")
	AssertCode(t, runs.EConflict, err)
}

// testStateTooLarge: a held turn whose state is over MaxStateSize is
// refused with ETooLarge, naming the largest call and the limit; nothing
// is stored.
func testStateTooLarge(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	var calls []loop.PendingCall
	previews := map[string]string{}
	for _, id := range []string{"call-a", "call-b", "call-c"} {
		c, p := bigCall(id, 1<<20)
		calls, previews[id] = append(calls, c), p
	}
	withCalls(sp.State, calls, previews)
	_, err := e.Store.Suspend(ctx, r, "w1", sp)
	AssertCode(t, runs.ETooLarge, err)
	msg := runs.ErrorMessage(err)
	assert.Contains(t, msg, fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	assert.Contains(t, msg, fmt.Sprintf("call call-a (write_document) input %d bytes, preview %d bytes", len(calls[0].Input), len(previews["call-a"])))
	e.Unchanged(t, r)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "a refused state stores no blob")

	// A segment's checkpoint over the limit is refused the same way, and
	// says it is a checkpoint.
	big := make([]byte, runs.MaxStateSize+(1<<20))
	_, _ = rand.Read(big)
	blob, _ := json.Marshal(map[string][]byte{"transcript": big})
	_, err = e.Store.Checkpoint(ctx, r, "w1", runs.SegmentEnd{State: blob})
	AssertCode(t, runs.ETooLarge, err)
	assert.Contains(t, runs.ErrorMessage(err), "checkpoint of run "+r.ID)
	assert.Contains(t, runs.ErrorMessage(err), fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	e.Unchanged(t, r)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "a refused checkpoint stores no blob")
}

// testManyHeldCalls: the most calls a held turn may have, each with a
// large input and preview, still fit the row.
func testManyHeldCalls(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	var calls []loop.PendingCall
	previews := map[string]string{}
	for i := range runs.MaxPendingCalls {
		c, p := bigCall(fmt.Sprintf("call-%02d-%s", i, strings.Repeat("x", 200)), 20<<10)
		calls, previews[c.ID] = append(calls, c), p
	}
	withCalls(sp.State, calls, previews)
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	row, err := json.Marshal(r.PendingCalls)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(row), runs.MaxPendingCallsSize)
	require.Len(t, r.PendingCalls, runs.MaxPendingCalls)
	for _, c := range r.PendingCalls {
		assert.True(t, c.InputTruncated && c.PreviewTruncated, "call %s is marked truncated", c.ID)
	}
}

// Incompressible returns a JSON string that gzip cannot shrink below n bytes.
func Incompressible(n int) []byte {
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	b, _ := json.Marshal(raw) // base64
	return b
}

func testResuspend(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.Waiting(t)
	tok, err := e.Store.LookupToken(ctx, HashToken(raws[1]))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "carol", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)

	sp, _ := e.Suspension(r, "s1")
	_, err = e.Store.Suspend(ctx, r, "w2", sp)
	AssertCode(t, runs.EInvalid, err)
	e.Unchanged(t, r)

	sp, raws2 := e.Suspension(r, "s2")
	r, err = e.Store.Suspend(ctx, r, "w2", sp)
	require.NoError(t, err)
	assert.Equal(t, "s2", r.SuspensionID)
	assert.Nil(t, r.Decision, "a new suspension clears the last decision")
	assert.Empty(t, r.DecidedBy)
	assert.Empty(t, r.TokenHashes, "the row lists no tokens, however many suspensions issued them")
	for _, raw := range append(raws, raws2...) {
		_, err := e.Store.LookupToken(ctx, HashToken(raw))
		require.NoError(t, err, "every token issued stays until the run is purged")
	}

	_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: Approve})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	tok2, err := e.Store.LookupToken(ctx, HashToken(raws2[1]))
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s2", Via: runs.ViaLink, Token: tok2, Decision: loop.Decision{TurnDigest: "digest-s2", Action: loop.ActionDeny}})
	require.NoError(t, err)
	assert.Equal(t, "carol", r.DecidedBy)
}

func testDecideRefusals(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.Waiting(t)
	body := Approve
	tests := []struct {
		name string
		d    runs.NewDecision
		code string
	}{
		{"other suspension", runs.NewDecision{SuspensionID: "s0", Decider: "bob", Via: runs.ViaAPI, Decision: body}, runs.EConflict},
		{"no suspension", runs.NewDecision{Decider: "bob", Via: runs.ViaAPI, Decision: body}, runs.EInvalid},
		{"no decider", runs.NewDecision{SuspensionID: "s1", Via: runs.ViaAPI, Decision: body}, runs.EInvalid},
		{"unknown channel", runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: "fax", Decision: body}, runs.EInvalid},
		{"link without token", runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaLink, Decision: body}, runs.EInvalid},
		{"empty decision", runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI}, runs.EInvalid},
		{"decision too large", runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI,
			Decision: loop.Decision{Action: loop.ActionDeny, Message: string(make([]byte, runs.MaxDecisionSize))}}, runs.ETooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Store.Decide(ctx, r, tt.d)
			AssertCode(t, tt.code, err)
			e.Unchanged(t, r)
		})
	}

	t.Run("decided twice", func(t *testing.T) {
		w, _ := e.Waiting(t)
		d := runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: body}
		decided, err := e.Store.Decide(ctx, w, d)
		require.NoError(t, err)
		_, err = e.Store.Decide(ctx, w, d)
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, decided)
		_, err = e.Store.Decide(ctx, decided, d)
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, decided)
	})
	t.Run("window closed", func(t *testing.T) {
		e.Clock.Advance(989 * time.Millisecond)
		w, _ := e.Waiting(t)
		e.Clock.Advance(time.Hour + 5*time.Millisecond)
		_, err := e.Store.Decide(ctx, w, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: body})
		AssertCode(t, runs.EGone, err)
		// The deadline as kept, to the millisecond: not the second before it.
		assert.Contains(t, runs.ErrorMessage(err), "closed at "+w.ApprovalDeadline.UTC().Format("2006-01-02T15:04:05.000Z"))
		e.Unchanged(t, w)
	})
}

func testDecideThroughLink(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.Waiting(t)
	other, otherRaws := e.Waiting(t)
	tok, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	otherTok, err := e.Store.LookupToken(ctx, HashToken(otherRaws[0]))
	require.NoError(t, err)
	body := Approve

	_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: otherTok, Decision: body})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)
	_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "carol", Via: runs.ViaLink, Token: tok, Decision: body})
	AssertCode(t, runs.EInvalid, err)
	e.Unchanged(t, r)

	// A forged token the store never issued cannot decide.
	forged := &runs.ApprovalToken{Hash: HashToken(NewToken()), RunID: r.ID, SuspensionID: "s1", Approver: "bob", ExpiresAt: r.ApprovalDeadline}
	_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: forged, Decision: body})
	AssertCode(t, runs.ENotFound, err)
	e.Unchanged(t, r)

	// A token whose use was recorded elsewhere meanwhile (stale copy) conflicts.
	decided, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: body})
	require.NoError(t, err)
	_, err = e.Store.Decide(ctx, other, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: otherTok, Decision: body})
	require.NoError(t, err)
	used, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
	require.NoError(t, err)
	AssertCode(t, runs.EConflict, used.Usable(e.Clock.Now()))
	e.Unchanged(t, decided)
}

func testDecideRetry(t *testing.T, e *Env) {
	ctx := t.Context()
	read, _ := e.Waiting(t) // the API handler read the run ...
	notified, err := e.Store.RecordNotification(ctx, read, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent})
	require.NoError(t, err) // ... and the worker recorded the notification meanwhile
	r, err := e.Store.Decide(ctx, read, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err, "a version-only move must not refuse a decision on the same suspension")
	assert.Equal(t, notified.Version+1, r.Version)
	assert.Equal(t, runs.NotificationSent, r.Notification, "the retry builds on the fresh row")
	e.Unchanged(t, r)
}

func testLoadStateFaults(t *testing.T, e *Env) {
	ctx := t.Context()
	t.Run("corrupted", func(t *testing.T) {
		r, _ := e.Waiting(t)
		e.H.PutBlob(t, r.State.Key, []byte("definitely not gzip"))
		_, err := e.Store.LoadState(ctx, r)
		AssertCode(t, runs.EInternal, err)
		e.Unchanged(t, r)
	})
	t.Run("other content", func(t *testing.T) {
		r, _ := e.Waiting(t)
		_, blob, err := runs.EncodeBlob(r.ID, []byte(`{"tampered":true}`))
		require.NoError(t, err)
		e.H.PutBlob(t, r.State.Key, blob)
		_, err = e.Store.LoadState(ctx, r)
		AssertCode(t, runs.EInternal, err)
		e.Unchanged(t, r)
	})
	t.Run("missing", func(t *testing.T) {
		r, _ := e.Waiting(t)
		e.H.DeleteBlob(t, r.State.Key)
		_, err := e.Store.LoadState(ctx, r)
		AssertCode(t, runs.EGone, err)
		e.Unchanged(t, r)
	})
	t.Run("no state", func(t *testing.T) {
		r := e.Queued(t)
		_, err := e.Store.LoadState(ctx, r)
		AssertCode(t, runs.ENotFound, err)
		e.Unchanged(t, r)
	})
}

func testTerminal(t *testing.T, e *Env) {
	ctx := t.Context()
	completed, err := e.Store.Settle(ctx, e.Running(t), "w1", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	failed, err := e.Store.Settle(ctx, e.Running(t), "w1", runs.Settlement{Status: runs.StatusFailed, Reason: loop.ReasonProviderFailed})
	require.NoError(t, err)
	cancelled, err := e.Store.Cancel(ctx, e.Queued(t), "alice")
	require.NoError(t, err)
	w, _ := e.Waiting(t)
	e.Clock.Advance(time.Hour)
	expired, err := e.Store.Expire(ctx, w)
	require.NoError(t, err)

	for _, r := range []*runs.Run{completed, failed, cancelled, expired} {
		t.Run(string(r.Status), func(t *testing.T) {
			assert.True(t, r.Status.Terminal())
			asRunning, asWaiting := *r, *r
			asRunning.Status, asRunning.LeaseOwner = runs.StatusRunning, "w1"
			asWaiting.Status, asWaiting.SuspensionID, asWaiting.ApprovalDeadline = runs.StatusWaiting, "s1", e.Clock.Now().Add(time.Hour)
			attempts := map[string]func() error{
				"Claim":  func() error { _, err := e.Store.Claim(ctx, r.ID, "w9"); return err },
				"Cancel": func() error { _, err := e.Store.Cancel(ctx, r, "alice"); return err },
				"Expire": func() error { _, err := e.Store.Expire(ctx, r); return err },
				"Settle": func() error {
					_, err := e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
					return err
				},
				"Decide": func() error {
					_, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
					return err
				},
				"RecordNotification": func() error {
					_, err := e.Store.RecordNotification(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent})
					return err
				},
				"forged RUNNING copy": func() error {
					_, err := e.Store.RecordStep(ctx, &asRunning, "w1", loop.Step{Kind: loop.StepModelTurn})
					return err
				},
				"forged WAITING copy": func() error {
					_, err := e.Store.Decide(ctx, &asWaiting, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
					return err
				},
			}
			for name, attempt := range attempts {
				AssertCode(t, runs.EConflict, attempt())
				e.Unchanged(t, r)
				_ = name
			}
		})
	}
}

func testCancel(t *testing.T, e *Env) {
	ctx := t.Context()
	t.Run("queued", func(t *testing.T) {
		r, err := e.Store.Cancel(ctx, e.Queued(t), "alice")
		require.NoError(t, err)
		assert.Equal(t, runs.StatusCancelled, r.Status)
		assert.Equal(t, loop.ReasonCancelled, r.Reason)
		assert.Equal(t, r.RetainUntil, r.DueAt)
		e.Unchanged(t, r)
	})
	t.Run("running: the worker's next write conflicts", func(t *testing.T) {
		worker := e.Running(t)
		r, err := e.Store.Cancel(ctx, worker, "alice")
		require.NoError(t, err)
		_, err = e.Store.RecordStep(ctx, worker, "w1", loop.Step{Kind: loop.StepModelTurn})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, r)
	})
	t.Run("running with writes in flight: the cancelled event names them", func(t *testing.T) {
		// A cancel that lands while a worker's write runs (fence stamped),
		// or after a write took effect but before its step was recorded:
		// the worker can record nothing more, so the cancel says it.
		worker := e.Running(t)
		worker, err := e.Store.MarkPendingEffect(ctx, worker, "w1", "c1")
		require.NoError(t, err)
		worker, err = e.Store.ClearPendingEffect(ctx, worker, "w1", "c1", true)
		require.NoError(t, err)
		worker, err = e.Store.MarkPendingEffect(ctx, worker, "w1", "c2")
		require.NoError(t, err)
		r, err := e.Store.Cancel(ctx, worker, "alice")
		require.NoError(t, err)
		_, err = e.Store.ClearPendingEffect(ctx, worker, "w1", "c2", true)
		AssertCode(t, runs.EConflict, err)
		evs, err := e.Store.Events(ctx, r.ID, r.LastSeq-1, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, runs.EventCancelled, evs[0].Type)
		assert.JSONEq(t, `{"lease_owner":"w1","pending_effect":"c2","wrote_since_claim":true}`, string(evs[0].Data))

		// Nothing in flight: the cancelled event names the worker only
		// (its claim's event may not be on record: StampFence).
		r, err = e.Store.Cancel(ctx, e.Running(t), "alice")
		require.NoError(t, err)
		evs, err = e.Store.Events(ctx, r.ID, r.LastSeq-1, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.JSONEq(t, `{"lease_owner":"w1"}`, string(evs[0].Data))

		// A run not running: no worker to name, no data.
		r, err = e.Store.Cancel(ctx, e.Queued(t), "alice")
		require.NoError(t, err)
		evs, err = e.Store.Events(ctx, r.ID, r.LastSeq-1, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Empty(t, evs[0].Data)
	})
	t.Run("running with a stale copy retries", func(t *testing.T) {
		stale := e.Running(t)
		_, err := e.Store.RecordStep(ctx, stale, "w1", loop.Step{Kind: loop.StepModelTurn})
		require.NoError(t, err)
		r, err := e.Store.Cancel(ctx, stale, "alice")
		require.NoError(t, err)
		assert.Equal(t, runs.StatusCancelled, r.Status)
		assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed, runs.EventModelTurn, runs.EventCancelled}, e.eventTypes(t, r.ID))
	})
	t.Run("waiting: blob deleted, links dead", func(t *testing.T) {
		w, raws := e.Waiting(t)
		r, err := e.Store.Cancel(ctx, w, "alice")
		require.NoError(t, err)
		assert.True(t, r.State.IsZero())
		assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)))
		tok, err := e.Store.LookupToken(ctx, HashToken(raws[0]))
		require.NoError(t, err)
		_, err = e.Store.Decide(ctx, w, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: Approve})
		AssertCode(t, runs.EConflict, err)
		e.Unchanged(t, r)
	})
	t.Run("resuming", func(t *testing.T) {
		w, _ := e.Waiting(t)
		w, err := e.Store.Decide(ctx, w, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
		require.NoError(t, err)
		r, err := e.Store.Cancel(ctx, w, "alice")
		require.NoError(t, err)
		_, err = e.Store.Claim(ctx, r.ID, "w2")
		AssertCode(t, runs.EConflict, err)
	})
	t.Run("no actor", func(t *testing.T) {
		q := e.Queued(t)
		_, err := e.Store.Cancel(ctx, q, "")
		AssertCode(t, runs.EInvalid, err)
		e.Unchanged(t, q)
	})
}

func testExpire(t *testing.T, e *Env) {
	ctx := t.Context()
	w, _ := e.Waiting(t)
	e.Clock.Advance(time.Hour - time.Millisecond)
	_, err := e.Store.Expire(ctx, w)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, w)
	_, err = e.Store.Expire(ctx, e.Running(t))
	AssertCode(t, runs.EConflict, err)

	e.Clock.Advance(time.Millisecond)
	r, err := e.Store.Expire(ctx, w)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusExpired, r.Status)
	assert.Equal(t, loop.ReasonApprovalExpired, r.Reason)
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "expiry deletes the state blob")
	e.Unchanged(t, r)
	assert.Equal(t, runs.EventExpired, e.eventTypes(t, r.ID)[r.LastSeq-1])
}

func testEvents(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	var err error
	for i := range 25 {
		r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepModelTurn, Iteration: i + 1})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(27), r.LastSeq)
	var all []runs.Event
	after := int64(0)
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, err := e.Store.Events(ctx, r.ID, after, 10)
		require.NoError(t, err)
		all = append(all, page...)
		if len(page) < 10 {
			break
		}
		after = page[len(page)-1].Seq
	}
	require.Len(t, all, 27)
	for i, ev := range all {
		assert.Equal(t, int64(i+1), ev.Seq)
		assert.Equal(t, r.ID, ev.RunID)
		if i >= 2 {
			var st loop.Step
			require.NoError(t, json.Unmarshal(ev.Data, &st))
			assert.Equal(t, loop.Step{Kind: loop.StepModelTurn, Iteration: i - 1}, st, "events keep write order")
		}
	}
	page, err := e.Store.Events(ctx, r.ID, 27, 10)
	require.NoError(t, err)
	assert.Empty(t, page)
}

func testDue(t *testing.T, e *Env) {
	ctx := t.Context()
	t0 := e.Clock.Now()
	queued := e.Queued(t)   // due t0+2m (dispatch grace)
	running := e.Running(t) // due t0+1m (lease)
	waiting := e.Running(t)
	sp, _ := e.Suspension(waiting, "s1")
	sp.RemindAt = t0.Add(30 * time.Minute)
	waiting, err := e.Store.Suspend(ctx, waiting, "w1", sp) // due t0+30m (reminder), then t0+1h
	require.NoError(t, err)
	done, err := e.Store.Settle(ctx, e.Running(t), "w1", runs.Settlement{Status: runs.StatusCompleted}) // due t0+24h
	require.NoError(t, err)

	dueIDs := func(at time.Time, limit int) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 20)
			rs, next, err := e.Store.Due(ctx, at, limit, cursor)
			require.NoError(t, err)
			require.LessOrEqual(t, len(rs), limit)
			for _, r := range rs {
				require.False(t, r.DueAt.After(at), "run %s due at %s, after %s", r.ID, r.DueAt, at)
				ids = append(ids, r.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }

	tests := []struct {
		name string
		at   time.Duration
		want []string
	}{
		{"nothing due yet", 30 * time.Second, nil},
		{"lease expiry", time.Minute, sorted(running.ID)},
		{"dispatch grace", 2 * time.Minute, sorted(running.ID, queued.ID)},
		{"reminder", 30 * time.Minute, sorted(running.ID, queued.ID, waiting.ID)},
		{"retention", 25 * time.Hour, sorted(running.ID, queued.ID, waiting.ID, done.ID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, dueIDs(t0.Add(tt.at), 100))
			assert.Equal(t, tt.want, dueIDs(t0.Add(tt.at), 1), "paging one by one")
		})
	}

	_, err = e.Store.RecordNotification(ctx, waiting, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Reminder: true})
	require.NoError(t, err)
	assert.Equal(t, sorted(running.ID, queued.ID), dueIDs(t0.Add(30*time.Minute), 100), "after the reminder the run is due at its deadline")
	assert.Equal(t, sorted(running.ID, queued.ID, waiting.ID), dueIDs(t0.Add(time.Hour), 100))

	// Renewing the lease moves the run's deadline.
	e.Clock.Advance(90 * time.Second)
	_, err = e.Store.RenewLease(ctx, running, "w1")
	require.NoError(t, err)
	assert.Equal(t, sorted(queued.ID), dueIDs(t0.Add(2*time.Minute), 100))
}

func testRedispatch(t *testing.T, e *Env) {
	ctx := t.Context()
	q := e.Queued(t)
	e.Clock.Advance(DispatchGrace)
	due, _, err := e.Store.Due(ctx, e.Clock.Now(), 10, "")
	require.NoError(t, err)
	require.Len(t, due, 1, "a lost dispatch is due")
	r, err := e.Store.Redispatch(ctx, due[0], "")
	require.NoError(t, err)
	assert.Equal(t, e.Clock.Now().UTC().Truncate(time.Millisecond).Add(DispatchGrace), r.DueAt, "the next sweep waits another grace period")
	due, _, err = e.Store.Due(ctx, e.Clock.Now(), 10, "")
	require.NoError(t, err)
	assert.Empty(t, due)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventRedispatched}, e.eventTypes(t, q.ID))

	_, err = e.Store.Redispatch(ctx, q, "purge")
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)
	claimed, err := e.Store.Claim(ctx, q.ID, "w1")
	require.NoError(t, err)
	_, err = e.Store.Redispatch(ctx, r, "purge")
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.Redispatch(ctx, claimed, "purge")
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, claimed)
}

func testRenotify(t *testing.T, e *Env) {
	ctx := t.Context()
	w, _ := e.Waiting(t)
	raw := NewToken()
	r, err := e.Store.Renotify(ctx, w, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Reminder: true},
		[]runs.TokenGrant{{Hash: HashToken(raw), Approver: "bob"}})
	require.NoError(t, err)
	assert.True(t, r.ReminderSent)
	assert.Equal(t, r.ApprovalDeadline, r.DueAt, "after the reminder the run is due at its deadline")
	assert.Empty(t, r.TokenHashes, "the reminder's token is not listed on the row")
	e.Unchanged(t, r)
	tok, err := e.Store.LookupToken(ctx, HashToken(raw))
	require.NoError(t, err)
	assert.Equal(t, "s1", tok.SuspensionID)
	assert.Equal(t, runs.EventReminded, e.eventTypes(t, r.ID)[r.LastSeq-1])

	_, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s0", State: runs.NotificationSent}, nil)
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: "maybe"}, nil)
	AssertCode(t, runs.EInvalid, err)
	// The grants are checked as a suspension's are: a malformed hash, a
	// grant without an approver or one hash twice is invalid; a hash
	// already stored is refused by the adapter's write. None changes
	// anything.
	dup := HashToken(NewToken())
	for _, tt := range []struct {
		grants []runs.TokenGrant
		want   string
	}{
		{[]runs.TokenGrant{{Hash: "abc", Approver: "bob"}}, runs.EInvalid},
		{[]runs.TokenGrant{{Hash: HashToken(NewToken())}}, runs.EInvalid},
		{[]runs.TokenGrant{{Hash: dup, Approver: "bob"}, {Hash: dup, Approver: "carol"}}, runs.EInvalid},
		{[]runs.TokenGrant{{Hash: HashToken(raw), Approver: "bob"}}, runs.EConflict},
	} {
		_, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent}, tt.grants)
		AssertCode(t, tt.want, err)
	}
	e.Unchanged(t, r)
	e.Clock.Advance(time.Hour)
	_, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent}, nil)
	AssertCode(t, runs.EGone, err)
	e.Unchanged(t, r)
	_, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: Approve})
	AssertCode(t, runs.EGone, err) // a reminder link expires with the window
}

func testPurge(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.Waiting(t)
	keep, keepRaws := e.Waiting(t)
	orphan := runs.RunPrefix(r.ID) + "state/orphan.json.gz"
	e.H.PutBlob(t, orphan, []byte("left by a failed suspend"))

	err := e.Store.Purge(ctx, r.ID)
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	r, err = e.Store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	require.NoError(t, e.Store.Purge(ctx, r.ID))

	_, err = e.Store.Get(ctx, r.ID)
	AssertCode(t, runs.ENotFound, err)
	evs, err := e.Store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	assert.Empty(t, evs)
	for _, raw := range raws {
		_, err = e.Store.LookupToken(ctx, HashToken(raw))
		AssertCode(t, runs.ENotFound, err)
	}
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)))
	due, _, err := e.Store.Due(ctx, e.Clock.Now().Add(100*Retention), 100, "")
	require.NoError(t, err)
	for _, d := range due {
		assert.NotEqual(t, r.ID, d.ID, "a purged run leaves the due index")
	}
	require.NoError(t, e.Store.Purge(ctx, r.ID), "purge is idempotent")

	// The other run is untouched.
	e.Unchanged(t, keep)
	assert.Len(t, e.eventTypes(t, keep.ID), 3)
	_, err = e.Store.LookupToken(ctx, HashToken(keepRaws[0]))
	require.NoError(t, err)
	_, err = e.Store.LoadState(ctx, keep)
	require.NoError(t, err)
}

func testConcurrentDecide(t *testing.T, e *Env) {
	ctx := t.Context()
	r, _ := e.Waiting(t)
	n := e.racers()
	var wins atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: fmt.Sprintf("approver-%d", i), Via: runs.ViaAPI, Decision: loop.Decision{Action: loop.ActionDeny, Message: fmt.Sprintf("no %d", i)}})
			errs[i] = err
			if err == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), wins.Load(), "exactly one decider wins")
	for _, err := range errs {
		if err != nil {
			AssertCode(t, runs.EConflict, err)
		}
	}
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, got.Status)
	assert.Equal(t, r.Version+1, got.Version)
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, 1, count(types, runs.EventDecision), "one decision event")
}

func testConcurrentLinkDecide(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.Waiting(t)
	toks := make([]*runs.ApprovalToken, len(raws))
	for i, raw := range raws {
		tok, err := e.Store.LookupToken(ctx, HashToken(raw))
		require.NoError(t, err)
		toks[i] = tok
	}
	n := e.racers()
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: toks[i%2], Decision: Approve})
			if err == nil {
				wins.Add(1)
			} else if runs.ErrorCode(err) != runs.EConflict {
				t.Errorf("decider %d: want conflict, got %v", i, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), wins.Load(), "exactly one link decision wins")
	used := 0
	for _, raw := range raws {
		tok, err := e.Store.LookupToken(ctx, HashToken(raw))
		require.NoError(t, err)
		if !tok.UsedAt.IsZero() {
			used++
		}
	}
	assert.Equal(t, 1, used, "only the winner's token is used")
}

func testConcurrentClaim(t *testing.T, e *Env) {
	ctx := t.Context()
	q := e.Queued(t)
	n := e.racers()
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			owner := fmt.Sprintf("worker-%d", i)
			_, err := e.Store.Claim(ctx, q.ID, owner)
			if err == nil {
				mu.Lock()
				winners = append(winners, owner)
				mu.Unlock()
			} else if runs.ErrorCode(err) != runs.EConflict {
				t.Errorf("claimer %d: want conflict, got %v", i, err)
			}
		})
	}
	wg.Wait()
	require.Len(t, winners, 1, "exactly one claimer holds the lease")
	got, err := e.Store.Get(ctx, q.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusRunning, got.Status)
	assert.Equal(t, winners[0], got.LeaseOwner)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventClaimed}, e.eventTypes(t, q.ID))
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// betweenReadAndWrite runs hook once, right after the next GetRun of the
// wrapped adapter returned: a write that lands between a transition's read
// and its conditional write.
type betweenReadAndWrite struct {
	runs.RowStore
	mu   sync.Mutex
	hook func()
}

func (b *betweenReadAndWrite) GetRun(ctx context.Context, id string) (*runs.Run, error) {
	r, err := b.RowStore.GetRun(ctx, id)
	b.mu.Lock()
	h := b.hook
	b.hook = nil
	b.mu.Unlock()
	if h != nil {
		h()
	}
	return r, err
}

// testClaimRetry: a write that moves only the version (a re-dispatch by the
// sweep, issue #10 item 1) between Claim's read and its write does not make
// the claim lose; one that makes the run unclaimable does.
func testClaimRetry(t *testing.T, e *Env) {
	ctx := t.Context()
	rows := &betweenReadAndWrite{RowStore: e.H.Rows}
	claimer := runs.NewStore(rows, e.H.States, runs.Options{Now: e.Clock.Now, LeaseTTL: LeaseTTL, DispatchGrace: DispatchGrace, Retention: Retention})
	q := e.Queued(t)
	rows.hook = func() {
		cur, err := e.Store.Get(ctx, q.ID)
		require.NoError(t, err)
		_, err = e.Store.Redispatch(ctx, cur, "purge")
		require.NoError(t, err)
	}
	got, err := claimer.Claim(ctx, q.ID, "w2")
	require.NoError(t, err, "a version-only move does not make the claim lose")
	assert.Equal(t, runs.StatusRunning, got.Status)
	assert.Equal(t, "w2", got.LeaseOwner)
	assert.Equal(t, []string{runs.EventRunStarted, runs.EventRedispatched, runs.EventClaimed}, e.eventTypes(t, q.ID))

	q = e.Queued(t)
	rows.hook = func() {
		_, err := e.Store.Claim(ctx, q.ID, "w1")
		require.NoError(t, err)
	}
	_, err = claimer.Claim(ctx, q.ID, "w2")
	assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "another claimer won meanwhile: %v", err)
	got, err = e.Store.Get(ctx, q.ID)
	require.NoError(t, err)
	assert.Equal(t, "w1", got.LeaseOwner)

	q = e.Queued(t)
	rows.hook = func() {
		cur, err := e.Store.Get(ctx, q.ID)
		require.NoError(t, err)
		_, err = e.Store.Cancel(ctx, cur, "alice")
		require.NoError(t, err)
	}
	_, err = claimer.Claim(ctx, q.ID, "w2")
	assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "cancelled meanwhile: %v", err)
}

// testWroteSinceClaim: whether a write took effect since the last claim is
// a typed field of the row, set in the write that clears the fence (or
// records a write's tool_executed step), kept by the adapter and reset by a
// claim; a run with it set is not reclaimed (issue #11 item 2).
func testWroteSinceClaim(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	assert.False(t, r.WroteSinceClaim)
	r, err := e.Store.MarkPendingEffect(ctx, r, "w1", "c1")
	require.NoError(t, err)
	assert.False(t, e.stored(t, r.ID).WroteSinceClaim, "a fence alone is not a write done")
	r, err = e.Store.ClearPendingEffect(ctx, r, "w1", "c1", false)
	require.NoError(t, err)
	assert.False(t, e.stored(t, r.ID).WroteSinceClaim, "a write that changed nothing")
	r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "r1", Effect: loop.EffectRead})
	require.NoError(t, err)
	assert.False(t, e.stored(t, r.ID).WroteSinceClaim, "a read")
	r, err = e.Store.MarkPendingEffect(ctx, r, "w1", "c2")
	require.NoError(t, err)
	r, err = e.Store.ClearPendingEffect(ctx, r, "w1", "c2", true)
	require.NoError(t, err)
	assert.True(t, r.WroteSinceClaim)
	assert.True(t, e.stored(t, r.ID).WroteSinceClaim, "the adapter keeps the field")
	r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "r2", Effect: loop.EffectRead})
	require.NoError(t, err)
	assert.True(t, e.stored(t, r.ID).WroteSinceClaim, "later steps keep it")

	e.Clock.Advance(LeaseTTL + time.Second)
	_, err = e.Store.Claim(ctx, r.ID, "w2")
	AssertCode(t, runs.EConflict, err)
	assert.Equal(t, "w1", e.stored(t, r.ID).LeaseOwner, "a run whose worker wrote is never reclaimed")

	// An unfenced write step sets it too; a claim resets it.
	r = e.Running(t)
	r, err = e.Store.RecordStep(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "w", Effect: loop.EffectWrite})
	require.NoError(t, err)
	assert.True(t, e.stored(t, r.ID).WroteSinceClaim)
	sp, _ := e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionDeny}})
	require.NoError(t, err)
	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)
	assert.False(t, r.WroteSinceClaim)
	assert.False(t, e.stored(t, r.ID).WroteSinceClaim, "a claim starts a lease with no write done")
}

// testCheckpoint: a segment ends with a checkpoint (blob first, then the
// row goes to RESUMING released, with counters and a checkpointed event,
// and back in the due index after the dispatch grace); the next claim is a
// continued one; a write's result is recorded with its checkpoint in the
// write that clears its fence, which leaves nothing to replay; a suspension
// and the end of the run drop the checkpoint.
func testCheckpoint(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	r, err := e.Store.MarkPendingEffect(ctx, r, "w1", "c1")
	require.NoError(t, err)
	_, err = e.Store.Checkpoint(ctx, r, "w1", runs.SegmentEnd{State: []byte(`{"at":1}`)})
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)
	_, err = e.Store.RecordEffect(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c2", Effect: loop.EffectWrite}, []byte(`{"at":1}`))
	AssertCode(t, runs.EConflict, err)
	_, err = e.Store.RecordEffect(ctx, r, "w2", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Effect: loop.EffectWrite}, []byte(`{"at":1}`))
	AssertCode(t, runs.EConflict, err)
	e.Unchanged(t, r)

	r, err = e.Store.RecordEffect(ctx, r, "w1", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Effect: loop.EffectWrite}, []byte(`{"at":1}`))
	require.NoError(t, err)
	assert.Empty(t, r.PendingEffect)
	assert.False(t, r.WroteSinceClaim, "the checkpoint holds the write's result")
	require.False(t, r.Checkpoint.IsZero())
	assert.Equal(t, r, e.stored(t, r.ID), "the adapter keeps the checkpoint ref")
	b, err := e.Store.LoadCheckpoint(ctx, r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":1}`, string(b))
	assert.Equal(t, runs.EventToolExecuted, e.eventTypes(t, r.ID)[len(e.eventTypes(t, r.ID))-1])

	e.Clock.Advance(time.Second)
	counters := loop.Counters{Iterations: 7, ModelCalls: 7, InputTokens: 700, OutputTokens: 70, ToolCalls: 6}
	_, err = e.Store.Checkpoint(ctx, r, "w2", runs.SegmentEnd{State: []byte(`{"at":2}`), Counters: counters})
	AssertCode(t, runs.EConflict, err)
	r, err = e.Store.Checkpoint(ctx, r, "w1", runs.SegmentEnd{State: []byte(`{"at":2}`), Counters: counters, Cause: "segment_budget"})
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, r.Status)
	assert.Empty(t, r.LeaseOwner)
	assert.Equal(t, counters, r.Counters)
	assert.Equal(t, r.UpdatedAt.Add(DispatchGrace), r.DueAt, "a lost dispatch of the next segment is due for the sweep")
	assert.Equal(t, r, e.stored(t, r.ID))
	b, err = e.Store.LoadCheckpoint(ctx, r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":2}`, string(b))
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventCheckpointed, types[len(types)-1])

	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)
	assert.Equal(t, runs.StatusRunning, r.Status)
	types = e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventContinued, types[len(types)-1])
	assert.False(t, r.Checkpoint.IsZero(), "the new worker continues from it")

	// A suspension supersedes the checkpoint; the end of the run drops it.
	sp, _ := e.Suspension(r, "s1")
	r, err = e.Store.Suspend(ctx, r, "w2", sp)
	require.NoError(t, err)
	assert.True(t, r.Checkpoint.IsZero())
	_, err = e.Store.LoadCheckpoint(ctx, r)
	AssertCode(t, runs.ENotFound, err)
	r = e.Running(t)
	r, err = e.Store.Checkpoint(ctx, r, "w1", runs.SegmentEnd{State: []byte(`{"at":3}`)})
	require.NoError(t, err)
	r, err = e.Store.Claim(ctx, r.ID, "w1")
	require.NoError(t, err)
	r, err = e.Store.Settle(ctx, r, "w1", runs.Settlement{Status: runs.StatusCompleted})
	require.NoError(t, err)
	assert.True(t, r.Checkpoint.IsZero())
	assert.Empty(t, e.H.BlobKeys(t, runs.RunPrefix(r.ID)), "the checkpoint blobs go with the run's state")
}

// testIdempotentFence: whether the fenced call may be made again is a
// typed field written with the fence; a run whose worker vanished with such
// a fence is taken over by a new worker (the fence stays for it to make the
// call again), one with any other fence is not.
func testIdempotentFence(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.Running(t)
	r, err := e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1", Idempotent: true, Checkpoint: []byte(`{"before":"c1"}`)})
	require.NoError(t, err)
	assert.True(t, r.PendingIdempotent)
	assert.Equal(t, r, e.stored(t, r.ID), "the adapter keeps the field")
	b, err := e.Store.LoadCheckpoint(ctx, r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"before":"c1"}`, string(b))
	assert.True(t, r.Reclaimable())

	e.Clock.Advance(LeaseTTL)
	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err, "an idempotent fence does not keep a new worker out")
	assert.Equal(t, "c1", r.PendingEffect, "the fence stays until the call is made again")
	assert.True(t, r.PendingIdempotent)
	types := e.eventTypes(t, r.ID)
	assert.Equal(t, runs.EventReclaimed, types[len(types)-1])
	_, err = e.Store.StampFence(ctx, r, "w2", runs.Fence{CallID: "c9"})
	AssertCode(t, runs.EConflict, err)
	r, err = e.Store.StampFence(ctx, r, "w2", runs.Fence{CallID: "c1", Idempotent: true})
	require.NoError(t, err, "the new worker stamps the same fence again")
	// A checkpoint may carry an idempotent fence over to the next segment.
	r, err = e.Store.Checkpoint(ctx, r, "w2", runs.SegmentEnd{State: []byte(`{"at":1}`)})
	require.NoError(t, err)
	assert.Equal(t, "c1", r.PendingEffect)
	r, err = e.Store.Claim(ctx, r.ID, "w3")
	require.NoError(t, err)
	r, err = e.Store.RecordStep(ctx, r, "w3", loop.Step{Kind: loop.StepToolExecuted, CallID: "c1", Effect: loop.EffectWrite})
	require.NoError(t, err)
	assert.Empty(t, r.PendingEffect)
	assert.False(t, r.PendingIdempotent, "cleared with the fence")

	// A plain fence keeps a new worker out.
	r = e.Running(t)
	r, err = e.Store.StampFence(ctx, r, "w1", runs.Fence{CallID: "c1"})
	require.NoError(t, err)
	assert.False(t, r.Reclaimable())
	e.Clock.Advance(LeaseTTL)
	_, err = e.Store.Claim(ctx, r.ID, "w2")
	AssertCode(t, runs.EConflict, err)
	assert.Equal(t, "w1", e.stored(t, r.ID).LeaseOwner)
}

// testReclaims: the times in a row a run was taken over from a vanished
// worker are a typed field of the row; a checkpoint (a segment's end or a
// write's result) and any other claim reset it; at runs.MaxReclaims the run
// is no longer taken over, and the sweep's reason for it is worker_lost.
func testReclaims(t *testing.T, e *Env) {
	ctx := t.Context()
	lastEvent := func(id string) runs.Event {
		t.Helper()
		evs, err := e.Store.Events(ctx, id, 0, 1000)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		return evs[len(evs)-1]
	}
	r := e.Running(t)
	assert.Zero(t, r.Reclaims)
	for i := 1; i <= runs.MaxReclaims; i++ {
		require.True(t, r.Reclaimable())
		e.Clock.Advance(LeaseTTL)
		var err error
		r, err = e.Store.Claim(ctx, r.ID, fmt.Sprintf("w%d", i+1))
		require.NoError(t, err, "take-over %d", i)
		assert.Equal(t, i, r.Reclaims)
		assert.Equal(t, r, e.stored(t, r.ID), "the adapter keeps the field")
		ev := lastEvent(r.ID)
		assert.Equal(t, runs.EventReclaimed, ev.Type)
		assert.Contains(t, string(ev.Data), fmt.Sprintf(`"reclaims":%d`, i))
	}
	assert.False(t, r.Reclaimable())
	assert.Equal(t, loop.ReasonWorkerLost, r.LostWorkerReason())
	e.Clock.Advance(LeaseTTL)
	_, err := e.Store.Claim(ctx, r.ID, "w9")
	AssertCode(t, runs.EConflict, err)
	assert.Equal(t, runs.MaxReclaims, e.stored(t, r.ID).Reclaims, "a refused claim changes nothing")
	r, err = e.Store.Settle(ctx, e.stored(t, r.ID), "", runs.Settlement{Status: runs.StatusFailed, Reason: r.LostWorkerReason()})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonWorkerLost, e.stored(t, r.ID).Reason)

	// A write whose outcome is unknown outranks the count.
	r = e.Running(t)
	r, err = e.Store.MarkPendingEffect(ctx, r, "w1", "c1")
	require.NoError(t, err)
	r.Reclaims = runs.MaxReclaims
	assert.Equal(t, loop.ReasonInterruptedWrite, r.LostWorkerReason())

	// A segment's checkpoint resets the count, and so does the claim of
	// its next segment.
	r = e.Running(t)
	e.Clock.Advance(LeaseTTL)
	r, err = e.Store.Claim(ctx, r.ID, "w2")
	require.NoError(t, err)
	require.Equal(t, 1, r.Reclaims)
	r, err = e.Store.Checkpoint(ctx, r, "w2", runs.SegmentEnd{State: []byte(`{"at":1}`)})
	require.NoError(t, err)
	assert.Zero(t, r.Reclaims)
	assert.Zero(t, e.stored(t, r.ID).Reclaims)
	r, err = e.Store.Claim(ctx, r.ID, "w3")
	require.NoError(t, err)
	assert.Zero(t, r.Reclaims)

	// A write's result recorded with its checkpoint resets it; a fence's
	// checkpoint (before the call) does not: the call may be what kills
	// the workers.
	e.Clock.Advance(LeaseTTL)
	r, err = e.Store.Claim(ctx, r.ID, "w4")
	require.NoError(t, err)
	require.Equal(t, 1, r.Reclaims)
	r, err = e.Store.StampFence(ctx, r, "w4", runs.Fence{CallID: "c2", Idempotent: true, Checkpoint: []byte(`{"before":"c2"}`)})
	require.NoError(t, err)
	assert.Equal(t, 1, e.stored(t, r.ID).Reclaims)
	r, err = e.Store.RecordEffect(ctx, r, "w4", loop.Step{Kind: loop.StepToolExecuted, CallID: "c2", Effect: loop.EffectWrite}, []byte(`{"after":"c2"}`))
	require.NoError(t, err)
	assert.Zero(t, r.Reclaims)
	assert.Zero(t, e.stored(t, r.ID).Reclaims)
}

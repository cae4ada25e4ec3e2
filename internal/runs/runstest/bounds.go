package runstest

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// The conformance cases of the run row's bounds: nothing on the row grows
// with the number of suspensions, reminders, decisions or hand-overs a run
// goes through.

// ManyApprovers is the approver count of the bound cases: the most a run
// may have.
const ManyApprovers = runs.MaxApprovers

// DefaultCycles is how many suspensions the bound cases drive a run
// through unless the harness says otherwise (Harness.Cycles).
const DefaultCycles = 30

// DefaultRacers is how many goroutines the concurrency cases race on one
// run unless the harness says otherwise (Harness.Racers).
const DefaultRacers = 50

// racers is the harness's racer count.
func (e *Env) racers() int {
	if e.H.Racers > 0 {
		return e.H.Racers
	}
	return DefaultRacers
}

// maxRowGrowth is how much the stored row may grow over the cycles: a few
// more digits in its version, sequence and ids, never a list.
const maxRowGrowth = 128

// cycles is the harness's cycle count.
func (e *Env) cycles() int {
	if e.H.Cycles > 0 {
		return e.H.Cycles
	}
	return DefaultCycles
}

// grants returns fresh token grants, one per approver, and their hashes.
func grants(approvers []string) ([]runs.TokenGrant, []string) {
	gs := make([]runs.TokenGrant, len(approvers))
	hs := make([]string, len(approvers))
	for i, a := range approvers {
		hs[i] = HashToken(NewToken())
		gs[i] = runs.TokenGrant{Hash: hs[i], Approver: a}
	}
	return gs, hs
}

// testTokensOffTheRow: a run with the most approvers, each given a link
// at every suspension and again with every reminder, goes through many
// suspensions (Harness.Cycles); its stored row stays the same size
// (before, it listed every token hash: 40 more, 2.6 KB, per cycle), and
// purge still deletes every token it ever issued.
func testTokensOffTheRow(t *testing.T, e *Env) {
	ctx := t.Context()
	approvers := make([]string, ManyApprovers)
	for i := range approvers {
		approvers[i] = fmt.Sprintf("approver-%02d@example.com", i)
	}
	r, err := e.Store.Create(ctx, runs.NewRun{ID: "tokens-" + rand.Text()[:8], Initiator: "alice", Approvers: approvers,
		Request: []byte(`{"prompt":"file the report"}`)})
	require.NoError(t, err)
	r, err = e.Store.Claim(ctx, r.ID, "w1")
	require.NoError(t, err)
	var issued []string
	cycles := e.cycles()
	sizes := make([]int, 0, cycles)
	for i := 1; i <= cycles; i++ {
		id := fmt.Sprintf("s%d", i)
		sp, _ := e.Suspension(r, id)
		var hs []string
		sp.Tokens, hs = grants(approvers)
		issued = append(issued, hs...)
		r, err = e.Store.Suspend(ctx, r, "w1", sp)
		require.NoError(t, err, "suspension %d", i)
		reminder, hs := grants(approvers)
		issued = append(issued, hs...)
		r, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: id, State: runs.NotificationSent, Reminder: true}, reminder)
		require.NoError(t, err, "reminder %d", i)
		require.Empty(t, r.TokenHashes)
		sizes = append(sizes, e.H.RowSize(t, r.ID))
		if i%2 == 0 {
			tok, lookupErr := e.Store.LookupToken(ctx, hs[i%len(hs)])
			require.NoError(t, lookupErr)
			r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: id, Via: runs.ViaLink, Token: tok,
				Decision: loop.Decision{TurnDigest: "digest-" + id, Action: loop.ActionApprove}})
		} else {
			r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: id, Decider: approvers[0], Via: runs.ViaAPI,
				Decision: loop.Decision{TurnDigest: "digest-" + id, Action: loop.ActionApprove}})
		}
		require.NoError(t, err, "decision %d", i)
		r, err = e.Store.Claim(ctx, r.ID, "w1")
		require.NoError(t, err, "claim %d", i)
	}
	t.Logf("%d suspensions with %d approvers and a reminder each (%d tokens): stored row %d bytes after the first, %d after the last",
		cycles, len(approvers), len(issued), sizes[0], sizes[len(sizes)-1])
	assert.LessOrEqual(t, sizes[len(sizes)-1]-sizes[0], maxRowGrowth, "the row does not grow with suspensions and reminders: %v", sizes)
	first, err := e.Store.LookupToken(ctx, issued[0])
	require.NoError(t, err, "the first suspension's token is kept until purge")
	assert.Equal(t, "s1", first.SuspensionID)

	r, err = e.Store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	require.NoError(t, e.Store.Purge(ctx, r.ID))
	left := 0
	for _, h := range issued {
		if _, err := e.Store.LookupToken(ctx, h); runs.ErrorCode(err) != runs.ENotFound {
			left++
		}
	}
	assert.Zero(t, left, "purge deletes every one of the %d tokens the run issued", len(issued))
	evs, err := e.Store.Events(ctx, r.ID, 0, 10)
	require.NoError(t, err)
	assert.Empty(t, evs)
}

// testTokensOnOldRows: a row written before the adapters kept a run's
// tokens under the run lists them itself (Run.TokenHashes). Such a row is
// still read with its list, its tokens still decide, a write carries the
// list along, and purge deletes the listed tokens with the rest.
func testTokensOnOldRows(t *testing.T, e *Env) {
	ctx := t.Context()
	r, raws := e.Waiting(t)
	// The old tokens exist, bound to r, but nothing under r records them:
	// a write of another run stores them, as no adapter write of r would.
	legacy := []string{HashToken(NewToken()), HashToken(NewToken())}
	decoy := e.Running(t)
	next := decoy.Clone()
	next.Version++
	next.WriteID = "legacy-tokens"
	require.NoError(t, e.writeRow(t, runs.Write{Run: next, ExpectStatus: decoy.Status, ExpectVersion: decoy.Version,
		NewTokens: []runs.ApprovalToken{
			{Hash: legacy[0], RunID: r.ID, SuspensionID: "s1", Approver: "bob", ExpiresAt: r.ApprovalDeadline},
			{Hash: legacy[1], RunID: r.ID, SuspensionID: "s1", Approver: "carol", ExpiresAt: r.ApprovalDeadline},
		}}))
	old := r.Clone()
	old.Version++
	old.WriteID = "legacy-row"
	old.TokenHashes = legacy
	require.NoError(t, e.writeRow(t, runs.Write{Run: old, ExpectStatus: r.Status, ExpectVersion: r.Version}))

	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, legacy, got.TokenHashes, "an old row is read with its list")
	tok, err := e.Store.LookupToken(ctx, legacy[0])
	require.NoError(t, err)
	assert.Equal(t, r.ID, tok.RunID)
	got, err = e.Store.Decide(ctx, got, runs.NewDecision{SuspensionID: "s1", Via: runs.ViaLink, Token: tok, Decision: Approve})
	require.NoError(t, err, "an old row's token decides")
	assert.Equal(t, legacy, got.TokenHashes, "a write carries the list along")

	_, err = e.Store.Cancel(ctx, got, "alice")
	require.NoError(t, err)
	require.NoError(t, e.Store.Purge(ctx, r.ID))
	for _, h := range append(legacy, HashToken(raws[0]), HashToken(raws[1])) {
		_, err := e.Store.LookupToken(ctx, h)
		AssertCode(t, runs.ENotFound, err)
	}
	e.Unchanged(t, next)
}

// writeRow writes w through the adapter as the Store does (WriteRow).
func (e *Env) writeRow(t *testing.T, w runs.Write) error {
	t.Helper()
	return WriteRow(t.Context(), e.H.Rows, w)
}

// WriteRow writes w through rows as runs.Store does: a refused condition
// whose row now holds w's write id (w.Run.WriteID, which must be set:
// runs.SealWriteID) is w's own write, landed, whose answer was lost, and
// the SDK's retry of it then failed its condition: that is success.
// DynamoDB deduplicates such a retry by its request token; moto ignores the
// token, and now and then its answer is cut off on the way (the SDK logs
// "response did not match expected checksum ..., 0").
func WriteRow(ctx context.Context, rows runs.RowStore, w runs.Write) error {
	err := rows.Write(ctx, w)
	if runs.ErrorCode(err) == runs.EConflict && w.Run.WriteID != "" {
		if got, gerr := rows.GetRun(ctx, w.Run.ID); gerr == nil && got.WriteID == w.Run.WriteID {
			return nil
		}
	}
	return err
}

package runstest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// inboxIDs reads the whole inbox of approver key k, page by page (size n),
// and returns the run ids in order.
func (e *Env) inboxIDs(t *testing.T, k string, n int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the inbox cursor must end")
		page, next, err := e.Store.Inbox(e.ctx, k, n, cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), n, "a page holds at most limit entries")
		for _, en := range page {
			require.Equal(t, k, en.Approver)
			ids = append(ids, en.RunID)
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

// waitingFor creates a run of initiator with the given approvers and
// suspends it on suspension "s1" with sp's options (State, Deadline and
// Tokens filled in).
func (e *Env) waitingFor(t *testing.T, initiator string, approvers []string, sp runs.Suspension) *runs.Run {
	t.Helper()
	r, err := e.Store.Create(e.ctx, runs.NewRun{
		ID:        fmt.Sprintf("run-%d-%s", e.n.Add(1), rand.Text()[:8]),
		Initiator: initiator, Approvers: approvers, Request: json.RawMessage(`{"prompt":"x"}`), Purpose: "file the report",
	})
	require.NoError(t, err)
	r, err = e.Store.Claim(e.ctx, r.ID, "w1")
	require.NoError(t, err)
	sp.State = SuspendedState(r.ID, "s1")
	sp.Deadline = e.Clock.Now().Add(time.Hour)
	r, err = e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	return r
}

func testInbox(t *testing.T, e *Env) {
	ctx := t.Context()
	assertIDs := func(t *testing.T, k string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		got := e.inboxIDs(t, k, 10)
		if got == nil {
			got = []string{}
		}
		assert.Equal(t, want, got, "inbox of %s", k)
	}

	t.Run("suspend lists the suspension for each approver", func(t *testing.T) {
		before := e.Clock.Now().UTC().Truncate(time.Millisecond)
		r := e.waitingFor(t, "alice", []string{"bob", "carol"}, runs.Suspension{VotesNeeded: 2})
		assert.Equal(t, []string{"bob", "carol"}, r.InboxKeys)
		assert.Equal(t, before, r.SuspendedAt)
		e.Unchanged(t, r)
		page, next, err := e.Store.Inbox(ctx, "bob", 10, "")
		require.NoError(t, err)
		assert.Empty(t, next)
		require.Len(t, page, 1)
		assert.Equal(t, runs.InboxEntry{
			Approver: "bob", RunID: r.ID, SuspensionID: "s1", TurnDigest: "digest-s1", Initiator: "alice",
			Purpose: "file the report", Tools: []string{"send_email"}, Deadline: r.ApprovalDeadline,
			SuspendedAt: before, VotesNeeded: 2, ApprovingPersons: ptr(0),
		}, page[0], "only the call that needs approval names a tool")
		assert.Equal(t, 2, page[0].VotesMissing())
		assertIDs(t, "carol", r.ID)
		assertIDs(t, "alice")
		_, err = e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
	})

	t.Run("a vote takes the run out of the voter's inbox only", func(t *testing.T) {
		r := e.waitingFor(t, "alice", []string{"bob", "carol", "dave"}, runs.Suspension{VotesNeeded: 2})
		page, _, err := e.Store.Inbox(ctx, "carol", 10, "")
		require.NoError(t, err)
		require.Len(t, page, 1)
		before := page[0]
		r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Voter: "bob", Via: runs.ViaAPI, Decision: Approve, Choices: approveCall1})
		require.NoError(t, err)
		assert.Equal(t, runs.StatusWaiting, r.Status, "one vote of two")
		assert.Equal(t, []string{"carol", "dave"}, r.InboxKeys)
		e.Unchanged(t, r)
		assertIDs(t, "bob")
		assertIDs(t, "carol", r.ID)
		assertIDs(t, "dave", r.ID)
		// The others' entries now say what is still missing; nothing else
		// of them changed.
		for _, k := range []string{"carol", "dave"} {
			page, _, err := e.Store.Inbox(ctx, k, 10, "")
			require.NoError(t, err)
			require.Len(t, page, 1)
			want := before
			want.Approver, want.Counted, want.ApprovingPersons = k, 1, ptr(1)
			assert.Equal(t, want, page[0], "the entry of %s after one approval", k)
			assert.Equal(t, 1, page[0].VotesMissing(), "votes missing in the entry of %s", k)
		}
		r, err = e.Store.Decide(ctx, r, runs.NewDecision{SuspensionID: "s1", Decider: "carol", Voter: "carol", Via: runs.ViaAPI, Decision: Approve, Choices: approveCall1})
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, r.Status, "the second vote decides")
		assert.Empty(t, r.InboxKeys)
		assertIDs(t, "carol")
		assertIDs(t, "dave")
		_, err = e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
	})

	t.Run("canonical keys: case, +tags, role sessions; groups by name", func(t *testing.T) {
		role := "arn:aws:iam::123456789012:role/Approvers"
		r := e.waitingFor(t, "alice", []string{"Dana+ops@Example.COM", role, "group:sre", "not a principal"}, runs.Suspension{})
		assertIDs(t, runs.ApproverKey("dana@example.com"), r.ID)
		assertIDs(t, runs.ApproverKey("arn:aws:sts::123456789012:assumed-role/Approvers/dana-session"), r.ID)
		assertIDs(t, runs.ApproverKey("group:sre"), r.ID)
		assert.Len(t, r.InboxKeys, 3, "an entry that names no principal is not indexed")
		assertIDs(t, runs.ApproverKey("arn:aws:iam::210987654321:role/Approvers"))
		_, err := e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
		assertIDs(t, runs.ApproverKey("dana@example.com"))
	})

	t.Run("inbox approvers and one entry per key", func(t *testing.T) {
		r := e.waitingFor(t, "alice", []string{"alice", "bob"}, runs.Suspension{InboxApprovers: []string{"bob", "BOB"}})
		assert.Equal(t, []string{"bob"}, r.InboxKeys)
		assertIDs(t, "bob", r.ID)
		assertIDs(t, "alice")
		_, err := e.Store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
	})

	t.Run("entries vanish on decide, cancel, expire and a new suspension", func(t *testing.T) {
		decided := e.waitingFor(t, "alice", []string{"bob"}, runs.Suspension{})
		e.Clock.Advance(time.Second)
		cancelled := e.waitingFor(t, "alice", []string{"bob"}, runs.Suspension{})
		e.Clock.Advance(time.Second)
		expired := e.waitingFor(t, "alice", []string{"bob"}, runs.Suspension{})
		e.Clock.Advance(time.Second)
		renotified := e.waitingFor(t, "alice", []string{"bob"}, runs.Suspension{})
		assertIDs(t, "bob", renotified.ID, expired.ID, cancelled.ID, decided.ID)

		renotified, err := e.Store.RecordNotification(ctx, renotified, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent})
		require.NoError(t, err)
		assertIDs(t, "bob", renotified.ID, expired.ID, cancelled.ID, decided.ID)

		decided, err = e.Store.Decide(ctx, decided, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
		require.NoError(t, err)
		assert.Empty(t, decided.InboxKeys)
		e.Unchanged(t, decided)
		_, err = e.Store.Cancel(ctx, cancelled, "alice")
		require.NoError(t, err)
		assertIDs(t, "bob", renotified.ID, expired.ID)

		e.Clock.Advance(time.Hour)
		assertIDs(t, "bob")
		_, err = e.Store.Expire(ctx, expired)
		require.NoError(t, err)

		// The decided run resumes and suspends again: the new suspension
		// is listed, the old one is not.
		decided, err = e.Store.Claim(ctx, decided.ID, "w2")
		require.NoError(t, err)
		sp, _ := e.Suspension(decided, "s2")
		sp.Tokens = nil
		decided, err = e.Store.Suspend(ctx, decided, "w2", sp)
		require.NoError(t, err)
		page, _, err := e.Store.Inbox(ctx, "bob", 10, "")
		require.NoError(t, err)
		require.Len(t, page, 1)
		assert.Equal(t, decided.ID, page[0].RunID)
		assert.Equal(t, "s2", page[0].SuspensionID)
		// bob and carol: the run's own approvers.
		assertIDs(t, "carol")
		decided, err = e.Store.Cancel(ctx, decided, "alice")
		require.NoError(t, err)
		assertIDs(t, "bob")
		require.NoError(t, e.Store.Purge(ctx, decided.ID))
		assertIDs(t, "bob")
	})
}

func testInboxPaging(t *testing.T, e *Env) {
	ctx := t.Context()
	var want []string
	for i := range 7 {
		r := e.waitingFor(t, "alice", []string{"bob"}, runs.Suspension{})
		want = append(want, r.ID)
		if i%3 != 0 { // some suspensions share a millisecond
			e.Clock.Advance(time.Millisecond)
		}
		e.waitingFor(t, "alice", []string{"carol"}, runs.Suspension{})
	}
	// Newest first; within one millisecond by run id.
	all := e.inboxIDs(t, "bob", 100)
	require.Len(t, all, 7)
	byTime := map[string]time.Time{}
	for _, id := range want {
		r, err := e.Store.Get(ctx, id)
		require.NoError(t, err)
		byTime[id] = r.SuspendedAt
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if !byTime[a].After(byTime[b]) {
			assert.True(t, byTime[a].Equal(byTime[b]) && a < b, "entry %d (%s at %s) must come after %s at %s", i, b, byTime[b], a, byTime[a])
		}
	}
	assert.ElementsMatch(t, want, all)
	for _, n := range []int{1, 2, 3, 7} {
		assert.Equal(t, all, e.inboxIDs(t, "bob", n), "pages of %d", n)
	}

	page, next, err := e.Store.Inbox(ctx, "bob", 3, "")
	require.NoError(t, err)
	require.Len(t, page, 3)
	require.NotEmpty(t, next)
	_, _, err = e.Store.Inbox(ctx, "carol", 3, next)
	AssertCode(t, runs.EInvalid, err)
	for _, bad := range []string{"%%%", "AAAA", "eyJrIjoieCJ9"} {
		_, _, err = e.Store.Inbox(ctx, "bob", 3, bad)
		AssertCode(t, runs.EInvalid, err)
	}
	for _, bad := range []int{-1, runs.MaxInboxLimit + 1} {
		_, _, err = e.Store.Inbox(ctx, "bob", bad, "")
		AssertCode(t, runs.EInvalid, err)
	}

	// A page boundary survives the entry it ended on being removed.
	r, err := e.Store.Get(ctx, page[2].RunID)
	require.NoError(t, err)
	_, err = e.Store.Cancel(ctx, r, "alice")
	require.NoError(t, err)
	rest, _, err := e.Store.Inbox(ctx, "bob", 100, next)
	require.NoError(t, err)
	var ids []string
	for _, en := range rest {
		ids = append(ids, en.RunID)
	}
	assert.Equal(t, all[3:], ids)

	empty, next, err := e.Store.Inbox(ctx, "nobody", 10, "")
	require.NoError(t, err)
	assert.Empty(t, empty)
	assert.Empty(t, next)
}

// testInboxConcurrent suspends runs while others are decided and
// cancelled, all at once: the inbox ends up exactly the waiting runs.
func testInboxConcurrent(t *testing.T, e *Env) {
	ctx := t.Context()
	const n = 12
	waiting := make([]*runs.Run, n)
	for i := range n {
		waiting[i] = e.waitingFor(t, "alice", []string{"bob", "carol"}, runs.Suspension{})
	}
	running := make([]*runs.Run, n)
	for i := range n {
		running[i] = e.Running(t)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { // a new suspension
			sp, _ := e.Suspension(running[i], "s1")
			sp.Tokens = nil
			if _, err := e.Store.Suspend(ctx, running[i], "w1", sp); err != nil {
				t.Errorf("suspend %d: %v", i, err)
			}
		})
		wg.Go(func() { // two deciders race; one wins
			switch i % 3 {
			case 0:
				if _, err := e.Store.Cancel(ctx, waiting[i], "alice"); err != nil {
					t.Errorf("cancel %d: %v", i, err)
				}
			case 1:
				_, err1 := e.Store.Decide(ctx, waiting[i], runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
				if err1 != nil && runs.ErrorCode(err1) != runs.EConflict {
					t.Errorf("decide %d: %v", i, err1)
				}
			}
		})
		if i%3 == 1 {
			wg.Go(func() {
				_, err := e.Store.Decide(ctx, waiting[i], runs.NewDecision{SuspensionID: "s1", Decider: "carol", Via: runs.ViaAPI, Decision: loop.Decision{Action: loop.ActionDeny}})
				if err != nil && runs.ErrorCode(err) != runs.EConflict {
					t.Errorf("decide %d: %v", i, err)
				}
			})
		}
	}
	wg.Wait()
	var want []string
	for _, r := range append(slices.Clone(waiting), running...) {
		got, err := e.Store.Get(ctx, r.ID)
		require.NoError(t, err)
		if got.Status == runs.StatusWaiting {
			want = append(want, got.ID)
		} else {
			assert.Empty(t, got.InboxKeys, "run %s is %s", got.ID, got.Status)
		}
	}
	require.Len(t, want, n+n/3, "the new suspensions and the untouched waiting runs")
	for _, k := range []string{"bob", "carol"} {
		assert.ElementsMatch(t, want, e.inboxIDs(t, k, 5), "inbox of %s", k)
	}
}

func ptr[T any](v T) *T { return &v }

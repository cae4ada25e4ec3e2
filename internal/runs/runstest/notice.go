package runstest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// notifying creates a run suspended (by "w1") on suspension "s1" whose
// approvers are mailed: the suspension keeps a number for the notified
// event.
func (e *Env) notifying(t *testing.T) *runs.Run {
	t.Helper()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	sp.Notify = true
	r, err := e.Store.Suspend(e.ctx, r, "w1", sp)
	require.NoError(t, err)
	return r
}

func sentNotice(suspension string) runs.Notice {
	return runs.Notice{SuspensionID: suspension, State: runs.NotificationSent, Actor: "w1",
		Data: json.RawMessage(fmt.Sprintf(`{"suspension_id":%q,"channel":"email","sent":1}`, suspension))}
}

// seqTypes returns the run's events as "seq type" and checks their order.
func (e *Env) seqTypes(t *testing.T, id string) []string {
	t.Helper()
	evs, err := e.Store.Events(e.ctx, id, 0, 1000)
	require.NoError(t, err)
	var out []string
	for i, ev := range evs {
		if i > 0 {
			require.Greater(t, ev.Seq, evs[i-1].Seq, "events come in Seq order")
		}
		require.Equal(t, id, ev.RunID)
		out = append(out, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
	}
	return out
}

// testKeptNotice: the first notification of a suspension that notifies
// takes the number kept right after the suspension's events, in time (with
// the row's notification state) or after the run moved on (the event
// alone: the row and a worker's claim from it are untouched), once however
// often it is recorded, and never in a later suspension's place.
func testKeptNotice(t *testing.T, e *Env) {
	ctx := t.Context()
	s1 := e.notifying(t)
	assert.Equal(t, int64(4), s1.NoticeSeq, "kept after run_started, claimed, suspended")
	assert.Equal(t, int64(4), s1.LastSeq)
	assert.Equal(t, runs.NotificationPending, s1.Notification)
	e.Unchanged(t, s1)

	// bob decides before the mail's outcome is recorded.
	decided, err := e.Store.Decide(ctx, s1, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "5 decision"}, e.seqTypes(t, s1.ID), "the kept number waits")

	for range 2 { // a retry records nothing twice
		got, err := e.Store.RecordNotification(ctx, s1, sentNotice("s1"))
		require.NoError(t, err)
		assert.Equal(t, decided.Clone(), got, "the run as stored")
		e.Unchanged(t, decided)
		assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "4 notified", "5 decision"}, e.seqTypes(t, s1.ID))
	}
	evs, err := e.Store.Events(ctx, s1.ID, 3, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"suspension_id":"s1","channel":"email","sent":1}`, string(evs[0].Data))
	assert.Equal(t, "w1", evs[0].Actor, "the notice's actor, also on the event written alone")

	// The worker that claims from the decision's row writes over it.
	r, err := e.Store.ClaimSnapshot(decided, "w2")
	require.NoError(t, err)
	r, err = e.Store.RenewLease(ctx, r, "w2")
	require.NoError(t, err, "the late event did not move the row under the claim")
	assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "4 notified", "5 decision", "6 resumed"}, e.seqTypes(t, s1.ID))

	// A second suspension keeps its own number; the first one's notice,
	// tried again, changes nothing of it.
	sp, _ := e.Suspension(r, "s2")
	sp.Notify = true
	s2, err := e.Store.Suspend(ctx, r, "w2", sp)
	require.NoError(t, err)
	assert.Equal(t, int64(8), s2.NoticeSeq)
	_, err = e.Store.RecordNotification(ctx, s1, sentNotice("s1"))
	require.NoError(t, err)
	e.Unchanged(t, s2)
	assert.Equal(t, runs.NotificationPending, s2.Notification)

	// In time: the row records the outcome and the event takes the number.
	got, err := e.Store.RecordNotification(ctx, s2, runs.Notice{SuspensionID: "s2", State: runs.NotificationFailed, Actor: "w2", Data: json.RawMessage(`{"suspension_id":"s2","failed":["ops@example.com"]}`)})
	require.NoError(t, err)
	evs, err = e.Store.Events(ctx, s1.ID, 7, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "w2", evs[0].Actor, "the notice's actor, on the event written with the row")
	assert.Equal(t, runs.NotificationFailed, got.Notification)
	assert.Zero(t, got.NoticeSeq, "taken")
	assert.Equal(t, s2.LastSeq, got.LastSeq, "no new number")
	assert.Equal(t, s2.Version+1, got.Version)
	e.Unchanged(t, got)
	assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "4 notified", "5 decision", "6 resumed", "7 suspended", "8 notified"}, e.seqTypes(t, s1.ID))

	// Recorded again (from the suspension's row): nothing changes.
	again, err := e.Store.RecordNotification(ctx, s2, sentNotice("s2"))
	require.NoError(t, err)
	assert.Equal(t, got.Clone(), again)
	e.Unchanged(t, got)
	assert.Len(t, e.seqTypes(t, s1.ID), 8)

	// A later notice (a failed reminder's, from a row that records one) is
	// appended, never in the kept place.
	got, err = e.Store.RecordNotification(ctx, got, runs.Notice{SuspensionID: "s2", State: runs.NotificationFailed})
	require.NoError(t, err)
	assert.Equal(t, "9 notified", e.seqTypes(t, s1.ID)[8])
	e.Unchanged(t, got)

	// A run that suspends without mailing anyone keeps no number.
	quiet, _ := e.Waiting(t)
	assert.Zero(t, quiet.NoticeSeq)
	assert.Equal(t, int64(3), quiet.LastSeq)
}

// testKeptNoticeAfterRenotify: the sweep mails a reminder (or a retry)
// before the worker's first notification is recorded. The reminder goes
// on record as ever; the first notification still takes its kept number,
// in time or late; a failed reminder's record (its row no longer pending)
// never takes it, and after the run moved on it is refused.
func testKeptNoticeAfterRenotify(t *testing.T, e *Env) {
	ctx := t.Context()
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%t", late), func(t *testing.T) {
			s1 := e.notifying(t)
			reminded, err := e.Store.Renotify(ctx, s1, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Reminder: true}, nil)
			require.NoError(t, err)
			assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "5 reminded"}, e.seqTypes(t, s1.ID))
			_, err = e.Store.RecordNotification(ctx, reminded, runs.Notice{SuspensionID: "s1", State: runs.NotificationFailed})
			require.NoError(t, err)
			assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "5 reminded", "6 notified"}, e.seqTypes(t, s1.ID),
				"the reminder's failure is appended")
			cur, err := e.Store.Get(ctx, s1.ID)
			require.NoError(t, err)
			if late {
				cur, err = e.Store.Cancel(ctx, cur, "alice")
				require.NoError(t, err)
				_, err = e.Store.RecordNotification(ctx, reminded, runs.Notice{SuspensionID: "s1", State: runs.NotificationFailed})
				AssertCode(t, runs.EConflict, err)
				e.Unchanged(t, cur)
			}
			_, err = e.Store.RecordNotification(ctx, s1, sentNotice("s1"))
			require.NoError(t, err)
			types := e.seqTypes(t, s1.ID)
			assert.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "4 notified", "5 reminded", "6 notified"}, types[:6])
			if late {
				e.Unchanged(t, cur)
			}
		})
	}
}

// testPutEvent: the adapters' event-only write. It stores an event under
// a number the row skipped, without the row; an existing number is
// EConflict, changing nothing. (Whether the run exists is the caller's
// check: Store.RecordNotification reads the row first.)
func testPutEvent(t *testing.T, e *Env) {
	ctx := t.Context()
	r := e.notifying(t) // events 1..3, 4 kept
	r, err := e.Store.RecordStep(ctx, e.claimedAfterDecision(t, r), "w2", loop.Step{Kind: loop.StepModelTurn, Iteration: 2})
	require.NoError(t, err)
	before := e.seqTypes(t, r.ID)
	require.Equal(t, []string{"1 run_started", "2 claimed", "3 suspended", "5 decision", "6 resumed", "7 model_turn"}, before)

	ev := runs.Event{RunID: r.ID, Seq: 4, Type: runs.EventNotified, At: e.Clock.Now(), Actor: "w1", Data: json.RawMessage(`{"sent":1}`)}
	if err := e.H.Rows.PutEvent(ctx, ev); runs.ErrorCode(err) != runs.EConflict {
		// EConflict is the SDK's retry of a put whose answer the emulator
		// lost (PutEvent's doc); the page read below shows the event.
		require.NoError(t, err)
	}
	e.Unchanged(t, r)
	page, err := e.Store.Events(ctx, r.ID, 3, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, ev, page[0])
	assert.Equal(t, int64(5), page[1].Seq)
	page, err = e.Store.Events(ctx, r.ID, 4, 10)
	require.NoError(t, err)
	assert.Len(t, page, 3, "paging on from the filled number")

	again := ev
	again.Data = json.RawMessage(`{"sent":2}`)
	AssertCode(t, runs.EConflict, e.H.Rows.PutEvent(ctx, again))
	page, err = e.Store.Events(ctx, r.ID, 3, 1)
	require.NoError(t, err)
	assert.Equal(t, ev, page[0], "the stored event is kept")
}

// claimedAfterDecision has bob approve r's suspension and "w2" claim it.
func (e *Env) claimedAfterDecision(t *testing.T, r *runs.Run) *runs.Run {
	t.Helper()
	r, err := e.Store.Decide(e.ctx, r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI, Decision: Approve})
	require.NoError(t, err)
	r, err = e.Store.Claim(e.ctx, r.ID, "w2")
	require.NoError(t, err)
	return r
}

// testMailRetry: a failed mail of some mailboxes (Notice.Retry: a link a
// quorum check mailed, a reminder) is kept on the row (MailRetry, due at
// MailRetryAt, also after the reminder was sent), leaving the suspension's
// notification and reminder as they were; the retry (Renotify with Retry)
// takes those mailboxes off the list with its tokens and a notified event,
// and a retry that fails again is recorded without a new retry. A reminder
// clears the list (it mails everyone), and so does a new suspension.
func testMailRetry(t *testing.T, e *Env) {
	ctx := t.Context()
	t0 := e.Clock.Now()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	sp.RemindAt = t0.Add(40 * time.Minute)
	r, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	r, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Reminder: true}, nil)
	require.NoError(t, err)
	require.True(t, r.ReminderSent)
	require.Equal(t, r.ApprovalDeadline, r.DueAt)

	failed := func(retryAt time.Time, boxes ...string) runs.Notice {
		return runs.Notice{SuspensionID: "s1", State: runs.NotificationFailed, Actor: "purge", Retry: boxes, RetryAt: retryAt,
			Data: json.RawMessage(`{"suspension_id":"s1","channel":"email","failed":["dave@example.com"]}`)}
	}
	retryAt := t0.Add(time.Minute)
	r, err = e.Store.RecordNotification(ctx, r, failed(retryAt, "dave@example.com"))
	require.NoError(t, err)
	assert.Equal(t, []string{"dave@example.com"}, r.MailRetry)
	assert.Equal(t, retryAt, r.MailRetryAt)
	assert.Equal(t, retryAt, r.DueAt, "due for the retry, though the reminder was sent")
	assert.Equal(t, runs.NotificationSent, r.Notification, "the suspension's notification is not what failed")
	assert.True(t, r.ReminderSent)
	r, err = e.Store.RecordNotification(ctx, r, failed(t0.Add(2*time.Minute), "erin@example.com", "dave@example.com"))
	require.NoError(t, err)
	assert.Equal(t, []string{"dave@example.com", "erin@example.com"}, r.MailRetry, "each once")
	assert.Equal(t, retryAt, r.MailRetryAt, "the earlier retry")
	got, err := e.Store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got, "as stored")
	due, _, err := e.Store.Due(ctx, retryAt, 100, "")
	require.NoError(t, err)
	assert.Contains(t, ids(due), r.ID, "in the due index at the retry")

	_, err = e.Store.RecordNotification(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationFailed, Retry: []string{""}})
	AssertCode(t, runs.EInvalid, err)
	_, err = e.Store.RecordNotification(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationFailed, Reminder: true, Retry: []string{"dave@example.com"}})
	AssertCode(t, runs.EInvalid, err)
	e.Unchanged(t, r)

	// The retry of dave's mail: erin stays on the list (a later failure
	// of hers, say), dave leaves it.
	raw := NewToken()
	r, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Retry: []string{"dave@example.com"},
		Data: json.RawMessage(`{"suspension_id":"s1","channel":"email","retry":true,"links":1}`)},
		[]runs.TokenGrant{{Hash: HashToken(raw), Approver: "dave@example.com"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"erin@example.com"}, r.MailRetry)
	assert.True(t, r.ReminderSent, "no reminder is due again")
	tok, err := e.Store.LookupToken(ctx, HashToken(raw))
	require.NoError(t, err)
	assert.Equal(t, "dave@example.com", tok.Approver)
	r, err = e.Store.Renotify(ctx, r, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Retry: []string{"erin@example.com"}}, nil)
	require.NoError(t, err)
	assert.Empty(t, r.MailRetry)
	assert.True(t, r.MailRetryAt.IsZero())
	assert.Equal(t, r.ApprovalDeadline, r.DueAt)

	// A retry that fails again is recorded, and not retried.
	r, err = e.Store.RecordNotification(ctx, r, failed(time.Time{}, "erin@example.com"))
	require.NoError(t, err)
	assert.Empty(t, r.MailRetry)
	assert.Equal(t, r.ApprovalDeadline, r.DueAt)
	types := e.seqTypes(t, r.ID)
	assert.Equal(t, []string{"reminded", "notified", "notified", "notified", "notified", "notified"}, kinds(types[len(types)-6:]))

	// A reminder, or a new suspension, clears the list.
	t.Run("a reminder mails them too", func(t *testing.T) {
		w := e.Running(t)
		sp, _ := e.Suspension(w, "s1")
		sp.RemindAt = e.Clock.Now().Add(40 * time.Minute)
		w, err := e.Store.Suspend(ctx, w, "w1", sp)
		require.NoError(t, err)
		w, err = e.Store.RecordNotification(ctx, w, failed(e.Clock.Now().Add(time.Minute), "dave@example.com"))
		require.NoError(t, err)
		assert.Equal(t, sp.RemindAt, w.RemindAt, "the reminder stays where it was")
		assert.False(t, w.ReminderSent)
		w, err = e.Store.Renotify(ctx, w, runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Reminder: true}, nil)
		require.NoError(t, err)
		assert.Empty(t, w.MailRetry)
		assert.True(t, w.MailRetryAt.IsZero())
	})
	t.Run("a new suspension starts without", func(t *testing.T) {
		w := e.Running(t)
		sp, _ := e.Suspension(w, "s1")
		w, err := e.Store.Suspend(ctx, w, "w1", sp)
		require.NoError(t, err)
		w, err = e.Store.RecordNotification(ctx, w, failed(e.Clock.Now().Add(time.Minute), "dave@example.com"))
		require.NoError(t, err)
		require.NotEmpty(t, w.MailRetry)
		w = e.claimedAfterDecision(t, w)
		sp2, _ := e.Suspension(w, "s2")
		w, err = e.Store.Suspend(ctx, w, "w2", sp2)
		require.NoError(t, err)
		assert.Empty(t, w.MailRetry)
		assert.True(t, w.MailRetryAt.IsZero())
	})
}

// ids lists the ids of rs.
func ids(rs []*runs.Run) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// kinds drops the sequence numbers of seqTypes' "seq type" entries.
func kinds(seqTypes []string) []string {
	out := make([]string, 0, len(seqTypes))
	for _, s := range seqTypes {
		out = append(out, s[strings.IndexByte(s, ' ')+1:])
	}
	return out
}

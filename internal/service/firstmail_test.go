package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// dieAfterSuspending makes the worker die (a crashed panic that unwinds
// it, as in the crash-point test) right after the write that suspends its
// run, while armed: after the hold is stored and before any approval mail.
type dieAfterSuspending struct {
	runs.RowStore
	armed *bool
}

func (d dieAfterSuspending) Write(ctx context.Context, w runs.Write) error {
	err := d.RowStore.Write(ctx, w)
	if err != nil || !*d.armed || w.Run.Status != runs.StatusWaiting {
		return err
	}
	for _, ev := range w.Events {
		if ev.Type == runs.EventSuspended {
			*d.armed = false
			panic(crashed{})
		}
	}
	return err
}

// beforeWrite runs *hook, once, before the next write it passes on: a
// store call of another process that lands between a caller's read and
// its write.
type beforeWrite struct {
	runs.RowStore
	hook *func()
}

func (b beforeWrite) Write(ctx context.Context, w runs.Write) error {
	if f := *b.hook; f != nil {
		*b.hook = nil
		f()
	}
	return b.RowStore.Write(ctx, w)
}

// crashedHold starts a run whose worker dies right after its suspension
// (e's rows are wrapped in dieAfterSuspending) and returns the run as the
// worker left it.
func (e *notifyEnv) crashedHold(t *testing.T, approvers ...string) *runs.Run {
	t.Helper()
	ctx := context.Background()
	req, err := json.Marshal(service.StartRequest{Prompt: "note", Approvers: approvers})
	require.NoError(t, err)
	r, err := e.store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: approvers, Request: req})
	require.NoError(t, err)
	func() {
		defer func() {
			_, ok := recover().(crashed)
			require.True(t, ok, "the worker died after the suspension")
		}()
		_ = e.worker.Handle(ctx, service.NewJob(service.JobRun, r))
	}()
	r, err = e.store.Get(ctx, r.ID)
	require.NoError(t, err)
	return r
}

// approvers lists the approvers of e.mails from i on.
func (e *notifyEnv) mailedFrom(i int) []string {
	var out []string
	for _, n := range e.mails[i:] {
		out = append(out, n.Approver)
	}
	return out
}

// TestAFirstMailItsWorkerNeverSentIsSentByTheSweep (outside tester
// helper-113 P1): the worker died between the suspension's write and its
// approval mail. Before, the run waited with only a suspended event and
// nobody was told until the 80% reminder (19.2 h into the default
// window): a job run again finds it waiting, and nothing in the sweep
// looked at a notification still pending. Now the run is due
// runs.FirstNoticeGrace after the suspension, and the sweep mails every
// approver, once, with fresh links that work, recorded as the first
// notification under the number the suspension kept for it; the reminder
// still follows.
func TestAFirstMailItsWorkerNeverSentIsSentByTheSweep(t *testing.T) {
	testFirstMailRecovered(t, embeddedStore)
}

func testFirstMailRecovered(t *testing.T, newStore func(t *testing.T) (runs.RowStore, runs.StateStore)) {
	ctx := context.Background()
	boxes := []string{"ops@example.com", "carol@example.com"}

	t.Run("the worker died after the suspension", func(t *testing.T) {
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		r := e.crashedHold(t, boxes...)
		require.Equal(t, runs.StatusWaiting, r.Status)
		require.Equal(t, runs.NotificationPending, r.Notification)
		require.Empty(t, e.mails, "nobody was mailed")
		assert.Equal(t, r.SuspendedAt.Add(runs.FirstNoticeGrace), r.DueAt, "due for its first mail")

		// The job again, as Lambda retries it: the run waits, nothing is done.
		require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
		again, err := e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, r.Version, again.Version)

		e.clock.Advance(runs.FirstNoticeGrace - time.Second)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered, "not before the grace: a live worker may be mailing: %+v", sum)
		assert.Empty(t, e.mails)

		e.clock.Advance(time.Second)
		tokens := e.tokens
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.MailRecovered, "%+v", sum)
		assert.Zero(t, sum.Reminded+sum.MailRetried+sum.Errors, "%+v", sum)
		assert.Equal(t, boxes, e.mailedFrom(0), "one mail per approver")
		for _, n := range e.mails {
			assert.False(t, n.Reminder, "the first mail, not a reminder")
		}
		evs, data, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1, "recorded once, as the first notification")
		assert.Equal(t, suspendedSeq+1, evs[0].Seq, "under the number the suspension kept for it")
		assert.Equal(t, "purge", evs[0].Actor)
		assert.JSONEq(t, `{"suspension_id":"`+r.SuspensionID+`","channel":"email","recovered":true,"links":2}`, string(evs[0].Data))
		assert.Equal(t, 2, data[0].Links)
		got, err := e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, runs.NotificationSent, got.Notification)
		assert.Zero(t, got.NoticeSeq)
		assert.Equal(t, got.RemindAt, got.DueAt, "next due for the reminder")

		// Fresh links, stored before they were mailed.
		require.Equal(t, tokens+2, e.tokens)
		var links []*runs.ApprovalToken
		for i, box := range boxes {
			tok, err := e.store.LookupToken(ctx, fmt.Sprintf("%064x", tokens+1+i))
			require.NoError(t, err, "the link mailed to %s is stored", box)
			assert.Equal(t, box, tok.Approver)
			assert.Equal(t, r.SuspensionID, tok.SuspensionID)
			links = append(links, tok)
		}

		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered, "once: %+v", sum)
		assert.Len(t, e.mails, 2)

		// The reminder still comes at 80% of the window, once.
		e.clock.Advance(got.RemindAt.Sub(e.clock.Now()))
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Reminded, "%+v", sum)
		assert.Zero(t, sum.MailRecovered, "%+v", sum)
		assert.Len(t, e.mails, 4)

		// A link the sweep mailed decides.
		got, err = e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		decided, err := e.store.Decide(ctx, got, runs.NewDecision{SuspensionID: got.SuspensionID, Via: runs.ViaLink, Token: links[1],
			Decision: loop.Decision{TurnDigest: got.TurnDigest, Action: loop.ActionApprove}})
		require.NoError(t, err)
		assert.Equal(t, runs.StatusResuming, decided.Status)
		assert.Equal(t, "carol@example.com", decided.DecidedBy)
	})

	t.Run("the reminder is due as well", func(t *testing.T) {
		// A window of 140 s has its reminder (112 s) before the grace
		// ends; a sweep that comes after both sends the reminder alone:
		// it goes to the same approvers, and is the first mail they get.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 140 * time.Second
		r := e.crashedHold(t, boxes...)
		require.True(t, r.RemindAt.Before(r.SuspendedAt.Add(runs.FirstNoticeGrace)))
		assert.Equal(t, r.RemindAt, r.DueAt)
		e.clock.Advance(runs.FirstNoticeGrace + 5*time.Second)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Reminded, "%+v", sum)
		assert.Zero(t, sum.MailRecovered, "%+v", sum)
		assert.Equal(t, boxes, e.mailedFrom(0))
		reminded, _, _ := e.notices(t, r.ID, runs.EventReminded)
		assert.Len(t, reminded, 1, "recorded as the reminder it is")
		notified, _, _ := e.notices(t, r.ID, runs.EventNotified)
		assert.Empty(t, notified, "the number the suspension kept stays unused")
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.Reminded+sum.MailRecovered+sum.MailRetried, "nothing more: %+v", sum)
		assert.Len(t, e.mails, 2)
	})

	t.Run("the worker's mail is still going out when the sweep sends it", func(t *testing.T) {
		// The worker's first mail is held at the mail service past the
		// grace; the sweep sends the first mail meanwhile. The worker
		// starts no mail after that (carol's), and its record, which comes
		// second, is not written: one notified event, the sweep's.
		rows, states := newStore(t)
		e := newNotifyEnv(t, rows, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		var swept service.SweepSummary
		e.duringMail = func(service.Notification) {
			e.clock.Advance(runs.FirstNoticeGrace)
			var err error
			swept, err = e.sweeper.Sweep(ctx)
			require.NoError(t, err)
		}
		r := e.suspendedFor(t, boxes...)
		assert.Equal(t, 1, swept.MailRecovered, "%+v", swept)
		assert.Equal(t, []string{"ops@example.com", "ops@example.com", "carol@example.com"}, e.mailedFrom(0),
			"the worker's mail under way, then the sweep's; none of the worker's after the sweep's record")
		evs, _, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1, "the worker's record, which came second, is not written")
		assert.Equal(t, suspendedSeq+1, evs[0].Seq)
		assert.Equal(t, "purge", evs[0].Actor)
		assert.Equal(t, runs.NotificationSent, r.Notification, "not the worker's failure for the mail it did not start")

		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered+sum.MailRetried+sum.Reminded, "%+v", sum)
		assert.Len(t, e.mails, 3)
	})

	t.Run("the worker's record lands first", func(t *testing.T) {
		// The sweep read the row before the worker's record landed (the
		// worker was slow, not dead): the sweep's write, conditional on
		// the row, is refused and it mails nobody.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		r := e.crashedHold(t, boxes...)
		_, err := e.store.RecordNotification(ctx, r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent, Actor: "w/late",
			Data: json.RawMessage(`{"suspension_id":"` + r.SuspensionID + `","channel":"email","sent":2}`)})
		require.NoError(t, err)
		e.clock.Advance(runs.FirstNoticeGrace)
		tokens := e.tokens
		err = e.worker.RecoverFirstMail(ctx, r)
		assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "%v", err)
		assert.Empty(t, e.mails, "no second mail after the first was recorded")
		_, err = e.store.LookupToken(ctx, fmt.Sprintf("%064x", tokens+1))
		assert.Equal(t, runs.ENotFound, runs.ErrorCode(err), "no link of the sweep's is stored")
		evs, _, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1)
		assert.Equal(t, "w/late", evs[0].Actor)
		assert.Equal(t, suspendedSeq+1, evs[0].Seq)

		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered, "not due: %+v", sum)
		assert.Empty(t, e.mails)
	})

	t.Run("two sweeps at once", func(t *testing.T) {
		// Two sweeps (purge invocations that overlap, a sweep longer than
		// its period)
		// read the run while it is due; the second's record lands between
		// the first's read and its write. The first's write, conditional on
		// the row, is refused and it mails nobody: one mail per approver,
		// one notified event, no link of the loser's stored.
		rows, states := newStore(t)
		armed := true
		var hook func()
		e := newNotifyEnv(t, beforeWrite{dieAfterSuspending{rows, &armed}, &hook}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		r := e.crashedHold(t, boxes...)
		other := &service.Sweeper{Store: e.store, Now: e.clock.Now, Remind: e.worker.Remind, FirstMail: e.worker.RecoverFirstMail,
			Logger: e.sweeper.Logger, Dispatch: e.sweeper.Dispatch}
		e.clock.Advance(runs.FirstNoticeGrace)
		tokens := e.tokens
		var second service.SweepSummary
		hook = func() {
			var err error
			second, err = other.Sweep(ctx)
			require.NoError(t, err)
		}
		first, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, second.MailRecovered, "the sweep whose record landed: %+v", second)
		assert.Zero(t, first.MailRecovered, "the sweep whose record was refused: %+v", first)
		assert.Zero(t, first.Errors, "%+v", first)
		assert.Equal(t, boxes, e.mailedFrom(0), "one mail per approver")
		evs, _, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1)
		assert.Equal(t, suspendedSeq+1, evs[0].Seq)
		require.Equal(t, tokens+4, e.tokens, "each sweep made two links")
		for i := 1; i <= 4; i++ {
			_, err = e.store.LookupToken(ctx, fmt.Sprintf("%064x", tokens+i))
			if i <= 2 {
				assert.Equal(t, runs.ENotFound, runs.ErrorCode(err), "link %d, the refused sweep's, is not stored", i)
			} else {
				assert.NoError(t, err, "link %d, mailed, is stored", i)
			}
		}
	})

	t.Run("a quorum check asked someone first", func(t *testing.T) {
		// dave joins ops while the run waits; a quorum check (every 30 s)
		// asks him before the grace is over, and his mail takes the
		// notification as sent. Before, the sweep then never mailed bob
		// and carol: the first mail was owed only while the notification
		// was pending. Now what is owed is the suspension's own first
		// mail (the number it kept): the sweep sends it to all who may
		// still vote and have not, dave among them.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		e.worker.Directory = opsWithDave(t, `"bob","carol"`)
		e.worker.QuorumChecks, e.worker.QuorumCheckEvery = true, 30*time.Second
		e.sweeper.Directory, e.sweeper.QuorumCheckEvery, e.sweeper.Revise = e.worker.Directory, 30*time.Second, e.worker.ReviseDeciders
		r := e.crashedHold(t, "group:ops")
		require.Empty(t, e.mails)

		dir := opsWithDave(t, `"bob","carol","dave"`)
		e.worker.Directory, e.sweeper.Directory = dir, dir
		e.clock.Advance(30 * time.Second)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
		require.Equal(t, []string{"dave@example.com"}, e.mailedFrom(0))

		e.clock.Advance(r.SuspendedAt.Add(runs.FirstNoticeGrace).Sub(e.clock.Now()))
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.MailRecovered, "%+v", sum)
		assert.ElementsMatch(t, []string{"bob@example.com", "carol@example.com", "dave@example.com"}, e.mailedFrom(1))
		evs, _, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1)
		assert.Equal(t, suspendedSeq+1, evs[0].Seq, "under the number the suspension kept")
		got, err := e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Zero(t, got.NoticeSeq)
		mailed := len(e.mails)
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered, "once: %+v", sum)
		assert.Len(t, e.mails, mailed)
	})

	t.Run("the sweep's mail fails", func(t *testing.T) {
		// The sweep's first mail is recorded as a worker's is: it failed
		// for carol, so the notification failed and the sweep sends it
		// again a minute later, to all who may still vote, as the retry
		// of the first mail; the reminder still follows.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		r := e.crashedHold(t, boxes...)
		failCarol := true
		e.worker.Notifier = service.NotifierFunc(func(_ context.Context, n service.Notification) error {
			e.mails = append(e.mails, n)
			if failCarol && n.Approver == "carol@example.com" {
				return errors.New("mailbox unavailable")
			}
			return nil
		})
		e.clock.Advance(runs.FirstNoticeGrace)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.MailRecovered, "%+v", sum)
		got, err := e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, runs.NotificationFailed, got.Notification)
		assert.Equal(t, e.clock.Now().Add(service.MailRetryDelay), got.RemindAt, "the retry takes the reminder's time")
		assert.Equal(t, got.RemindAt, got.DueAt)

		failCarol = false
		e.clock.Advance(service.MailRetryDelay)
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.MailRetried, "%+v", sum)
		assert.Zero(t, sum.MailRecovered+sum.Reminded, "%+v", sum)
		assert.Equal(t, boxes, e.mailedFrom(2), "everyone not yet voted")
		got, err = e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.False(t, got.ReminderSent, "the reminder still follows")
		assert.Equal(t, r.RemindAt, got.RemindAt)
	})

	t.Run("a process that sends no mail", func(t *testing.T) {
		// Without a notifier the first notification is recorded all the
		// same, with no link and the reason, so the sweep does not come
		// back for it.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		r := e.crashedHold(t, boxes...)
		e.worker.Notifier = nil
		e.clock.Advance(runs.FirstNoticeGrace)
		tokens := e.tokens
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.MailRecovered, "%+v", sum)
		evs, _, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
		require.Len(t, evs, 1)
		assert.Equal(t, suspendedSeq+1, evs[0].Seq)
		assert.JSONEq(t, `{"suspension_id":"`+r.SuspensionID+`","channel":"email","recovered":true,"links":0,`+
			`"not_sent":"no approver who has not voted has a mailbox, or this process sends no mail"}`, string(evs[0].Data))
		assert.Equal(t, tokens, e.tokens, "no link")
		got, err := e.store.Get(ctx, r.ID)
		require.NoError(t, err)
		assert.Equal(t, runs.NotificationSent, got.Notification)
		sum, err = e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered, "once: %+v", sum)
	})

	t.Run("decided before the grace", func(t *testing.T) {
		// bob decides through the API before the two minutes are over:
		// the run no longer waits, and nobody is mailed; the number the
		// suspension kept stays unused.
		rows, states := newStore(t)
		armed := true
		e := newNotifyEnv(t, dieAfterSuspending{rows, &armed}, states)
		e.worker.ApprovalTTL = 24 * time.Hour
		r := e.crashedHold(t, "bob", "carol@example.com")
		e.clock.Advance(time.Minute)
		_, err := e.store.Decide(ctx, r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
			Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove}})
		require.NoError(t, err)
		e.clock.Advance(runs.FirstNoticeGrace)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.MailRecovered+sum.Errors, "%+v", sum)
		assert.Empty(t, e.mails)
		evs, _, _ := e.notices(t, r.ID, runs.EventNotified)
		assert.Empty(t, evs)
	})
}

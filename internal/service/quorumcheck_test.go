package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

func opsDirectory(t *testing.T, groups string) *identity.Directory {
	t.Helper()
	d, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"alice","aliases":["alice"]},{"id":"bob","aliases":["bob","bob@example.com"]},{"id":"carol","aliases":["carol","carol@example.com"]}],
		"groups":[` + groups + `]}`))
	require.NoError(t, err)
	return d
}

// startWith creates a run of alice's with the given approvers and takes it
// to its approval (a write_note call under the default rule).
func (e *env) startWith(t *testing.T, approvers ...string) *runs.Run {
	t.Helper()
	req, _ := json.Marshal(service.StartRequest{Prompt: "note", Approvers: approvers})
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: approvers, Request: req})
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	r = e.get(t, r.ID)
	require.Equal(t, runs.StatusWaiting, r.Status)
	return r
}

// TestSweepChecksTheQuorumOfWaitingRuns: a worker with a directory and
// quorum checks on has the sweep check a waiting run's quorum
// DefaultQuorumCheckEvery after it held the turn, and again after each check; a
// run whose group of approvers is gone from the directory in force is
// marked at the first check that finds it so (it waits on) and ends
// EXPIRED/approval_unmeetable at the next one, long before its deadline,
// and is never reminded; a run its approvers can still decide keeps
// waiting and gets its reminder as before. A sweeper without a directory
// ends nothing, and a worker without one, or with quorum checks off,
// schedules no check.
func TestSweepChecksTheQuorumOfWaitingRuns(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 5 * time.Hour
	e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
	e.worker.QuorumChecks = true
	e.sweeper.Directory = e.worker.Directory
	e.sweeper.Remind = e.worker.Remind
	t0 := e.clock.Now()

	byGroup := e.startWith(t, "group:ops")
	byName := e.startWith(t, "bob")
	assert.Equal(t, t0.Add(service.DefaultQuorumCheckEvery), byGroup.QuorumCheckAt)
	assert.Equal(t, t0.Add(service.DefaultQuorumCheckEvery), byGroup.DueAt, "the check is the run's first due time")

	e.clock.Advance(service.DefaultQuorumCheckEvery - time.Millisecond)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.QuorumChecked+sum.Unmeetable, "not due yet: %+v", sum)

	e.clock.Advance(time.Millisecond)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, t0.Add(2*service.DefaultQuorumCheckEvery), e.get(t, byGroup.ID).QuorumCheckAt, "checked again an interval later")

	// ops is removed from the directory (a redeploy): the run that needs
	// it can no longer be decided by anyone; bob can still decide his.
	// The first check that finds it marks the run, which waits on.
	e.sweeper.Directory = opsDirectory(t, `{"name":"audit","members":["carol"]}`)
	e.clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, 2, sum.QuorumChecked, "%+v", sum)
	got := e.get(t, byGroup.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, e.clock.Now(), got.FirstLost(), "first found lost")
	assert.Equal(t, e.clock.Now().Add(service.DefaultQuorumCheckEvery), got.QuorumCheckAt)
	assert.True(t, e.get(t, byName.ID).FirstLost().IsZero())

	// Not sooner than the next check.
	e.clock.Advance(service.DefaultQuorumCheckEvery - time.Millisecond)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable+sum.QuorumChecked, "%+v", sum)

	// The next check finds it so still: the run ends.
	e.clock.Advance(time.Millisecond)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	got = e.get(t, byGroup.ID)
	assert.Equal(t, runs.StatusExpired, got.Status)
	assert.Equal(t, loop.ReasonApprovalUnmeetable, got.Reason)
	assert.True(t, got.ApprovalDeadline.After(e.clock.Now()), "ended before its deadline")
	assert.Contains(t, string(got.Output), "no such group in the directory")
	assert.Equal(t, runs.StatusWaiting, e.get(t, byName.ID).Status)
	assert.Equal(t, 0, e.writes, "nothing of the held turns ran")

	// At 80% of the window the remaining run is checked (its check came
	// due then) and reminded, as before, in one sweep.
	notes := len(e.notes)
	e.clock.Advance(t0.Add(5 * time.Hour * 8 / 10).Sub(e.clock.Now()))
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, 1, sum.Reminded, "%+v", sum)
	assert.Greater(t, len(e.notes), notes)
	assert.Equal(t, runs.StatusWaiting, e.get(t, byName.ID).Status)

	t.Run("a sweeper without a directory ends nothing", func(t *testing.T) {
		e := newEnv(t)
		e.worker.ApprovalTTL = 4 * time.Hour
		e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
		e.worker.QuorumChecks = true
		r := e.startWith(t, "group:ops")
		e.clock.Advance(service.DefaultQuorumCheckEvery)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, sum.Unmeetable)
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusWaiting, got.Status)
		assert.Equal(t, e.clock.Now().Add(service.DefaultQuorumCheckEvery), got.QuorumCheckAt, "checked again later, when a directory may be there")
	})
	t.Run("a worker without a directory schedules no check", func(t *testing.T) {
		e := newEnv(t)
		e.worker.ApprovalTTL = 4 * time.Hour
		e.worker.QuorumChecks = true
		r := e.startWith(t, "bob")
		assert.True(t, r.QuorumCheckAt.IsZero())
	})
	t.Run("a worker with quorum checks off schedules none", func(t *testing.T) {
		e := newEnv(t)
		e.worker.ApprovalTTL = 4 * time.Hour
		e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
		r := e.startWith(t, "group:ops")
		assert.True(t, r.QuorumCheckAt.IsZero())
		assert.Equal(t, r.RemindAt, r.DueAt, "due for its reminder first, as a release before reads it")
	})
}

// TestQuorumLostThenFixedWaitsOn: a directory deployed by mistake (the
// approvers' group dropped) and fixed before the next check ends nothing:
// the first check marks the run, the next one finds the group back and
// clears the mark; the run waits on, and a later loss needs two checks
// again.
func TestQuorumLostThenFixedWaitsOn(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 5 * time.Hour
	good := opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
	bad := opsDirectory(t, `{"name":"opps","members":["bob","carol"]}`)
	e.worker.Directory, e.worker.QuorumChecks = good, true
	r := e.startWith(t, "group:ops")

	e.sweeper.Directory = bad
	e.clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	lostAt := e.clock.Now()
	assert.Equal(t, lostAt, e.get(t, r.ID).FirstLost())

	e.sweeper.Directory = good // fixed within the hour
	e.clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.True(t, got.FirstLost().IsZero(), "the mark is cleared")
	assert.Equal(t, e.clock.Now().Add(service.DefaultQuorumCheckEvery), got.QuorumCheckAt)

	// Lost again: marked anew, not ended at once.
	e.sweeper.Directory = bad
	e.clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, e.clock.Now(), got.FirstLost())
	assert.Equal(t, 0, e.writes)
}

// opsWithDave is a directory of alice, bob, carol and dave (all with a
// mailbox but alice) whose ops group has the members given.
func opsWithDave(t *testing.T, members string) *identity.Directory {
	t.Helper()
	d, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"alice","aliases":["alice"]},{"id":"bob","aliases":["bob","bob@example.com"]},
			{"id":"carol","aliases":["carol","carol@example.com"]},{"id":"dave","aliases":["dave","dave@example.com"]}],
		"groups":[{"name":"ops","members":[` + members + `]}]}`))
	require.NoError(t, err)
	return d
}

// TestQuorumCheckKeepsTheInboxInStepWithTheDirectory: a quorum check takes
// the run out of the inbox of an approver the directory in force no longer
// lets decide (carol left ops) and puts it back once the directory lets
// them again, without mailing them again (their link still works); a
// person who may decide now and was not asked (dave joined ops) gets an
// inbox entry and an approval mail with a link, as at a hold, and the
// deciders_changed event says so. A mail that fails is recorded and sent
// again by the sweep a minute later, to that approver alone (those who got
// theirs are not mailed again), as no reminder: the reminder at 80% of the
// window still follows.
func TestQuorumCheckKeepsTheInboxInStepWithTheDirectory(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 10 * time.Hour
	e.worker.Directory = opsWithDave(t, `"bob","carol"`)
	e.worker.QuorumChecks = true
	e.sweeper.Directory = e.worker.Directory
	e.sweeper.Remind, e.sweeper.Revise, e.sweeper.RetryMail = e.worker.Remind, e.worker.ReviseDeciders, e.worker.RetryMail
	r := e.startWith(t, "group:ops")
	require.Equal(t, []string{"person:bob", "person:carol"}, r.InboxKeys)
	require.Len(t, e.notes, 2)
	inbox := func(k string) int {
		t.Helper()
		page, _, err := e.store.Inbox(ctx, k, 10, "")
		require.NoError(t, err)
		return len(page)
	}
	check := func(dir *identity.Directory) service.SweepSummary {
		t.Helper()
		e.sweeper.Directory, e.worker.Directory = dir, dir // one process's directory, as deployed
		e.clock.Advance(service.DefaultQuorumCheckEvery)
		sum, err := e.sweeper.Sweep(ctx)
		require.NoError(t, err)
		return sum
	}

	sum := check(opsWithDave(t, `"bob"`))
	assert.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
	assert.Equal(t, 0, inbox("person:carol"), "carol may decide nothing: the run left her inbox")
	assert.Equal(t, 1, inbox("person:bob"))
	got := e.get(t, r.ID)
	assert.Equal(t, []string{"person:carol"}, got.InboxDropped)
	assert.Len(t, e.notes, 2, "nobody mailed")
	assert.Equal(t, runs.StatusWaiting, got.Status)

	sum = check(opsWithDave(t, `"bob"`))
	assert.Zero(t, sum.DecidersRevised, "nothing changed: %+v", sum)

	sum = check(opsWithDave(t, `"bob","carol"`))
	assert.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
	assert.Equal(t, 1, inbox("person:carol"), "back in carol's inbox")
	assert.Len(t, e.notes, 2, "carol's link still works: no new mail")

	e.mailErr = errors.New("smtp down")
	sum = check(opsWithDave(t, `"bob","carol","dave"`))
	assert.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
	assert.Equal(t, 1, inbox("person:dave"), "dave is asked")
	require.Len(t, e.notes, 3)
	assert.Equal(t, "dave@example.com", e.notes[2].Approver)
	assert.False(t, e.notes[2].Reminder, "the mail of a hold, not a reminder")
	got = e.get(t, r.ID)
	assert.Equal(t, []string{"person:bob", "person:carol", "person:dave"}, got.InboxKeys)
	assert.Equal(t, runs.NotificationSent, got.Notification, "the hold's mail went out: it is not what failed")
	assert.Equal(t, []string{"dave@example.com"}, got.MailRetry)
	assert.Equal(t, e.clock.Now().Add(service.MailRetryDelay), got.MailRetryAt, "the failed mail is sent again soon")
	assert.Equal(t, got.MailRetryAt, got.DueAt)
	remindAt := r.RemindAt
	assert.Equal(t, remindAt, got.RemindAt, "the reminder stays where it was")
	evs, err := e.store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	var changes []runs.DecidersEventData
	for _, ev := range evs {
		if ev.Type == runs.EventDecidersChanged {
			var d runs.DecidersEventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			changes = append(changes, d)
		}
	}
	assert.Equal(t, []runs.DecidersEventData{
		{SuspensionID: r.SuspensionID, Dropped: []string{"person:carol"}},
		{SuspensionID: r.SuspensionID, Restored: []string{"person:carol"}},
		{SuspensionID: r.SuspensionID, Asked: []string{"person:dave"}, Links: 1},
	}, changes)
	assert.Equal(t, runs.EventNotified, evs[len(evs)-1].Type, "the failed mail is on record")

	e.mailErr = nil
	e.clock.Advance(service.MailRetryDelay)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.MailRetried, "%+v", sum)
	assert.Zero(t, sum.Reminded, "%+v", sum)
	require.Len(t, e.notes, 4, "dave mailed again, and nobody else")
	assert.Equal(t, "dave@example.com", e.notes[3].Approver)
	assert.False(t, e.notes[3].Reminder)
	got = e.get(t, r.ID)
	assert.Empty(t, got.MailRetry)
	assert.True(t, got.MailRetryAt.IsZero())
	assert.Equal(t, got.QuorumCheckAt, got.DueAt, "next due at the next check")

	e.clock.Advance(remindAt.Sub(e.clock.Now()))
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Reminded, "%+v", sum)
	assert.Len(t, e.notes, 7, "bob, carol and dave reminded")
	assert.Equal(t, 0, e.writes, "nothing ran")
}

// TestQuorumCheckConfirmsOnlyAnHourAfterTheMark: a check that finds a
// marked call lost sooner than DefaultQuorumCheckEvery after its mark (a row
// checked early, as one scheduled by another writer could be) does not end
// the run: it schedules the confirming check for the mark's hour, which
// then ends it. A sweeper without a directory keeps the marks as they are
// and does not say the calls can get their approvals again (reviewer
// helper-89 F4, F6).
func TestQuorumCheckConfirmsOnlyAnHourAfterTheMark(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 5 * time.Hour
	e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
	e.worker.QuorumChecks = true
	r := e.startWith(t, "group:ops")
	var held string
	for _, c := range r.PendingCalls {
		if c.NeedsApproval {
			held = c.ID
		}
	}
	require.NotEmpty(t, held)

	// Marked now, with the next check due in a minute.
	markedAt := e.clock.Now()
	r, err := e.store.ScheduleQuorumCheck(ctx, r, markedAt.Add(time.Minute), runs.QuorumFinding{At: markedAt, Lost: []string{held}})
	require.NoError(t, err)

	// Without a directory: the mark stays, nothing ends.
	e.sweeper.Directory = nil
	e.clock.Advance(time.Minute)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, markedAt, got.FirstLost(), "a sweeper that cannot tell keeps the mark")

	// Early, with the directory that lost the call: the run waits on, and
	// the confirming check is due at the mark's hour, not an hour from now.
	e.sweeper.Directory = opsDirectory(t, `{"name":"audit","members":["carol"]}`)
	e.clock.Advance(time.Minute)
	r = e.get(t, r.ID)
	r, err = e.store.ScheduleQuorumCheck(ctx, r, e.clock.Now(), runs.QuorumFinding{At: markedAt, Lost: []string{held}})
	require.NoError(t, err)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "found lost again %s after the mark: %+v", e.clock.Now().Sub(markedAt), sum)
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, markedAt, got.FirstLost(), "the first finding's time is kept")
	assert.Equal(t, markedAt.Add(service.DefaultQuorumCheckEvery), got.QuorumCheckAt, "confirmed at the mark's hour")

	e.clock.Advance(markedAt.Add(service.DefaultQuorumCheckEvery).Sub(e.clock.Now()))
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, runs.StatusExpired, e.get(t, r.ID).Status)
}

// TestQuorumChecksKeepAConfiguredInterval: with a quorum check interval
// other than the hour (Worker.QuorumCheckEvery, Sweeper.QuorumCheckEvery:
// AGENTGATE_QUORUM_CHECK_EVERY, serve --quorum-check-every), the hold
// schedules its first check that long after it, each check the next that
// long after it, and a call found lost is confirmed, ending the run, only
// by a check at least that long after its mark: not a moment sooner, and
// never an hour later.
func TestQuorumChecksKeepAConfiguredInterval(t *testing.T) {
	const every = 90 * time.Second
	ctx := context.Background()
	e := newEnv(t)
	e.worker.ApprovalTTL = 5 * time.Hour
	e.worker.Directory = opsDirectory(t, `{"name":"ops","members":["bob","carol"]}`)
	e.worker.QuorumChecks = true
	e.worker.QuorumCheckEvery = every
	e.sweeper.Directory = e.worker.Directory
	e.sweeper.QuorumCheckEvery = every
	t0 := e.clock.Now()

	r := e.startWith(t, "group:ops")
	assert.Equal(t, t0.Add(every), r.QuorumCheckAt, "the first check, the interval after the hold")
	assert.Equal(t, t0.Add(every), r.DueAt)

	e.clock.Advance(every)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, t0.Add(2*every), e.get(t, r.ID).QuorumCheckAt, "the next check, the interval after this one")

	// ops is gone: the check marks the call and comes again an interval on.
	e.sweeper.Directory = opsDirectory(t, `{"name":"audit","members":["carol"]}`)
	e.clock.Advance(every)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	got := e.get(t, r.ID)
	markedAt := e.clock.Now()
	assert.Equal(t, markedAt, got.FirstLost())
	assert.Equal(t, markedAt.Add(every), got.QuorumCheckAt)

	// A check sooner than the interval after the mark (a row whose check
	// time was moved) confirms nothing and comes back at the mark's
	// interval.
	_, err = e.store.ScheduleQuorumCheck(ctx, got, markedAt.Add(every/2), runs.QuorumFinding{At: markedAt, Lost: []string{got.PendingCalls[0].ID}})
	require.NoError(t, err)
	e.clock.Advance(every / 2)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, markedAt.Add(every), got.QuorumCheckAt, "confirmed at the mark's interval")

	e.clock.Advance(markedAt.Add(every).Sub(e.clock.Now()))
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusExpired, got.Status)
	assert.Equal(t, loop.ReasonApprovalUnmeetable, got.Reason)
	assert.Equal(t, t0.Add(3*every), e.clock.Now(), "two checks an interval apart, three intervals after the hold")
}

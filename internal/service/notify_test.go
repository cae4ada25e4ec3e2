package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// notifyEnv is a worker that mails ops@example.com its approval links
// (bob has no mailbox) and a sweep that reminds; duringMail, when set,
// runs inside each mail, after it went out and before its outcome is
// recorded.
type notifyEnv struct {
	store      *runs.Store
	worker     *service.Worker
	sweeper    *service.Sweeper
	clock      *clocktest.Clock
	mails      []service.Notification
	mailErr    error
	writes     int
	tokens     int
	duringMail func(n service.Notification)
}

func newNotifyEnv(t *testing.T, rows runs.RowStore, states runs.StateStore) *notifyEnv {
	t.Helper()
	e := &notifyEnv{clock: clocktest.New(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))}
	e.store = runs.NewStore(rows, states, runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour, Logger: quiet})
	model, err := scripted.Parse([]byte(writeScript))
	require.NoError(t, err)
	note := &loop.FuncTool{
		Def: loop.Definition{Name: "write_note", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			e.writes++
			return loop.Result{Content: "ok"}, nil
		},
	}
	tools, err := loop.NewToolbox(note)
	require.NoError(t, err)
	e.worker = &service.Worker{
		Store: e.store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
		},
		NewToken: func() (string, string, error) { e.tokens++; return "raw", fmt.Sprintf("%064x", e.tokens), nil },
		Notifier: service.NotifierFunc(func(_ context.Context, n service.Notification) error {
			e.mails = append(e.mails, n)
			if f := e.duringMail; f != nil {
				e.duringMail = nil
				f(n)
			}
			return e.mailErr
		}),
		ApprovalTTL: time.Hour,
		Owner:       "w",
		Logger:      quiet,
		Now:         e.clock.Now,
	}
	e.sweeper = &service.Sweeper{Store: e.store, Now: e.clock.Now, Remind: e.worker.Remind, FirstMail: e.worker.RecoverFirstMail, Logger: quiet,
		Dispatch: service.DispatchFunc(func(context.Context, service.Job) error { return nil })}
	return e
}

func embeddedStore(t *testing.T) (runs.RowStore, runs.StateStore) {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "notify.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, db
}

// suspended starts a run whose worker suspends on its write and mails
// ops@example.com; it returns the run as stored after the worker's job.
func (e *notifyEnv) suspended(t *testing.T) *runs.Run {
	t.Helper()
	return e.suspendedFor(t, "bob", "ops@example.com")
}

// suspendedFor is suspended with the approvers given.
func (e *notifyEnv) suspendedFor(t *testing.T, approvers ...string) *runs.Run {
	t.Helper()
	ctx := context.Background()
	req, err := json.Marshal(service.StartRequest{Prompt: "note", Approvers: approvers})
	require.NoError(t, err)
	r, err := e.store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: approvers, Request: req})
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(ctx, service.NewJob(service.JobRun, r)))
	r, err = e.store.Get(ctx, r.ID)
	require.NoError(t, err)
	return r
}

// approveNow has bob approve the run's current suspension and returns the
// row the decision wrote.
func (e *notifyEnv) approveNow(t *testing.T, id string) *runs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := e.store.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	next, err := e.store.Decide(ctx, r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	return next
}

// noticeData is what a notified or reminded event says.
type noticeData struct {
	SuspensionID string   `json:"suspension_id"`
	Channel      string   `json:"channel"`
	Sent         int      `json:"sent"`
	Failed       []string `json:"failed"`
	Links        int      `json:"links"`
}

// notices returns the run's events of type typ with their data, and the
// sequence number of its suspended event.
func (e *notifyEnv) notices(t *testing.T, id, typ string) (evs []runs.Event, data []noticeData, suspendedSeq int64) {
	t.Helper()
	all, err := e.store.Events(context.Background(), id, 0, 1000)
	require.NoError(t, err)
	for i, ev := range all {
		if i > 0 {
			require.Greater(t, ev.Seq, all[i-1].Seq, "events come in order")
		}
		if ev.Type == runs.EventSuspended {
			suspendedSeq = ev.Seq
		}
		if ev.Type != typ {
			continue
		}
		var d noticeData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		evs, data = append(evs, ev), append(data, d)
	}
	return evs, data, suspendedSeq
}

// TestANotificationAfterAQuickDecisionIsOnRecord: bob approves after the
// approval mail went out and before the worker recorded it (the outside
// tester's story, 8 runs in 15). The trail still says the link was
// mailed, once, for that suspension, right after its suspended event;
// the late event leaves the row as the decision wrote it, so the resume
// worker that claims from the decision's row (its job's snapshot) goes on
// undisturbed.
func TestANotificationAfterAQuickDecisionIsOnRecord(t *testing.T) {
	testNotificationAfterAQuickDecision(t, embeddedStore)
}

func testNotificationAfterAQuickDecision(t *testing.T, newStore func(t *testing.T) (runs.RowStore, runs.StateStore)) {
	for _, tt := range []struct {
		name    string
		mailErr error
		want    runs.NotificationState
	}{
		{"mail sent", nil, runs.NotificationSent},
		{"mail failed", assert.AnError, runs.NotificationFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows, states := newStore(t)
			e := newNotifyEnv(t, rows, states)
			e.mailErr = tt.mailErr
			var decided *runs.Run
			e.duringMail = func(n service.Notification) { decided = e.approveNow(t, n.Run.ID) }
			r := e.suspended(t)
			require.NotNil(t, decided, "bob decided during the mail")
			require.Len(t, e.mails, 1)
			assert.Equal(t, "ops@example.com", e.mails[0].Approver)

			assert.Equal(t, runs.StatusResuming, r.Status)
			assert.Equal(t, decided.Version, r.Version, "the late notified event does not write the row")
			assert.Equal(t, decided.WriteID, r.WriteID)
			evs, data, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
			require.Len(t, evs, 1, "the mail is on record")
			assert.Equal(t, r.SuspensionID, data[0].SuspensionID)
			assert.Equal(t, "email", data[0].Channel)
			assert.Equal(t, suspendedSeq+1, evs[0].Seq, "it takes the number its suspension kept")
			if tt.mailErr == nil {
				assert.Equal(t, 1, data[0].Sent)
			} else {
				assert.Equal(t, []string{"ops@example.com"}, data[0].Failed)
			}

			// The resume worker claims from the decision's row and ends the run.
			e.clock.Advance(time.Second)
			require.NoError(t, e.worker.Handle(context.Background(), service.NewJob(service.JobResume, decided)))
			got, err := e.store.Get(context.Background(), r.ID)
			require.NoError(t, err)
			assert.Equal(t, runs.StatusCompleted, got.Status)
			assert.Equal(t, 1, e.writes, "the approved write ran once")
			evs, _, _ = e.notices(t, r.ID, runs.EventNotified)
			assert.Len(t, evs, 1, "still once")
		})
	}
}

// TestANotificationInTimeKeepsItsPlace: without a race the notified event
// comes right after the suspended one and the row records the outcome, as
// before; the sweep's reminder (and a failed reminder's record) come after
// it and never take its number.
func TestANotificationInTimeKeepsItsPlace(t *testing.T) {
	ctx := context.Background()
	rows, states := embeddedStore(t)
	e := newNotifyEnv(t, rows, states)
	r := e.suspended(t)
	assert.Equal(t, runs.StatusWaiting, r.Status)
	assert.Equal(t, runs.NotificationSent, r.Notification)
	assert.Zero(t, r.NoticeSeq, "the kept number is taken")
	evs, data, suspendedSeq := e.notices(t, r.ID, runs.EventNotified)
	require.Len(t, evs, 1)
	assert.Equal(t, suspendedSeq+1, evs[0].Seq)
	assert.Equal(t, r.LastSeq, evs[0].Seq, "no number is left unused")
	assert.Equal(t, r.SuspensionID, data[0].SuspensionID)

	// The reminder at 80% of the hour fails; bob decides while it is mailed.
	e.mailErr = assert.AnError
	e.duringMail = func(n service.Notification) { e.approveNow(t, n.Run.ID) }
	e.clock.Advance(48 * time.Minute)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Errors, "a failed reminder of a run that moved on is no sweep error")
	assert.Equal(t, 1, sum.Reminded)
	rem, remData, _ := e.notices(t, r.ID, runs.EventReminded)
	require.Len(t, rem, 1, "the reminder's links are on record: recorded before they were mailed")
	assert.Equal(t, r.SuspensionID, remData[0].SuspensionID)
	assert.Equal(t, 1, remData[0].Links)
	evs, _, _ = e.notices(t, r.ID, runs.EventNotified)
	assert.Len(t, evs, 1, "the failure never takes the first notification's number")
	got, err := e.store.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusResuming, got.Status)
}

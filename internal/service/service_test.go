package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

const writeScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"w1","name":"write_note","input":{"text":"hi"}}]},
 {"content":[{"type":"text","text":"done"}]}]}`

type env struct {
	db      *embedded.DB
	store   *runs.Store
	worker  *service.Worker
	sweeper *service.Sweeper
	clock   *clocktest.Clock
	jobs    []service.Job
	writes  int
	notes   []service.Notification
	mailErr error
	tokens  int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clock: clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))}
	store, db, err := embedded.OpenStore(filepath.Join(t.TempDir(), "r.db"), runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	e.store, e.db = store, db
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
		Store: store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
		},
		NewToken: func() (string, string, error) { e.tokens++; return "raw", fmt.Sprintf("%064x", e.tokens), nil },
		Notifier: service.NotifierFunc(func(_ context.Context, n service.Notification) error {
			e.notes = append(e.notes, n)
			return e.mailErr
		}),
		ApprovalTTL: time.Hour,
		Owner:       "w",
		Now:         e.clock.Now,
	}
	e.sweeper = &service.Sweeper{Store: store, Now: e.clock.Now,
		Dispatch: service.DispatchFunc(func(_ context.Context, j service.Job) error { e.jobs = append(e.jobs, j); return nil })}
	return e
}

func (e *env) start(t *testing.T) *runs.Run {
	t.Helper()
	req, _ := json.Marshal(service.StartRequest{Prompt: "note", Approvers: []string{"ops@example.com", "bob"}})
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"ops@example.com", "bob"}, Request: req})
	require.NoError(t, err)
	return r
}

func (e *env) get(t *testing.T, id string) *runs.Run {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	require.NoError(t, err)
	return r
}

func TestWorkerSuspendsAndNotifiesEmailApprovers(t *testing.T) {
	e := newEnv(t)
	r := e.start(t)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status)
	assert.Equal(t, 0, e.writes)
	require.Len(t, e.notes, 1, "only the e-mail approver gets a link")
	assert.Equal(t, "ops@example.com", e.notes[0].Approver)
	assert.Equal(t, runs.NotificationSent, got.Notification)
	assert.Equal(t, e.clock.Now().Add(time.Hour), got.ApprovalDeadline)
	// A duplicated dispatch of the same job is harmless.
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	assert.Equal(t, got.Version, e.get(t, r.ID).Version)
}

func TestWorkerRecordsFailedMailAndTheSweepRetriesIt(t *testing.T) {
	e := newEnv(t)
	e.sweeper.Remind = e.worker.Remind
	ctx := context.Background()
	e.mailErr = assert.AnError
	r := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusWaiting, got.Status, "a failed mail never loses the suspension")
	assert.Equal(t, runs.NotificationFailed, got.Notification)
	require.Len(t, e.notes, 1)

	e.mailErr = nil
	e.clock.Advance(service.MailRetryDelay)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	// Counted and recorded as the retry it is, as a retry of a failed
	// reminder is (tester helper-109 P3-10).
	assert.Equal(t, 1, sum.MailRetried, "%+v", sum)
	assert.Zero(t, sum.Reminded, "%+v", sum)
	require.Len(t, e.notes, 2)
	assert.False(t, e.notes[1].Reminder, "a retry of the first mail, not a reminder")
	evs, err := e.store.Events(ctx, r.ID, 0, 1000)
	require.NoError(t, err)
	var retried []string
	for _, ev := range evs {
		if ev.Type == runs.EventNotified && ev.Actor == "purge" {
			retried = append(retried, string(ev.Data))
		}
	}
	require.Len(t, retried, 1, "the retry's notified event")
	assert.Contains(t, retried[0], `"reminder":false,"retry":true,"links":1`)
	got = e.get(t, r.ID)
	assert.Equal(t, runs.NotificationSent, got.Notification)
	assert.Equal(t, 2, e.tokens, "the retry carries a fresh link")
	fresh, err := e.store.LookupToken(ctx, fmt.Sprintf("%064x", 2))
	require.NoError(t, err, "the fresh link's token is stored")
	assert.Equal(t, got.SuspensionID, fresh.SuspensionID)

	// The retry does not take the place of the reminder at 80% of the
	// hour (it did before): it still comes, once.
	e.clock.Advance(40 * time.Minute)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Reminded, "not yet at 80%% of the hour")
	e.clock.Advance(9 * time.Minute)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Reminded)
	require.Len(t, e.notes, 3)
	assert.True(t, e.notes[2].Reminder)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Reminded, "once")
}

func TestSweepExpiresRedispatchesReapsAndPurges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	waiting := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: waiting.ID}))
	queued := e.start(t) // its dispatch was "lost"
	fenced := e.start(t)
	claimed, err := e.store.Claim(ctx, fenced.ID, "ghost")
	require.NoError(t, err)
	_, err = e.store.MarkPendingEffect(ctx, claimed, "ghost", "w1")
	require.NoError(t, err)
	wrote := e.start(t) // its worker finished a write, then vanished
	claimed, err = e.store.Claim(ctx, wrote.ID, "ghost")
	require.NoError(t, err)
	_, err = e.store.RecordStep(ctx, claimed, "ghost", loop.Step{Kind: loop.StepToolExecuted, CallID: "w1", Tool: "write_note", Effect: loop.EffectWrite})
	require.NoError(t, err)
	lost := e.start(t) // its worker vanished before any write
	_, err = e.store.Claim(ctx, lost.ID, "ghost")
	require.NoError(t, err)

	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Expired+sum.Redispatched+sum.Reaped+sum.Interrupted, "nothing is due yet: %+v", sum)

	e.clock.Advance(2 * time.Hour) // past approval deadline, lease and dispatch grace
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Expired)
	assert.Equal(t, 1, sum.Redispatched)
	assert.Equal(t, 2, sum.Interrupted)
	assert.Equal(t, 1, sum.Reaped)
	assert.ElementsMatch(t, []service.Job{{Kind: service.JobRun, RunID: queued.ID}, {Kind: service.JobRun, RunID: lost.ID}}, e.jobs)

	w := e.get(t, waiting.ID)
	assert.Equal(t, runs.StatusExpired, w.Status)
	assert.Equal(t, loop.ReasonApprovalExpired, w.Reason)
	for id, detail := range map[string]string{fenced.ID: "write call w1 may or may not have taken effect", wrote.ID: "a write of the run may or may not have taken effect"} {
		f := e.get(t, id)
		assert.Equal(t, runs.StatusFailed, f.Status)
		assert.Equal(t, loop.ReasonInterruptedWrite, f.Reason)
		assert.Contains(t, string(f.Output), detail, "the run's output says what is unknown")
	}
	assert.Equal(t, 0, e.writes, "nothing was executed by the sweep")

	// The re-dispatched jobs run: the lost run is taken over by a new
	// worker and proceeds to its approval; the queued one starts.
	for _, j := range e.jobs {
		require.NoError(t, e.worker.Handle(ctx, j))
	}
	assert.Equal(t, runs.StatusWaiting, e.get(t, lost.ID).Status)
	assert.Equal(t, runs.StatusWaiting, e.get(t, queued.ID).Status)
	evs, err := e.store.Events(ctx, lost.ID, 0, 100)
	require.NoError(t, err)
	assert.Contains(t, eventTypes(evs), runs.EventReclaimed)

	e.clock.Advance(49 * time.Hour) // past retention of the settled runs
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, sum.Purged)
	_, err = e.store.Get(ctx, waiting.ID)
	assert.Equal(t, runs.ENotFound, runs.ErrorCode(err))
	evs, err = e.store.Events(ctx, waiting.ID, 0, 100)
	require.NoError(t, err)
	assert.Empty(t, evs)
}

func TestResumeRefusesCorruptedOrMissingState(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	w := e.get(t, r.ID)
	_, err := e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI, Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	// Lose the blob: the resume must refuse and run nothing.
	require.NoError(t, deleteStates(e, r.ID))
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonStateUnreadable, got.Reason)
	assert.Equal(t, 0, e.writes)
}

// TestResumeAfterACancelLogsNoError: a cancel between the resume worker's
// claim and its read of the suspended state deletes the blob; the worker
// says at INFO that the run ended meanwhile, not at ERROR that the state
// is unusable, and leaves the run CANCELLED. A blob missing on a run that
// is still the worker's stays an ERROR (and the run FAILED).
func TestResumeAfterACancelLogsNoError(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cancel     bool
		wantStatus runs.Status
		wantLevel  slog.Level
		wantMsg    string
	}{
		{"cancelled meanwhile", true, runs.StatusCancelled, slog.LevelInfo, "suspended state gone: the run ended meanwhile"},
		{"blob lost on a run still ours", false, runs.StatusFailed, slog.LevelError, "suspended state unusable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			r := e.start(t)
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
			w := e.get(t, r.ID)
			_, err := e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI, Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
			require.NoError(t, err)
			logs := &recordedLogs{}
			e.worker.Logger = slog.New(logs)
			runner := e.worker.Runner
			e.worker.Runner = func(h loop.Hooks) *loop.Runner {
				// Called once the worker has claimed the run, before it
				// reads the suspended state.
				if tt.cancel {
					_, err := e.store.Cancel(ctx, e.get(t, r.ID), "alice")
					require.NoError(t, err)
				} else {
					require.NoError(t, deleteStates(e, r.ID))
				}
				return runner(h)
			}
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
			assert.Equal(t, tt.wantStatus, e.get(t, r.ID).Status)
			assert.Equal(t, 0, e.writes)
			assert.Equal(t, 1, logs.count(tt.wantLevel, tt.wantMsg), "one %s line %q in %v", tt.wantLevel, tt.wantMsg, logs.records)
			if tt.cancel {
				for _, level := range []slog.Level{slog.LevelError, slog.LevelWarn} {
					assert.Equal(t, 0, logs.count(level, ""), "no %s line for a normal cancel: %v", level, logs.records)
				}
			}
		})
	}
}

func TestStartRequestValidate(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead}})
	require.NoError(t, err)
	ok := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com", "arn:aws:iam::1:user/b", "local-user"}}
	require.NoError(t, ok.Validate(tools))
	assert.Equal(t, "x", ok.Purpose())
	bad := []service.StartRequest{
		{Approvers: []string{"a@example.com"}},
		{Prompt: "x"},
		{Prompt: "x", Approvers: []string{"a b"}},
		{Prompt: "x", Approvers: []string{"<a@example.com>"}},
		{Prompt: "x", Approvers: []string{"a@example.com"}, MaxIterations: 1000},
		{Prompt: "x", Approvers: []string{"a@example.com"}, MaxTokens: -1},
	}
	for i, r := range bad {
		assert.Error(t, r.Validate(tools), "case %d", i)
	}
}

func deleteStates(e *env, id string) error {
	return e.db.DeleteRunStates(context.Background(), id)
}

func TestSweepSendsOneReminderAt80Percent(t *testing.T) {
	e := newEnv(t)
	e.sweeper.Remind = e.worker.Remind
	ctx := context.Background()
	r := e.start(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	require.Len(t, e.notes, 1)

	e.clock.Advance(47 * time.Minute)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Reminded, "not yet at 80%% of the hour")

	e.clock.Advance(2 * time.Minute)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Reminded)
	require.Len(t, e.notes, 2)
	assert.True(t, e.notes[1].Reminder)
	assert.Equal(t, "ops@example.com", e.notes[1].Approver)
	got := e.get(t, r.ID)
	assert.True(t, got.ReminderSent)
	assert.Equal(t, 2, e.tokens, "the reminder carries a fresh link")
	fresh, err := e.store.LookupToken(ctx, fmt.Sprintf("%064x", 2))
	require.NoError(t, err, "the fresh link's token is stored")
	assert.Equal(t, got.SuspensionID, fresh.SuspensionID)

	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Reminded, "once")
	assert.Len(t, e.notes, 2)

	e.clock.Advance(12 * time.Minute)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Expired)
}

// A require_approval pattern must be able to match one of the run's tools:
// the deployment's, the run's client tools, or a tool of an MCP server
// absent at start-up; one that matches none tightens nothing (most likely
// a typo, names being case-sensitive) and is refused, naming the index.
func TestRequireApprovalMustMatchATool(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "read_document", Effect: loop.EffectRead}},
		&loop.FuncTool{Def: loop.Definition{Name: "wiki__get_page", Effect: loop.EffectRead}})
	require.NoError(t, err)
	tools.NoteAbsent("crm__", "server crm could not be reached")
	client := []service.ClientToolSpec{{Name: "lookup_order", InputSchema: json.RawMessage(`{"type":"object"}`), Effect: loop.EffectRead}}
	for _, p := range []string{"read_document", "read_*", "*", "*_document", "lookup_*", "crm__*", "crm__delete_contact", "cr*", "crm_*x", "*x*", "wiki__edit_page", "wiki__*", "x*"} {
		r := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com"}, ClientTools: client, RequireApproval: []string{"read_*", p}}
		if p == "x*" {
			err := r.Validate(tools)
			require.Error(t, err, "pattern %q", p)
			assert.Equal(t, runs.EInvalid, runs.ErrorCode(err))
			assert.Contains(t, err.Error(), `require_approval[1]: "x*" matches none of this run's tools`)
			continue
		}
		assert.NoError(t, r.Validate(tools), "pattern %q", p)
	}
	limited := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com"}, ClientTools: client, AllowedTools: []string{"wiki__get_page"}}
	for p, ok := range map[string]bool{"wiki__*": true, "lookup_order": true, "read_document": false, "crm__*": false} {
		limited.RequireApproval = []string{p}
		if err := limited.Validate(tools); ok {
			assert.NoError(t, err, "allowed_tools: pattern %q", p)
		} else {
			assert.ErrorContains(t, err, "tool names are case-sensitive; have wiki__get_page, lookup_order", "allowed_tools: pattern %q matches only tools the model is not offered", p)
		}
	}
	for _, p := range []string{"READ_*", "Read_document", "write_document", "CRM__*", "crm_x*", "lookup_order_v2", "github__delete_repo", "Wiki__*"} {
		r := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com"}, ClientTools: client, RequireApproval: []string{p}}
		err := r.Validate(tools)
		require.Error(t, err, "pattern %q", p)
		assert.Contains(t, err.Error(), "tool names are case-sensitive; have read_document, wiki__get_page, lookup_order", "pattern %q", p)
	}
}

// A run whose approvers have no mailbox (local names, IAM principals) gets
// no reminder: a reminder is mail, and before, the sweep recorded a
// `reminded` event that mailed nobody (links: 0).
func TestNoReminderWithoutAMailbox(t *testing.T) {
	e := newEnv(t)
	e.sweeper.Remind = e.worker.Remind
	ctx := context.Background()
	req, _ := json.Marshal(service.StartRequest{Prompt: "note", Approvers: []string{"bob", "arn:aws:iam::123456789012:user/carol"}})
	r, err := e.store.Create(ctx, runs.NewRun{Initiator: "alice", Approvers: []string{"bob", "arn:aws:iam::123456789012:user/carol"}, Request: req})
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	require.Equal(t, runs.StatusWaiting, got.Status)
	assert.True(t, got.RemindAt.IsZero(), "no reminder time")
	assert.Empty(t, e.notes)

	e.clock.Advance(50 * time.Minute)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Reminded)
	evs, err := e.store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	for _, ev := range evs {
		assert.NotEqual(t, runs.EventReminded, ev.Type, "a reminder that mails nobody")
	}
	e.clock.Advance(12 * time.Minute)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Expired, "the run still expires at its deadline")
}

// A deliver job (service.JobDeliver) only makes webhook attempts, in a
// function that signs them; a plain worker leaves the run alone.
func TestAPlainWorkerLeavesADeliverJob(t *testing.T) {
	e := newEnv(t)
	r := e.start(t)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobDeliver, RunID: r.ID}))
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusQueued, got.Status)
	assert.Equal(t, r.Version, got.Version, "nothing written")
	assert.Error(t, service.Job{Kind: service.JobDeliver}.Validate(), "a deliver job names its run")
}

// An empty allowed_tools meant every tool (a caller who allowed none got
// them all, read tools running unattended) and an empty messages was
// taken when a prompt was given, against the spec's minItems; both are
// 422 now, as an empty webhook_events is. Left out, allowed_tools still
// means all.
func TestEmptyListsAreRefused(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead}})
	require.NoError(t, err)
	for _, tt := range []struct {
		req  service.StartRequest
		want string
	}{
		{service.StartRequest{Prompt: "x", AllowedTools: []string{}}, "allowed_tools is empty: name at least one tool, or leave it out for all of them"},
		{service.StartRequest{Prompt: "x", Messages: []loop.Message{}}, "messages is empty"},
		{service.StartRequest{Messages: []loop.Message{}}, "messages is empty"},
	} {
		tt.req.Approvers = []string{"a@example.com"}
		err := tt.req.Validate(tools)
		assert.ErrorContains(t, err, tt.want)
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err))
	}
	for _, ok := range []service.StartRequest{
		{Prompt: "x", Approvers: []string{"a@example.com"}},
		{Prompt: "x", Approvers: []string{"a@example.com"}, AllowedTools: []string{"t"}},
	} {
		assert.NoError(t, ok.Validate(tools))
	}
}

// A tool listed twice in allowed_tools was accepted (202) while an
// approver or an event type listed twice is 422 (tester helper-112 P3).
func TestAllowedToolsListedTwiceIsRefused(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead}},
		&loop.FuncTool{Def: loop.Definition{Name: "u", Effect: loop.EffectRead}})
	require.NoError(t, err)
	req := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com"}, AllowedTools: []string{"t", "u", "t"}}
	err = req.Validate(tools)
	assert.ErrorContains(t, err, `allowed_tools[2]: "t" is listed twice`)
	assert.Equal(t, runs.EInvalid, runs.ErrorCode(err))
	req.AllowedTools = []string{"t", "u"}
	assert.NoError(t, req.Validate(tools))
}

// An empty webhook_events meant every event (a caller who asked for none
// got all), an event type listed twice was stored once, and a webhook_url
// with a space or a non-ASCII character was stored as given; all are 422
// now.
func TestWebhookFieldsAreChecked(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead}})
	require.NoError(t, err)
	for _, tt := range []struct {
		req  service.StartRequest
		want string
	}{
		{service.StartRequest{WebhookURL: "https://h.example.com/a", WebhookEvents: []string{}}, "webhook_events is empty"},
		{service.StartRequest{WebhookURL: "https://h.example.com/a", WebhookEvents: []string{"run.completed", "run.completed"}}, `webhook_events[1]: "run.completed" is listed twice`},
		{service.StartRequest{WebhookURL: "https://h.example.com/a b"}, `webhook_url: ' ' is not a character of a URI`},
		{service.StartRequest{WebhookURL: "https://h.example.com/café"}, `webhook_url: 'é' is not a character of a URI`},
		{service.StartRequest{WebhookURL: "https://h.example.com/a\"b"}, `webhook_url: '"' is not a character of a URI`},
	} {
		tt.req.Prompt, tt.req.Approvers = "x", []string{"a@example.com"}
		err := tt.req.Validate(tools)
		assert.ErrorContains(t, err, tt.want)
		assert.Equal(t, runs.EInvalid, runs.ErrorCode(err))
	}
	ok := service.StartRequest{Prompt: "x", Approvers: []string{"a@example.com"}, WebhookURL: "https://h.example.com/a%20b?x=1&y=%C3%A9#f"}
	assert.NoError(t, ok.Validate(tools))
}

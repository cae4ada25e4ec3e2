package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// readCountingRows counts the run reads a Store makes through it.
type readCountingRows struct {
	runs.RowStore
	mu    sync.Mutex
	reads int
}

func (c *readCountingRows) GetRun(ctx context.Context, id string) (*runs.Run, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.RowStore.GetRun(ctx, id)
}

func (c *readCountingRows) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// snapEnv is a worker on the embedded store whose run reads are counted
// and whose one write tool, write_note, counts its calls; onWrite, when
// set, runs inside the tool's first call (after its fence is stamped).
type snapEnv struct {
	rows    *readCountingRows
	store   *runs.Store
	worker  *service.Worker
	clock   *clocktest.Clock
	writes  int
	onWrite func()
}

func newSnapEnv(t *testing.T) *snapEnv {
	t.Helper()
	e := &snapEnv{clock: clocktest.New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "snap.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	e.rows = &readCountingRows{RowStore: db}
	e.store = runs.NewStore(e.rows, db, runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour, Logger: quiet})
	model, err := scripted.Parse([]byte(writeScript))
	require.NoError(t, err)
	note := &loop.FuncTool{
		Def: loop.Definition{Name: "write_note", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			e.writes++
			if f := e.onWrite; f != nil {
				e.onWrite = nil
				f()
			}
			return loop.Result{Content: "ok"}, nil
		},
	}
	tools, err := loop.NewToolbox(note)
	require.NoError(t, err)
	tokens := 0
	e.worker = &service.Worker{
		Store: e.store,
		Runner: func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
		},
		NewToken:    func() (string, string, error) { tokens++; return "raw", fmt.Sprintf("%064x", tokens), nil },
		ApprovalTTL: time.Hour,
		Owner:       "w",
		Logger:      quiet,
		Now:         e.clock.Now,
	}
	return e
}

func (e *snapEnv) start(t *testing.T, prompt string) *runs.Run {
	t.Helper()
	req, err := json.Marshal(service.StartRequest{Prompt: prompt, Approvers: []string{"bob"}})
	require.NoError(t, err)
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	return r
}

func (e *snapEnv) get(t *testing.T, id string) *runs.Run {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	require.NoError(t, err)
	return r
}

// handle runs the job and returns how many run reads it made.
func (e *snapEnv) handle(t *testing.T, job service.Job) int {
	t.Helper()
	before := e.rows.count()
	require.NoError(t, e.worker.Handle(context.Background(), job))
	return e.rows.count() - before
}

// approve decides the waiting run and returns the row the decision wrote.
func (e *snapEnv) approve(t *testing.T, id string) *runs.Run {
	t.Helper()
	r := e.get(t, id)
	require.Equal(t, runs.StatusWaiting, r.Status)
	next, err := e.store.Decide(context.Background(), r, runs.NewDecision{SuspensionID: r.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
		Decision: loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	return next
}

// TestSnapshotClaimReadsNothing: a job that carries the row its
// dispatcher committed, fresh, is claimed from it: neither the run worker
// nor the resume worker reads the run, and the cycle ends as with reads.
func TestSnapshotClaimReadsNothing(t *testing.T) {
	e := newSnapEnv(t)
	r := e.start(t, "note")
	job := service.NewJob(service.JobRun, r)
	require.NotEmpty(t, job.Snapshot, "a small QUEUED row is carried")
	assert.Zero(t, e.handle(t, job), "run reads of the run worker")
	assert.Equal(t, runs.StatusWaiting, e.get(t, r.ID).Status)

	next := e.approve(t, r.ID)
	e.clock.Advance(9 * time.Second) // within service.SnapshotMaxAge
	assert.Zero(t, e.handle(t, service.NewJob(service.JobResume, next)), "run reads of the resume worker")
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, got.Status)
	assert.Equal(t, 1, e.writes, "the approved write ran once")

	evs, err := e.store.Events(context.Background(), r.ID, 0, 100)
	require.NoError(t, err)
	var claims []string
	for _, ev := range evs {
		if ev.Type == runs.EventClaimed || ev.Type == runs.EventResumed {
			claims = append(claims, ev.Type)
		}
	}
	assert.Equal(t, []string{runs.EventClaimed, runs.EventResumed}, claims, "the claims are on record as after a read")
}

// TestSnapshotDoubtfulReadsAsToday: a job without a snapshot, with one too
// old or from the future by more than service.SnapshotMaxAge, or with one
// that does not decode strictly, is of another run, of a row that is not
// stored or not waiting for a worker: the worker reads the run as it does
// without a snapshot, and the run goes on alike.
func TestSnapshotDoubtfulReadsAsToday(t *testing.T) {
	edit := func(f func(m map[string]any)) func(t *testing.T, j *service.Job, _ *snapEnv) {
		return func(t *testing.T, j *service.Job, _ *snapEnv) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(j.Snapshot, &m))
			f(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			j.Snapshot = b
		}
	}
	tests := []struct {
		name string
		// change spoils the fresh job of a just created run.
		change func(t *testing.T, j *service.Job, e *snapEnv)
	}{
		{"absent", func(_ *testing.T, j *service.Job, _ *snapEnv) { j.Snapshot = nil }},
		{"too old", func(_ *testing.T, _ *service.Job, e *snapEnv) {
			e.clock.Advance(service.SnapshotMaxAge + time.Millisecond)
		}},
		{"from the future", func(_ *testing.T, _ *service.Job, e *snapEnv) {
			e.worker.Now = func() time.Time { return e.clock.Now().Add(-service.SnapshotMaxAge - time.Second) }
		}},
		{"not JSON", func(_ *testing.T, j *service.Job, _ *snapEnv) { j.Snapshot = json.RawMessage(`{"id":`) }},
		{"not an object", func(_ *testing.T, j *service.Job, _ *snapEnv) { j.Snapshot = json.RawMessage(`[1]`) }},
		{"data after the row", func(_ *testing.T, j *service.Job, _ *snapEnv) {
			j.Snapshot = append(append(json.RawMessage{}, j.Snapshot...), []byte(` {}`)...)
		}},
		{"unknown field", edit(func(m map[string]any) { m["lease_holder"] = "x" })},
		{"wrong type", edit(func(m map[string]any) { m["version"] = "1" })},
		{"another run", edit(func(m map[string]any) { m["id"] = "other-run" })},
		{"version 0", edit(func(m map[string]any) { m["version"] = 0 })},
		{"no time", edit(func(m map[string]any) { delete(m, "updated_at") })},
		{"unknown status", edit(func(m map[string]any) { m["status"] = "PAUSED" })},
		{"running", edit(func(m map[string]any) {
			m["status"], m["lease_owner"], m["lease_until"] = "RUNNING", "w/old", "2026-12-03T11:00:00Z"
		})},
		{"waiting", edit(func(m map[string]any) { m["status"] = "WAITING_FOR_APPROVAL" })},
		// Changed under the stored write id: the content no longer matches
		// it (runs.SealWriteID), so none of it is trusted.
		{"approvers changed", edit(func(m map[string]any) { m["approvers"] = []any{"mallory@example.com"} })},
		{"initiator changed", edit(func(m map[string]any) { m["initiator"] = "mallory" })},
		{"its time moved", edit(func(m map[string]any) {
			at, err := time.Parse(time.RFC3339Nano, m["updated_at"].(string))
			if err == nil {
				m["updated_at"] = at.Add(time.Millisecond).Format(time.RFC3339Nano)
			}
		})},
		{"settled", edit(func(m map[string]any) { m["status"] = "COMPLETED" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSnapEnv(t)
			r := e.start(t, "note")
			job := service.NewJob(service.JobRun, r)
			require.NotEmpty(t, job.Snapshot)
			tt.change(t, &job, e)
			reads := e.handle(t, job)
			assert.Equal(t, 1, reads, "the worker read the run")
			got := e.get(t, r.ID)
			assert.Equal(t, runs.StatusWaiting, got.Status, "the run went on as after a read")
			assert.Equal(t, r.Version+1, got.Version, "claim, steps and suspension in one write")
			assert.Equal(t, r.Approvers, got.Approvers, "the stored approvers, not the job's")
			assert.Equal(t, r.Initiator, got.Initiator)
		})
	}
}

// TestNewJobSnapshot: the dispatcher carries only a row that waits for a
// worker, whose JSON is at most service.MaxSnapshotSize and decodes back
// to the same row (bytes of the start request included), and the payload
// carries it unchanged.
func TestNewJobSnapshot(t *testing.T) {
	e := newSnapEnv(t)
	small := e.start(t, "note")
	big := e.start(t, strings.Repeat("a long prompt <with> & markup ", 1200)) // ≈ 36 KB
	medium := e.start(t, strings.Repeat("<b>&amp;</b> ", 200))                // > 1 KiB: stored apart in DynamoDB
	waiting := small.Clone()
	waiting.Status = runs.StatusWaiting

	tests := []struct {
		name string
		row  *runs.Run
		want bool
	}{
		{"small QUEUED row", small, true},
		{"a request stored apart, with markup", medium, true},
		{"over MaxSnapshotSize", big, false},
		{"not waiting for a worker", waiting, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := service.NewJob(service.JobRun, tt.row)
			assert.Equal(t, tt.row.ID, job.RunID)
			assert.NoError(t, job.Validate())
			if !tt.want {
				assert.Empty(t, job.Snapshot)
				return
			}
			require.NotEmpty(t, job.Snapshot)
			assert.LessOrEqual(t, len(job.Snapshot), service.MaxSnapshotSize)
			var ev service.JobEvent
			require.NoError(t, json.Unmarshal(job.Payload(), &ev))
			assert.Equal(t, string(job.Snapshot), string(ev.Job.Snapshot), "the payload carries the snapshot unchanged")
			var back runs.Run
			require.NoError(t, json.Unmarshal(ev.Job.Snapshot, &back))
			assert.Equal(t, string(tt.row.Request), string(back.Request), "the request's bytes")
			assert.Equal(t, tt.row, &back)
		})
	}
	assert.Empty(t, service.NewJob(service.JobRun, nil).Snapshot)
}

// TestStaleSnapshotRunsNothing: a job whose snapshot is stale, because the
// run was cancelled or because another worker took the run meanwhile,
// executes nothing a fresh read would not have, leaves the run as it is
// and never makes an approved write twice.
func TestStaleSnapshotRunsNothing(t *testing.T) {
	ctx := context.Background()
	t.Run("run cancelled after its dispatch", func(t *testing.T) {
		e := newSnapEnv(t)
		r := e.start(t, "note")
		job := service.NewJob(service.JobRun, r)
		cancelled, err := e.store.Cancel(ctx, r, "alice")
		require.NoError(t, err)
		e.handle(t, job)
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusCancelled, got.Status)
		assert.Equal(t, cancelled.Version, got.Version, "the worker wrote nothing")
		assert.Zero(t, e.writes)
	})
	t.Run("resume cancelled after its dispatch", func(t *testing.T) {
		e := newSnapEnv(t)
		r := e.start(t, "note")
		e.handle(t, service.NewJob(service.JobRun, r))
		next := e.approve(t, r.ID)
		cancelled, err := e.store.Cancel(ctx, next, "alice")
		require.NoError(t, err)
		e.handle(t, service.NewJob(service.JobResume, next))
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusCancelled, got.Status)
		assert.Equal(t, cancelled.Version, got.Version, "the worker wrote nothing")
		assert.Zero(t, e.writes, "the approved write of a cancelled run never runs")
	})
	t.Run("a duplicate while the first worker makes the write", func(t *testing.T) {
		e := newSnapEnv(t)
		r := e.start(t, "note")
		e.handle(t, service.NewJob(service.JobRun, r))
		job := service.NewJob(service.JobResume, e.approve(t, r.ID))
		// Lambda delivers the job twice: the second copy arrives while the
		// first worker's write runs (its fence stamped) and claims from
		// the same, now stale, snapshot.
		var dupReads int
		e.onWrite = func() { dupReads = e.handle(t, job) }
		e.handle(t, job)
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusCompleted, got.Status)
		assert.Equal(t, 1, e.writes, "the approved write ran once")
		assert.Equal(t, 1, dupReads, "the duplicate's fence failed and read the run to say why")
	})
	t.Run("a duplicate after the run completed", func(t *testing.T) {
		e := newSnapEnv(t)
		r := e.start(t, "note")
		e.handle(t, service.NewJob(service.JobRun, r))
		job := service.NewJob(service.JobResume, e.approve(t, r.ID))
		e.handle(t, job)
		done := e.get(t, r.ID)
		require.Equal(t, runs.StatusCompleted, done.Status)
		e.handle(t, job)
		got := e.get(t, r.ID)
		assert.Equal(t, runs.StatusCompleted, got.Status)
		assert.Equal(t, done.Version, got.Version, "the duplicate wrote nothing")
		assert.Equal(t, done.Output, got.Output)
		assert.Equal(t, 1, e.writes, "the approved write ran once")
	})
	t.Run("a duplicate of a run job after the suspension", func(t *testing.T) {
		e := newSnapEnv(t)
		r := e.start(t, "note")
		job := service.NewJob(service.JobRun, r)
		e.handle(t, job)
		waiting := e.get(t, r.ID)
		require.Equal(t, runs.StatusWaiting, waiting.Status)
		e.handle(t, job)
		got := e.get(t, r.ID)
		assert.Equal(t, waiting.Version, got.Version, "the duplicate wrote nothing")
		assert.Equal(t, waiting.SuspensionID, got.SuspensionID)
		assert.Zero(t, e.writes)
	})
}

// TestOnlyASnapshotThatDecodesBackIsSent: a committed row whose start
// request is not in the form JSON re-encodes it (spaces) is not sent to a
// worker in another process (its decoded row would not be the committed
// one), while a worker in this process claims from the copy the job keeps,
// reading nothing.
func TestOnlyASnapshotThatDecodesBackIsSent(t *testing.T) {
	e := newSnapEnv(t)
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"},
		Request: json.RawMessage(`{"prompt": "note", "approvers": ["bob"]}`)})
	require.NoError(t, err)
	require.Contains(t, string(r.Request), " ", "the committed row keeps the request's bytes")
	job := service.NewJob(service.JobRun, r)
	require.NotEmpty(t, job.Snapshot)

	var ev service.JobEvent
	require.NoError(t, json.Unmarshal(job.Payload(), &ev))
	assert.Empty(t, ev.Job.Snapshot, "the payload leaves out a snapshot that decodes to another request")
	assert.Equal(t, r.ID, ev.Job.RunID)

	small := e.start(t, "note")
	require.NoError(t, json.Unmarshal(service.NewJob(service.JobRun, small).Payload(), &ev))
	assert.NotEmpty(t, ev.Job.Snapshot, "a row that decodes back is sent")

	assert.Zero(t, e.handle(t, job), "in this process the job's copy of the row is claimed from")
	assert.Equal(t, runs.StatusWaiting, e.get(t, r.ID).Status)
}

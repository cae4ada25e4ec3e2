package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// TestTheWorkersPolicyJudgesAResumedTurn: the resume worker judges the
// approved write again by the policy its process loaded: a freeze loaded
// since the hold stops it (not run, the tool_denied event says so, the run
// completes). A worker that took the resume over from one that vanished
// with the write's fence stamped (an idempotent write it may have made)
// makes it again under its key, as before, instead of telling the model
// it did not run.
func TestTheWorkersPolicyJudgesAResumedTurn(t *testing.T) {
	freeze, err := policy.DecodeFile([]byte(`{"version":1,"rules":[{"id":"freeze","tools":["write_*"],"outcome":"deny","message":"writes are frozen"}]}`))
	require.NoError(t, err)
	frozen, err := policy.Compile(freeze, policy.Options{})
	require.NoError(t, err)

	for _, takenOver := range []bool{false, true} {
		e := newEnv(t)
		ctx := context.Background()
		model, err := scripted.Parse([]byte(writeScript))
		require.NoError(t, err)
		note := &loop.FuncTool{
			Def: loop.Definition{Name: "write_note", Effect: loop.EffectWrite, Idempotent: true, InputSchema: json.RawMessage(`{"type":"object"}`)},
			CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
				e.writes++
				return loop.Result{Content: "ok"}, nil
			},
		}
		tools, err := loop.NewToolbox(note)
		require.NoError(t, err)
		e.worker.Runner = func(h loop.Hooks) *loop.Runner {
			return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
		}

		r := e.start(t)
		require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
		w := e.get(t, r.ID)
		require.Equal(t, runs.StatusWaiting, w.Status)
		_, err = e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI, Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
		require.NoError(t, err)
		if takenOver {
			// A worker claims the resume, stamps the write's fence and vanishes.
			ghost, err := e.store.Claim(ctx, r.ID, "ghost")
			require.NoError(t, err)
			_, err = e.store.StampFence(ctx, ghost, "ghost", runs.Fence{CallID: "w1", Idempotent: true})
			require.NoError(t, err)
			e.clock.Advance(time.Hour)
		}

		e.worker.Policy = frozen
		require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
		done := e.get(t, r.ID)
		assert.Equal(t, runs.StatusCompleted, done.Status, "taken over: %v", takenOver)
		assert.Empty(t, done.PendingEffect)
		evs, err := e.store.Events(ctx, r.ID, 0, 100)
		require.NoError(t, err)
		if takenOver {
			assert.Equal(t, 1, e.writes, "the take-over makes the write the vanished worker may have made again")
			assert.Contains(t, eventTypes(evs), runs.EventReclaimed)
			assert.NotContains(t, eventTypes(evs), runs.EventToolDenied)
			continue
		}
		assert.Zero(t, e.writes, "the freeze stops the approved write")
		var denied []runs.Event
		for _, ev := range evs {
			if ev.Type == runs.EventToolDenied {
				denied = append(denied, ev)
			}
		}
		require.Len(t, denied, 1)
		var data struct {
			CallID         string `json:"call_id"`
			Rule           string `json:"rule"`
			DeniedAtResume bool   `json:"denied_at_resume"`
			HeldRule       string `json:"held_rule"`
			Detail         string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal(denied[0].Data, &data))
		assert.Equal(t, "w1", data.CallID)
		assert.Equal(t, "freeze", data.Rule)
		assert.True(t, data.DeniedAtResume)
		assert.Equal(t, "default", data.HeldRule)
		assert.Contains(t, data.Detail, `denied at resume by policy rule "freeze" of the policy in force then`)
		assert.Contains(t, data.Detail, "writes are frozen")
	}
}

// freezeScript holds a turn of an idempotent write (w1, write_note) and a
// write that is not idempotent (d1, delete_note), then answers.
const freezeScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"w1","name":"write_note","input":{"text":"hi"}},
             {"type":"tool_use","id":"d1","name":"delete_note","input":{"id":"n1"}}]},
 {"content":[{"type":"text","text":"done"}]}]}`

// freezeEnv is an env whose model plays freezeScript, with write_note
// (idempotent; crash, when set, panics after its effect, as a worker that
// dies there) and delete_note (counted in deletes).
type freezeEnv struct {
	*env
	crash   bool
	deletes int
}

func newFreezeEnv(t *testing.T) *freezeEnv {
	t.Helper()
	e := &freezeEnv{env: newEnv(t)}
	model, err := scripted.Parse([]byte(freezeScript))
	require.NoError(t, err)
	note := &loop.FuncTool{
		Def: loop.Definition{Name: "write_note", Effect: loop.EffectWrite, Idempotent: true, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			e.writes++
			if e.crash {
				e.crash = false
				panic(workerDied{})
			}
			return loop.Result{Content: "ok"}, nil
		},
	}
	del := &loop.FuncTool{
		Def: loop.Definition{Name: "delete_note", Effect: loop.EffectWrite, InputSchema: json.RawMessage(`{"type":"object"}`)},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			e.deletes++
			return loop.Result{Content: "deleted"}, nil
		},
	}
	tools, err := loop.NewToolbox(note, del)
	require.NoError(t, err)
	e.worker.Runner = func(h loop.Hooks) *loop.Runner {
		return &loop.Runner{Model: model, Tools: tools, Hooks: h, Now: e.clock.Now}
	}
	return e
}

// workerDied is the panic of a worker that dies in a tool call.
type workerDied struct{}

// handle runs a job; died says the worker died in it.
func (e *freezeEnv) handle(t *testing.T, j service.Job) (died bool) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(workerDied); !ok {
				panic(v)
			}
			died = true
		}
	}()
	require.NoError(t, e.worker.Handle(context.Background(), j))
	return false
}

// holdAndApprove runs the run to its hold and approves the whole turn.
func (e *freezeEnv) holdAndApprove(t *testing.T) *runs.Run {
	t.Helper()
	ctx := context.Background()
	r := e.start(t)
	require.False(t, e.handle(t, service.Job{Kind: service.JobRun, RunID: r.ID}))
	w := e.get(t, r.ID)
	require.Equal(t, runs.StatusWaiting, w.Status)
	_, err := e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI, Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
	require.NoError(t, err)
	return r
}

// freezeDeletes compiles a policy whose first rule denies delete_note.
func freezeDeletes(t *testing.T) *policy.Policy {
	t.Helper()
	f, err := policy.DecodeFile([]byte(`{"version":1,"rules":[{"id":"freeze","tools":["delete_*"],"outcome":"deny","message":"deletes are frozen"}]}`))
	require.NoError(t, err)
	p, err := policy.Compile(f, policy.Options{})
	require.NoError(t, err)
	return p
}

// deniedAtResume returns the tool_denied events of the run marked denied
// at resume, by call id.
func deniedAtResume(t *testing.T, e *freezeEnv, id string) []string {
	t.Helper()
	evs, err := e.store.Events(context.Background(), id, 0, 100)
	require.NoError(t, err)
	var ids []string
	for _, ev := range evs {
		var d struct {
			CallID         string `json:"call_id"`
			DeniedAtResume bool   `json:"denied_at_resume"`
		}
		if ev.Type != runs.EventToolDenied {
			continue
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.DeniedAtResume {
			ids = append(ids, d.CallID)
		}
	}
	return ids
}

// TestADenialAtResumeBindsTheWorkerThatTakesOver: the worker that resumes
// a turn under a freeze stores the turn with the freeze's denial before
// any of its calls runs; when it dies after the turn's first write, the
// worker that takes the run over (whose policy no longer freezes: the
// freeze was lifted, or it is a release that judges nothing at resume)
// continues from that record: it makes the idempotent write again under
// its key and never runs the call the freeze denied. Before, the denial
// lived in the first worker's memory only, and the take-over resumed the
// held turn afresh and ran the call.
func TestADenialAtResumeBindsTheWorkerThatTakesOver(t *testing.T) {
	e := newFreezeEnv(t)
	ctx := context.Background()
	r := e.holdAndApprove(t)

	e.worker.Policy = freezeDeletes(t)
	e.crash = true
	require.True(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}), "the worker dies in write_note")
	died := e.get(t, r.ID)
	require.Equal(t, runs.StatusRunning, died.Status)
	assert.Equal(t, "w1", died.PendingEffect)
	assert.False(t, died.Checkpoint.IsZero(), "the turn with its denial is on record")

	e.worker.Policy = nil // the freeze is lifted
	e.clock.Advance(time.Hour)
	require.False(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}))
	done := e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, done.Status, "%s", done.Reason)
	assert.Zero(t, e.deletes, "the call denied at resume never runs")
	assert.Equal(t, 2, e.writes, "the idempotent write is made again under its key")
	assert.Equal(t, []string{"d1"}, deniedAtResume(t, e, r.ID))
	evs, err := e.store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	assert.Contains(t, eventTypes(evs), runs.EventReclaimed)
}

// TestATakenOverResumeStoresItsDenialsBesideTheFence: a worker that takes
// over a resume from one that vanished with an idempotent write's fence
// stamped judges the turn's other calls by its policy; the denial goes on
// record with the fence still stamped (stamped again with the turn), so
// that when this worker dies too, in the write, the next one (the freeze
// lifted) continues from it: the write made again, the denied call not
// run, the run completes. Storing the turn as plain progress is refused
// while a fence is stamped, which ended such a run FAILED.
func TestATakenOverResumeStoresItsDenialsBesideTheFence(t *testing.T) {
	e := newFreezeEnv(t)
	ctx := context.Background()
	r := e.holdAndApprove(t)
	ghost, err := e.store.Claim(ctx, r.ID, "ghost")
	require.NoError(t, err)
	_, err = e.store.StampFence(ctx, ghost, "ghost", runs.Fence{CallID: "w1", Idempotent: true})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)

	e.worker.Policy = freezeDeletes(t)
	e.crash = true
	require.True(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}), "the worker dies in write_note")
	died := e.get(t, r.ID)
	require.Equal(t, runs.StatusRunning, died.Status, "%s", died.Reason)
	assert.Equal(t, "w1", died.PendingEffect)
	assert.False(t, died.Checkpoint.IsZero(), "the turn with its denial is on record")

	e.worker.Policy = nil
	e.clock.Advance(time.Hour)
	require.False(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}))
	done := e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, done.Status, "%s", done.Reason)
	assert.Zero(t, e.deletes, "the call denied at resume never runs")
	assert.Equal(t, 2, e.writes)
	assert.Equal(t, []string{"d1"}, deniedAtResume(t, e, r.ID))
}

// TestATakeOverWithNoFenceJudgesTheIdempotentWrites: a worker that takes
// over a resume from one that vanished before it stamped any write's fence
// (it wrote its claim, then died in a long read, say) judges every call of
// the held turn, its idempotent writes too: the vanished worker made none
// of them (every write is fenced first, and the fence is a write of its
// own), so a freeze deployed since stops them. Before, any take-over made
// the turn's idempotent writes unjudged, and the frozen write ran though
// no worker had ever made it.
func TestATakeOverWithNoFenceJudgesTheIdempotentWrites(t *testing.T) {
	freeze, err := policy.DecodeFile([]byte(`{"version":1,"rules":[{"id":"freeze","tools":["write_*"],"outcome":"deny","message":"writes are frozen"}]}`))
	require.NoError(t, err)
	frozen, err := policy.Compile(freeze, policy.Options{})
	require.NoError(t, err)

	e := newFreezeEnv(t)
	ctx := context.Background()
	r := e.holdAndApprove(t)
	// A worker claims the resume (its claim written) and vanishes before
	// any write of the turn.
	_, err = e.store.Claim(ctx, r.ID, "ghost")
	require.NoError(t, err)
	e.clock.Advance(time.Hour)

	e.worker.Policy = frozen
	require.False(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}))
	done := e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, done.Status, "%s", done.Reason)
	assert.Zero(t, e.writes, "no worker made the idempotent write: the freeze stops it")
	assert.Equal(t, 1, e.deletes, "delete_note is not frozen")
	assert.Equal(t, []string{"w1"}, deniedAtResume(t, e, r.ID))
	evs, err := e.store.Events(ctx, r.ID, 0, 100)
	require.NoError(t, err)
	assert.Contains(t, eventTypes(evs), runs.EventReclaimed)
}

// TestAnUnevaluableConditionDeniesAtResumeAsAtPlanning: a require_approval
// rule deployed since whose condition cannot be evaluated, and that names
// other approvers than the rules after it, reads as a denial (neither set
// of approvers may stand in for the other), at resume as at planning: the
// approved write does not run, and the tool_denied event names that rule.
// README says so beside "a require_approval rule deployed since holds
// nothing again".
func TestAnUnevaluableConditionDeniesAtResumeAsAtPlanning(t *testing.T) {
	f, err := policy.DecodeFile([]byte(`{"version":1,"rules":[{"id":"finance","tools":["write_*"],"when":"args.text > 3","outcome":"require_approval","approvers":["carol"]}]}`))
	require.NoError(t, err)
	broken, err := policy.Compile(f, policy.Options{})
	require.NoError(t, err)

	e := newFreezeEnv(t)
	r := e.holdAndApprove(t)
	e.worker.Policy = broken
	require.False(t, e.handle(t, service.Job{Kind: service.JobResume, RunID: r.ID}))
	done := e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, done.Status, "%s", done.Reason)
	assert.Zero(t, e.writes)
	assert.Equal(t, []string{"w1"}, deniedAtResume(t, e, r.ID))
}

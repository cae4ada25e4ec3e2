package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

const lookupScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"c1","name":"lookup","input":{"sku":"A"}}]},
 {"content":[{"type":"text","text":"there are some"}]}]}`

// clientEnv is newEnv with a model that calls the client tool "lookup" (a
// read: handed over at once, no approval).
func clientEnv(t *testing.T) *env {
	e := newEnv(t)
	model, err := scripted.Parse([]byte(lookupScript))
	require.NoError(t, err)
	prev := e.worker.Runner
	e.worker.Runner = func(h loop.Hooks) *loop.Runner {
		r := prev(h)
		r.Model = model
		return r
	}
	return e
}

func (e *env) startWithClientTool(t *testing.T) *runs.Run {
	t.Helper()
	req, _ := json.Marshal(service.StartRequest{Prompt: "look", Approvers: []string{"bob"}, ToolResultsTTLSeconds: 120,
		ClientTools: []service.ClientToolSpec{{Name: "lookup", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":"object"}`)}}})
	r, err := e.store.Create(context.Background(), runs.NewRun{Initiator: "alice", Approvers: []string{"bob"}, Request: req})
	require.NoError(t, err)
	return r
}

// TestHandedOverRunResumesAfterLostDispatchAndLostWorker: the run that
// waits for results was never approved (no decision on the row), yet a
// lost resume dispatch and a worker lost before any write are both
// continued from the results, never by replaying the run from its start.
func TestHandedOverRunResumesAfterLostDispatchAndLostWorker(t *testing.T) {
	e := clientEnv(t)
	ctx := context.Background()
	r := e.startWithClientTool(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	require.Equal(t, runs.StatusWaitingForToolResults, got.Status)
	assert.Equal(t, e.clock.Now().Add(2*time.Minute).Truncate(time.Millisecond), got.HandOver.Deadline, "the request's window")
	assert.Nil(t, got.Decision)

	_, err := e.store.SubmitToolResults(ctx, got, runs.ToolResults{ID: got.HandOver.ID, Submitter: "alice", Results: []loop.ClientResult{{CallID: "c1", Content: "3"}}})
	require.NoError(t, err)
	// The dispatch is lost; the sweep re-dispatches a resume job.
	e.clock.Advance(3 * time.Minute)
	_, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Len(t, e.jobs, 1)
	assert.Equal(t, service.JobResume, e.jobs[0].Kind)
	// A worker claims it and vanishes before writing anything.
	_, err = e.store.Claim(ctx, r.ID, "ghost")
	require.NoError(t, err)
	e.clock.Advance(3 * time.Minute)
	_, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Len(t, e.jobs, 2)
	assert.Equal(t, service.JobResume, e.jobs[1].Kind, "the reaped run continues from the results")
	require.NoError(t, e.worker.Handle(ctx, e.jobs[1]))
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusCompleted, got.Status)
	assert.JSONEq(t, `{"text":"there are some","reason":"completed"}`, string(got.Output))
}

// TestHandedOverRunExpires: the sweep ends a run whose results are late.
func TestHandedOverRunExpires(t *testing.T) {
	e := clientEnv(t)
	ctx := context.Background()
	r := e.startWithClientTool(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	e.clock.Advance(2*time.Minute - time.Millisecond)
	sum, err := e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, sum.Expired)
	e.clock.Advance(time.Millisecond)
	sum, err = e.sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Expired)
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusExpired, got.Status)
	assert.Equal(t, loop.ReasonToolResultsExpired, got.Reason)
}

// TestClientToolClashAtResumeEndsRun: a deployment that now has a tool of
// a waiting run's client tool name ends the run tool_changed instead of
// resuming it with another tool.
func TestClientToolClashAtResumeEndsRun(t *testing.T) {
	e := clientEnv(t)
	ctx := context.Background()
	r := e.startWithClientTool(t)
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	_, err := e.store.SubmitToolResults(ctx, got, runs.ToolResults{ID: got.HandOver.ID, Submitter: "alice", Results: []loop.ClientResult{{CallID: "c1", Content: "3"}}})
	require.NoError(t, err)
	prev := e.worker.Runner
	e.worker.Runner = func(h loop.Hooks) *loop.Runner {
		r := prev(h)
		tb, err := r.Tools.With(&loop.FuncTool{Def: loop.Definition{Name: "lookup", Effect: loop.EffectRead},
			CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
				return loop.Result{Content: "server"}, nil
			}})
		require.NoError(t, err)
		r.Tools = tb
		return r
	}
	require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}))
	got = e.get(t, r.ID)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonToolChanged, got.Reason)
}

// TestToolExecutorsValidate: tool_executors take principals and
// "group:<name>" groups (whether the directory has the group is the API's
// check); a repeat of either, an empty group name and a bad principal are
// 422 naming the field and the index.
func TestToolExecutorsValidate(t *testing.T) {
	tools, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead}})
	require.NoError(t, err)
	client := []service.ClientToolSpec{{Name: "lookup", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":"object"}`)}}
	tests := []struct {
		name      string
		executors []string
		want      string // "" = accepted
	}{
		{"principals", []string{"svc-orders", "Carol@Example.com", "arn:aws:iam::123456789012:role/order-worker"}, ""},
		{"a group", []string{"group:ops"}, ""},
		{"groups and principals", []string{"group:ops", "carol", "group:finance"}, ""},
		{"a group and one of its members", []string{"group:ops", "bob@example.com"}, ""},
		{"a group twice", []string{"group:ops", "carol", "group:ops"}, `tool_executors[2]: "group:ops" is listed twice`},
		{"an empty group name", []string{"carol", "group:"}, `tool_executors[1]: "group:" names no group (group:<name>)`},
		{"a principal twice, canonically", []string{"Carol@Example.com", "carol+x@example.com"}, `tool_executors[1]: "carol+x@example.com" is listed twice`},
		{"not a principal", []string{"group:ops", "a b"}, `tool_executors[1]: "a b" contains spaces`},
		{"a role session", []string{"carol", "arn:aws:sts::123456789012:assumed-role/Worker/job-42"},
			`tool_executors[1]: "arn:aws:sts::123456789012:assumed-role/Worker/job-42": every session of a role is the same principal; name the role ARN instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := service.StartRequest{Prompt: "x", Approvers: []string{"bob"}, ClientTools: client, ToolExecutors: tt.executors}
			err := r.Validate(tools)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, runs.EInvalid, runs.ErrorCode(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

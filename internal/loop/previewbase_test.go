package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// baseRecorder records the PreviewBase each call ran with, by call input's
// path.
type baseRecorder struct {
	mu    sync.Mutex
	bases map[string]string
}

func (b *baseRecorder) seen(path string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	base, ok := b.bases[path]
	return base, ok
}

// basedRunner holds a turn of a write whose preview has base "base:<path>"
// (or fails with previewErr) and a read sibling that needs no approval. The
// write refuses with BaseChanged when its path is "stale".
func basedRunner(t *testing.T, previewErr error) (*loop.Runner, *baseRecorder) {
	t.Helper()
	rec := &baseRecorder{bases: map[string]string{}}
	record := func(ctx context.Context, input json.RawMessage) string {
		var in struct{ Path string }
		_ = json.Unmarshal(input, &in)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.bases[in.Path] = loop.PreviewBase(ctx)
		return in.Path
	}
	write := &loop.FuncTool{
		Def: loop.Definition{Name: "write_doc", Description: "write", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite, Idempotent: true},
		CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
			if record(ctx, input) == "stale" {
				res := loop.ErrorResult("document changed after review; nothing was changed")
				res.BaseChanged = true
				return res, nil
			}
			return loop.Result{Content: "written"}, nil
		},
		BasedPreviewFunc: func(_ context.Context, input json.RawMessage) (string, string, error) {
			var in struct{ Path string }
			_ = json.Unmarshal(input, &in)
			return "diff of " + in.Path, "base:" + in.Path, previewErr
		},
	}
	read := &loop.FuncTool{
		Def: loop.Definition{Name: "read_doc", Description: "read", InputSchema: json.RawMessage(pathSchema), Effect: loop.EffectRead},
		CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
			record(ctx, input)
			return loop.Result{Content: "text"}, nil
		},
	}
	tools, err := loop.NewToolbox(write, read)
	require.NoError(t, err)
	return &loop.Runner{
		Model: scriptModel(
			asst(use("r1", "read_doc", `{"path":"r"}`), use("w1", "write_doc", `{"path":"a","text":"one"}`), use("w2", "write_doc", `{"path":"stale","text":"two"}`)),
			asst(say("done"))),
		Tools: tools, Now: fixedClock(time.Millisecond), NewID: seqIDs("susp-"),
	}, rec
}

func suspendBased(t *testing.T, r *loop.Runner) *loop.SuspendedState {
	t.Helper()
	out, err := r.Run(context.Background(), request("write"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	// Through the saved form, as a worker resumes it.
	raw, err := out.Suspended.Encode()
	require.NoError(t, err)
	st, err := loop.DecodeState(raw)
	require.NoError(t, err)
	return st
}

// A held call's preview base is kept with it in the saved state and given
// to the approved call; a call that needed no approval runs without one;
// a refusal for a changed base is on the call's tool_executed step.
func TestPreviewBaseReachesTheApprovedCall(t *testing.T) {
	r, rec := basedRunner(t, nil)
	st := suspendBased(t, r)
	bases := map[string]string{}
	for _, c := range st.PendingCalls {
		bases[c.ID] = c.PreviewBase
	}
	assert.Equal(t, map[string]string{"r1": "", "w1": "base:a", "w2": "base:stale"}, bases)
	assert.Equal(t, "diff of a", st.Previews["w1"])

	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.Equal(t, loop.ReasonCompleted, out.Reason)
	for path, want := range map[string]string{"r": "", "a": "base:a", "stale": "base:stale"} {
		got, ran := rec.seen(path)
		assert.True(t, ran, "call on %s ran", path)
		assert.Equal(t, want, got, "PreviewBase of the call on %s", path)
	}
	changed := map[string]bool{}
	for _, s := range out.Trace {
		if s.Kind == loop.StepToolExecuted {
			changed[s.CallID] = s.BaseChanged
		}
	}
	assert.Equal(t, map[string]bool{"r1": false, "w1": false, "w2": true}, changed)
	res, ok := resultFor(out.Transcript, "w2")
	require.True(t, ok)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "changed after review")
}

// An edited call runs with the base of the preview the approver saw.
func TestPreviewBaseOfAnEditedCall(t *testing.T) {
	r, rec := basedRunner(t, nil)
	st := suspendBased(t, r)
	_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"a","text":"edited"}`)},
		{CallID: "w2", Action: loop.ActionDeny},
	}})
	require.NoError(t, err)
	got, _ := rec.seen("a")
	assert.Equal(t, "base:a", got)
}

// A state saved before bases existed has none: its calls run unchecked.
func TestStateWithoutPreviewBase(t *testing.T) {
	r, rec := basedRunner(t, nil)
	st := suspendBased(t, r)
	raw, err := st.Encode()
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, c := range doc["pending_calls"].([]any) {
		delete(c.(map[string]any), "preview_base")
	}
	old, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NotContains(t, string(old), "preview_base")
	st, err = loop.DecodeState(old)
	require.NoError(t, err)

	_, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	got, ran := rec.seen("a")
	assert.True(t, ran)
	assert.Equal(t, "", got)
}

// A preview that could not be computed has no base: the approver saw
// nothing to bind to.
func TestPreviewErrorHasNoBase(t *testing.T) {
	r, _ := basedRunner(t, errors.New("store unreachable"))
	st := suspendBased(t, r)
	for _, c := range st.PendingCalls {
		assert.Empty(t, c.PreviewBase, "call %s", c.ID)
	}
}

// The base survives a checkpoint in the middle of the resumed turn.
func TestPreviewBaseCrossesACheckpoint(t *testing.T) {
	r, rec := basedRunner(t, nil)
	st := suspendBased(t, r)
	yields := 0
	r.Hooks.Yield = func(context.Context) bool { yields++; return yields == 1 }
	out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeCheckpoint, out.Kind)
	require.NotNil(t, out.Checkpoint.Turn)
	_, ran := rec.seen("a")
	require.False(t, ran, "the checkpoint comes before the write")
	r.Hooks.Yield = nil
	final, _ := continueUntilDone(t, r, out, err)
	assert.Equal(t, loop.ReasonCompleted, final.Reason)
	got, _ := rec.seen("a")
	assert.Equal(t, "base:a", got)
}

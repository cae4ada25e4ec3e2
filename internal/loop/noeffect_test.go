package loop_test

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
)

// failingWriteRunner holds a turn with one write call whose Call returns
// callErr and whose Preview returns previewErr.
func failingWriteRunner(t *testing.T, callErr, previewErr error) (*loop.Runner, *loop.SuspendedState, *[]string) {
	t.Helper()
	write := &loop.FuncTool{
		Def: loop.Definition{Name: "write_doc", Description: "write", InputSchema: json.RawMessage(writeSchema), Effect: loop.EffectWrite},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			return loop.Result{}, callErr
		},
		PreviewFunc: func(context.Context, json.RawMessage) (string, error) {
			return "diff", previewErr
		},
	}
	tools, err := loop.NewToolbox(write)
	require.NoError(t, err)
	var fence []string
	r := &loop.Runner{
		Model: scriptModel(asst(use("w1", "write_doc", `{"path":"a","text":"one"}`)), asst(say("done"))),
		Tools: tools, Now: fixedClock(time.Millisecond), NewID: seqIDs("susp-"),
		Hooks: loop.Hooks{
			BeforeEffect: func(_ context.Context, c loop.FencedCall) error { fence = append(fence, "stamp "+c.ID); return nil },
			AfterEffect: func(_ context.Context, c loop.FencedCall, _ loop.Result) error {
				fence = append(fence, "clear "+c.ID)
				return nil
			},
		},
	}
	out, err := r.Run(context.Background(), request("write"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	return r, out.Suspended, &fence
}

// A write tool that fails before it changed anything says so with
// ErrNoEffect; the loop lifts the fence, so the worker does not record an
// interrupted write. Any other Go error leaves the fence stamped.
func TestWriteThatFailedBeforeItsEffectLiftsTheFence(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantFence []string
	}{
		{"no effect", fmt.Errorf("read marker: %w: %w", loop.ErrNoEffect, errors.New("disk on fire")), []string{"stamp w1", "clear w1"}},
		{"outcome unknown", errors.New("timeout after the request was sent"), []string{"stamp w1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, st, fence := failingWriteRunner(t, tt.err, nil)
			_, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
			require.Error(t, err, "an infrastructure failure still stops the run")
			assert.ErrorIs(t, err, tt.err)
			assert.Equal(t, tt.wantFence, *fence)
		})
	}
}

// Approvers never see the text of a preview's Go error (issue #10 item 3:
// "preview unavailable: … openat …").
func TestPreviewErrorsAreNotShownRaw(t *testing.T) {
	_, st, _ := failingWriteRunner(t, nil, errors.New("openat /srv/content/x: permission denied"))
	assert.Equal(t, "preview unavailable: the tool could not compute it", st.Previews["w1"])
}

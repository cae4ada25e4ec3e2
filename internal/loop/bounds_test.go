package loop_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// A turn that needs approval and holds more calls than a suspension may
// hold runs none of them: each gets an error result naming the limit, and
// the model goes on (here it then asks for one write, which suspends).
func TestTooManyHeldCallsAreToolErrors(t *testing.T) {
	var uses []loop.Block
	for i := range loop.MaxHeldCalls + 1 {
		uses = append(uses, use(fmt.Sprintf("r%d", i), "read_doc", `{"path":"a"}`))
	}
	uses = append(uses, use("w", "write_doc", `{"path":"a","text":"x"}`))
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(uses...), asst(use("w2", "write_doc", `{"path":"a","text":"x"}`))), log)
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind, "the model's next, smaller turn suspends")
	assert.Empty(t, log.list(), "no call of the oversized turn ran")
	res, ok := resultFor(out.Transcript, "w")
	require.True(t, ok)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, fmt.Sprintf("this turn has %d tool calls", loop.MaxHeldCalls+2))
	assert.Contains(t, res.Content, fmt.Sprintf("at most %d calls", loop.MaxHeldCalls))

	// A turn of exactly MaxHeldCalls calls suspends.
	uses = uses[:loop.MaxHeldCalls-1]
	uses = append(uses, use("w", "write_doc", `{"path":"a","text":"x"}`))
	out, err = newRunner(t, scriptModel(asst(uses...)), log).Run(context.Background(), request("go"))
	require.NoError(t, err)
	require.Equal(t, loop.OutcomeSuspended, out.Kind)
	assert.Len(t, out.Suspended.PendingCalls, loop.MaxHeldCalls)
}

func TestOverlongCallIDIsAnInvalidTurn(t *testing.T) {
	id := strings.Repeat("x", loop.MaxCallIDBytes+1)
	log := &execLog{}
	out, err := newRunner(t, scriptModel(asst(use(id, "read_doc", `{"path":"a"}`))), log).Run(context.Background(), request("go"))
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonProviderFailed, out.Reason)
	assert.Contains(t, out.Detail, fmt.Sprintf("a tool_use id is %d bytes, at most %d allowed", len(id), loop.MaxCallIDBytes))
	assert.Empty(t, log.list())
}

// An edited call whose original input is large keeps the original's digest
// and size in the audit step, not the input, so the step stays small.
func TestEditOfALargeCallAuditsTheOriginalByDigest(t *testing.T) {
	text := strings.Repeat("a", loop.MaxAuditInputBytes)
	orig := `{"path":"a","text":"` + text + `"}`
	log := &execLog{}
	r := newRunner(t, scriptModel(asst(use("w1", "write_doc", orig)), asst(say("done"))), log)
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	st := out.Suspended
	out, err = r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Calls: []loop.CallDecision{
		{CallID: "w1", Action: loop.ActionEdit, Input: json.RawMessage(`{"path":"a","text":"short"}`)},
	}})
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(orig))
	var found bool
	for _, s := range out.Trace {
		if s.Kind == loop.StepToolExecuted && s.CallID == "w1" {
			found = true
			assert.Nil(t, s.OriginalInput)
			assert.Equal(t, hex.EncodeToString(sum[:]), s.OriginalInputSHA256)
			assert.Equal(t, len(orig), s.OriginalInputSize)
			assert.JSONEq(t, `{"path":"a","text":"short"}`, string(s.EditedInput))
			b, err := loop.MarshalJSON(s)
			require.NoError(t, err)
			assert.Less(t, len(b), 1024, "the audit step stays small")
		}
	}
	assert.True(t, found)
}

// A preview over MaxPreviewBytes is cut at a character boundary and says so.
func TestOversizedPreviewIsCutAndMarked(t *testing.T) {
	big := strings.Repeat("é", loop.MaxPreviewBytes/2+10)
	tb, err := loop.NewToolbox(&loop.FuncTool{
		Def: loop.Definition{Name: "w", InputSchema: json.RawMessage(`{"type":"object"}`), Effect: loop.EffectWrite},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			return loop.Result{Content: "ok"}, nil
		},
		PreviewFunc: func(context.Context, json.RawMessage) (string, error) { return "x" + big, nil },
	})
	require.NoError(t, err)
	r := &loop.Runner{Model: scriptModel(asst(use("c", "w", `{}`))), Tools: tb}
	out, err := r.Run(context.Background(), request("go"))
	require.NoError(t, err)
	p := out.Suspended.Previews["c"]
	assert.Contains(t, p, fmt.Sprintf("(preview truncated by agentgate: %d of %d bytes kept)", loop.MaxPreviewBytes-1, len(big)+1))
	whole := "x" + big
	assert.True(t, strings.HasPrefix(p, whole[:loop.MaxPreviewBytes-1]+"\n… (preview truncated"))
}

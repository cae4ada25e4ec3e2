package service_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// A held turn whose state is over runs.MaxStateSize ends the run
// FAILED/state_too_large with a detail naming the largest call, its sizes
// and the limit; nothing of the turn runs and nobody is asked.
//
//agentgate:megabytes
func TestWorkerEndsAnOversizedSuspensionStateTooLarge(t *testing.T) {
	e := newEnv(t)
	var uses []loop.Block
	for i := range 3 {
		raw := make([]byte, 1<<20)
		_, _ = rand.Read(raw)
		in, _ := json.Marshal(map[string]string{"text": base64.StdEncoding.EncodeToString(raw)})
		uses = append(uses, loop.ToolUseBlock(fmt.Sprintf("w%d", i), "write_note", in))
	}
	model := loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{Message: loop.Message{Role: loop.RoleAssistant, Content: uses}, StopReason: loop.StopToolUse}, nil
	})
	runner := e.worker.Runner
	e.worker.Runner = func(h loop.Hooks) *loop.Runner {
		r := runner(h)
		r.Model = model
		return r
	}
	r := e.start(t)
	require.NoError(t, e.worker.Handle(context.Background(), service.Job{Kind: service.JobRun, RunID: r.ID}))
	got := e.get(t, r.ID)
	assert.Equal(t, runs.StatusFailed, got.Status)
	assert.Equal(t, loop.ReasonStateTooLarge, got.Reason)
	var out struct{ Reason, Detail string }
	require.NoError(t, json.Unmarshal(got.Output, &out))
	assert.Equal(t, "state_too_large", out.Reason)
	assert.Contains(t, out.Detail, fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	assert.Contains(t, out.Detail, "call w0 (write_note) input ")
	assert.Equal(t, 0, e.writes, "nothing of the turn ran")
	assert.Empty(t, e.notes, "nobody is asked to approve")
}

package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

func loadScript(t *testing.T, name string) *Model {
	t.Helper()
	m, err := Load(filepath.Join("testdata", name))
	require.NoError(t, err)
	return m
}

func toolResults(ids ...string) loop.Message {
	msg := loop.Message{Role: loop.RoleUser}
	for _, id := range ids {
		msg.Content = append(msg.Content, loop.ToolResultBlock(id, loop.Result{Content: "ok"}))
	}
	return msg
}

func TestGenerateChoosesTurnByAssistantCount(t *testing.T) {
	m := loadScript(t, "two_turns.json")
	first := loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{
		loop.ToolUseBlock("toolu_read_1", "read_file", json.RawMessage(`{"path":"notes.txt"}`)),
		loop.ToolUseBlock("toolu_write_1", "write_file", json.RawMessage(`{"path":"notes.txt","content":"hello"}`)),
	}}
	tests := []struct {
		name       string
		messages   []loop.Message
		wantStop   loop.StopReason
		wantText   string
		wantToolID []string
		wantUsage  *loop.Usage
		wantErr    error
	}{
		{
			name:       "first turn",
			messages:   []loop.Message{loop.UserText("update notes")},
			wantStop:   loop.StopToolUse,
			wantText:   "I will read the file and then update it.",
			wantToolID: []string{"toolu_read_1", "toolu_write_1"},
			wantUsage:  &loop.Usage{InputTokens: 120, OutputTokens: 30},
		},
		{
			name:     "second turn defaults to end_turn",
			messages: []loop.Message{loop.UserText("update notes"), first, toolResults("toolu_read_1", "toolu_write_1")},
			wantStop: loop.StopEndTurn,
			wantText: "Done: notes.txt now says hello.",
		},
		{
			name: "past the end",
			messages: []loop.Message{loop.UserText("update notes"), first, toolResults("toolu_read_1", "toolu_write_1"),
				{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("Done.")}}, loop.UserText("again")},
			wantErr: ErrScriptEnded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := m.Generate(context.Background(), loop.ModelRequest{Messages: tt.messages})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "script ended")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, loop.RoleAssistant, resp.Message.Role)
			assert.Equal(t, tt.wantStop, resp.StopReason)
			assert.Equal(t, tt.wantText, resp.Message.Text())
			var ids []string
			for _, b := range resp.Message.ToolUses() {
				ids = append(ids, b.ID)
			}
			assert.Equal(t, tt.wantToolID, ids)
			if tt.wantUsage != nil {
				assert.Equal(t, *tt.wantUsage, resp.Usage)
			} else {
				assert.Positive(t, resp.Usage.InputTokens)
				assert.Positive(t, resp.Usage.OutputTokens)
			}
		})
	}
}

// TestResumeInFreshProcess plays turn 0, encodes the transcript as a
// SuspendedState would, decodes it into fresh values with a freshly loaded
// model, and checks the script continues at turn 1.
func TestResumeInFreshProcess(t *testing.T) {
	ctx := context.Background()
	before := loadScript(t, "two_turns.json")
	tr := loop.Transcript{System: "be brief", Messages: []loop.Message{loop.UserText("update notes")}}
	resp, err := before.Generate(ctx, loop.ModelRequest{System: tr.System, Messages: tr.Messages})
	require.NoError(t, err)
	tr.Messages = append(tr.Messages, resp.Message)

	raw, err := (&loop.SuspendedState{SchemaVersion: loop.SchemaVersion, Transcript: tr}).Encode()
	require.NoError(t, err)
	state, err := loop.DecodeState(raw)
	require.NoError(t, err)

	after := loadScript(t, "two_turns.json")
	msgs := append(state.Transcript.Messages, toolResults("toolu_read_1", "toolu_write_1"))
	resp, err = after.Generate(ctx, loop.ModelRequest{System: state.Transcript.System, Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "Done: notes.txt now says hello.", resp.Message.Text())
	assert.Equal(t, loop.StopEndTurn, resp.StopReason)
}

func TestEstimatedUsageIsDeterministic(t *testing.T) {
	m, err := New([]Turn{{Content: []loop.Block{loop.TextBlock("0123456789abcdef")}}})
	require.NoError(t, err)
	req := loop.ModelRequest{System: "sys", Messages: []loop.Message{loop.UserText("hello there")},
		Tools: []loop.ToolSpec{{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	a, err := m.Generate(context.Background(), req)
	require.NoError(t, err)
	b, err := m.Generate(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, a.Usage, b.Usage)
	// [{"type":"text","text":"0123456789abcdef"}] is 41 bytes: 10 tokens.
	assert.Equal(t, int64(10), a.Usage.OutputTokens)
	inRaw, _ := json.Marshal(map[string]any{"system": req.System, "messages": req.Messages, "tools": req.Tools})
	assert.Equal(t, int64(len(inRaw)/4), a.Usage.InputTokens)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr string
	}{
		{"not json", `{"turns":`, "parse script"},
		{"unknown field", `{"turns":[],"extra":1}`, "unknown field"},
		{"unknown block type", `{"turns":[{"content":[{"type":"image"}]}]}`, `turn 0: block 0: unknown block type "image"`},
		{"tool_use without id", `{"turns":[{"content":[{"type":"tool_use","name":"x","input":{}}]}]}`, "needs id and name"},
		{"tool_result in assistant turn", `{"turns":[{"content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}]}`, "belong to user turns"},
		{"unknown stop reason", `{"turns":[{"content":[],"stop_reason":"stop"}]}`, `unknown stop_reason "stop"`},
		{"negative usage", `{"turns":[{"content":[],"usage":{"input_tokens":-1,"output_tokens":0}}]}`, "negative"},
		{"trailing data", `{"turns":[]} {}`, "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.script))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist), "got %v, want a not-exist error", err)
}

func TestGenerateHonoursCancelledContext(t *testing.T) {
	m := loadScript(t, "two_turns.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Generate(ctx, loop.ModelRequest{Messages: []loop.Message{loop.UserText("x")}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestGenerateReturnsACopy(t *testing.T) {
	m := loadScript(t, "two_turns.json")
	req := loop.ModelRequest{Messages: []loop.Message{loop.UserText("x")}}
	a, err := m.Generate(context.Background(), req)
	require.NoError(t, err)
	a.Message.Content[0].Text = "changed"
	b, err := m.Generate(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, "I will read the file and then update it.", b.Message.Content[0].Text)
}

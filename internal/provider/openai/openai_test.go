package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/providertest"
)

const (
	readID  = "call_Vh2mF3JdQ0Q1Z7aYx9kLmN4p"
	writeID = "call_8sKqT2wRb5LcX0nHjE6uYg1d"
)

func newModel(t *testing.T, srv *providertest.Server, mod func(*Options)) *Model {
	t.Helper()
	opts := Options{Model: "gpt-4.1", APIKey: "sk-test", BaseURL: srv.URL + "/v1/", HTTPClient: srv.Client()}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(opts)
	require.NoError(t, err)
	return m
}

func toolUseIDs(msg loop.Message) []string {
	var ids []string
	for _, b := range msg.ToolUses() {
		ids = append(ids, b.ID)
	}
	return ids
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		name     string
		req      loop.ModelRequest
		replies  []providertest.Reply
		golden   string
		wantText string
		wantIDs  []string
		wantStop loop.StopReason
		wantUse  loop.Usage
		wantErr  []string
	}{
		{
			name:     "plain answer",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "completion_text.json"}},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 118, OutputTokens: 19},
		},
		{
			name:     "one tool call",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "completion_tool_call.json"}},
			golden:   "request_first",
			wantIDs:  []string{"call_abc123"},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 82, OutputTokens: 17},
		},
		{
			name:     "parallel tool calls",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "completion_parallel_tool_calls.json"}},
			golden:   "request_first",
			wantText: "I will read the file first, then replace it.",
			wantIDs:  []string{readID, writeID},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 142, OutputTokens: 58},
		},
		{
			name:     "tool result round trip",
			req:      providertest.RoundTripRequest(readID, writeID),
			replies:  []providertest.Reply{{File: "completion_after_tool_results.json"}},
			golden:   "request_round_trip",
			wantText: `notes.txt says "buy milk". I could not replace it: the file is read-only.`,
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 231, OutputTokens: 22},
		},
		{
			name:     "refusal",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "completion_refusal.json"}},
			golden:   "request_first",
			wantText: "I'm sorry, I can't assist with that request.",
			wantStop: loop.StopRefusal,
			wantUse:  loop.Usage{InputTokens: 40, OutputTokens: 11},
		},
		{
			name:     "compatible server: stop with tool calls, missing id, arguments not JSON",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "completion_ollama_tool_call.json"}},
			golden:   "request_first",
			wantIDs:  []string{"call_x7pqgk2w", "call_chatcmpl-310_1"},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 201, OutputTokens: 25},
		},
		{
			name: "429 then success",
			req:  providertest.FirstRequest(),
			replies: []providertest.Reply{
				{Status: http.StatusTooManyRequests, File: "error_429.json", Header: map[string]string{"retry-after-ms": "1"}},
				{File: "completion_text.json"},
			},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 118, OutputTokens: 19},
		},
		{
			name:    "400 ends as an error with the provider's message",
			req:     providertest.RoundTripRequest(readID, writeID),
			replies: []providertest.Reply{{Status: http.StatusBadRequest, File: "error_400.json", Header: map[string]string{"x-request-id": "req_7b3c0e5f"}}},
			wantErr: []string{"openai: HTTP 400 invalid_request_error: Invalid parameter: messages with role 'tool' must be a response", "req_7b3c0e5f"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, tt.replies...)
			resp, err := newModel(t, srv, nil).Generate(context.Background(), tt.req)
			reqs := srv.Requests()
			require.Len(t, reqs, len(tt.replies), "requests sent")
			for _, r := range reqs {
				assert.Equal(t, "/v1/chat/completions", r.Path)
				assert.Equal(t, http.MethodPost, r.Method)
				assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
			}
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				assert.NotContains(t, err.Error(), providertest.Prompt, "the error must not carry the prompt")
				var ae *sdk.Error
				assert.True(t, errors.As(err, &ae), "the SDK error stays reachable")
				return
			}
			require.NoError(t, err)
			providertest.GoldenJSON(t, tt.golden, srv.LastBody())
			assert.Equal(t, loop.RoleAssistant, resp.Message.Role)
			assert.Equal(t, tt.wantText, resp.Message.Text())
			assert.Equal(t, tt.wantIDs, toolUseIDs(resp.Message))
			assert.Equal(t, tt.wantStop, resp.StopReason)
			assert.Equal(t, tt.wantUse, resp.Usage)
			require.NoError(t, loop.Transcript{Messages: []loop.Message{resp.Message}}.Validate())
		})
	}
}

// TestArgumentsRoundTrip checks tool call arguments as the provider sent
// them become our input and go back to the provider as the same text.
func TestArgumentsRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		args      string
		wantInput string
		wantBack  string
	}{
		{"compact object", `{"path":"notes.txt"}`, `{"path":"notes.txt"}`, `{"path":"notes.txt"}`},
		{"object with newlines", "{\n\"path\": \"notes.txt\"\n}", "{\n\"path\": \"notes.txt\"\n}", "{\n\"path\": \"notes.txt\"\n}"},
		{"empty", ``, `{}`, `{}`},
		{"not JSON", `{path: notes.txt}`, `"{path: notes.txt}"`, `{path: notes.txt}`},
		{"a JSON string", `"notes.txt"`, `"\"notes.txt\""`, `"notes.txt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.args)
			assert.Equal(t, tt.wantInput, string(in))
			assert.True(t, json.Valid(in), "input must be JSON: %s", in)
			assert.Equal(t, tt.wantBack, arguments(in))
		})
	}
}

func TestIDsSurviveSuspension(t *testing.T) {
	ctx := context.Background()
	first := providertest.NewServer(t, providertest.Reply{File: "completion_parallel_tool_calls.json"})
	req := providertest.FirstRequest()
	resp, err := newModel(t, first, nil).Generate(ctx, req)
	require.NoError(t, err)
	ids := toolUseIDs(resp.Message)
	require.Equal(t, []string{readID, writeID}, ids)

	tr := loop.Transcript{System: req.System, Messages: append(req.Messages, resp.Message)}
	decoded := providertest.ThroughSuspendedState(t, tr)
	decoded.Messages = append(decoded.Messages, providertest.ToolResults(ids[0], ids[1]))

	second := providertest.NewServer(t, providertest.Reply{File: "completion_after_tool_results.json"})
	_, err = newModel(t, second, nil).Generate(ctx, loop.ModelRequest{System: decoded.System, Messages: decoded.Messages, Tools: providertest.Tools()})
	require.NoError(t, err)

	var body struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(second.LastBody(), &body))
	require.Len(t, body.Messages, 5, "system, user, assistant, two tool messages")
	var sentCalls, sentResults []string
	for _, c := range body.Messages[2].ToolCalls {
		sentCalls = append(sentCalls, c.ID)
	}
	for _, m := range body.Messages[3:] {
		assert.Equal(t, "tool", m.Role)
		sentResults = append(sentResults, m.ToolCallID)
	}
	assert.Equal(t, ids, sentCalls)
	assert.Equal(t, ids, sentResults)
	providertest.GoldenJSON(t, "request_after_resume", second.LastBody())
}

func TestCompatibleServerOptions(t *testing.T) {
	// A key in the SDK's own environment variable must not reach a server
	// we were not given a key for.
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/unused")
	srv := providertest.NewServer(t, providertest.Reply{File: "completion_text.json"})
	m := newModel(t, srv, func(o *Options) {
		o.APIKey = ""
		o.Model = "llama3.1:8b"
		o.LegacyMaxTokens = true
		o.DisableParallelToolCalls = true
		o.MaxTokens = 1000
	})
	_, err := m.Generate(context.Background(), providertest.FirstRequest())
	require.NoError(t, err)
	assert.Empty(t, srv.Requests()[0].Header.Get("Authorization"))
	providertest.GoldenJSON(t, "request_compatible_server", srv.LastBody())
}

func TestMessageMapping(t *testing.T) {
	tests := []struct {
		name string
		msg  loop.Message
		want string
	}{
		{
			name: "user text and results: tool messages first",
			msg: loop.Message{Role: loop.RoleUser, Content: []loop.Block{
				loop.TextBlock("and then?"),
				loop.ToolResultBlock("call_1", loop.Result{Content: "ok"}),
			}},
			want: `[{"content":"ok","tool_call_id":"call_1","role":"tool"},{"content":"and then?","role":"user"}]`,
		},
		{
			name: "an error result is marked once",
			msg: loop.Message{Role: loop.RoleUser, Content: []loop.Block{
				loop.ToolResultBlock("call_1", loop.Result{Content: "boom", IsError: true}),
				loop.ToolResultBlock("call_2", loop.Result{Content: "Error: tool \"w\" was denied by the approver.", IsError: true}),
			}},
			want: `[{"content":"Error: boom","tool_call_id":"call_1","role":"tool"},{"content":"Error: tool \"w\" was denied by the approver.","tool_call_id":"call_2","role":"tool"}]`,
		},
		{
			name: "several user texts become parts",
			msg:  loop.Message{Role: loop.RoleUser, Content: []loop.Block{loop.TextBlock("a"), loop.TextBlock("b")}},
			want: `[{"content":[{"text":"a","type":"text"},{"text":"b","type":"text"}],"role":"user"}]`,
		},
		{
			name: "empty assistant turn keeps an empty content",
			msg:  loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{}},
			want: `[{"content":"","role":"assistant"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := messageParams(tt.msg)
			require.NoError(t, err)
			raw, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(raw))
		})
	}
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		finish string
		calls  bool
		want   loop.StopReason
	}{
		{"stop", false, loop.StopEndTurn},
		{"stop", true, loop.StopToolUse},
		{"tool_calls", true, loop.StopToolUse},
		{"function_call", true, loop.StopToolUse},
		{"length", false, loop.StopMaxTokens},
		{"content_filter", false, loop.StopRefusal},
		{"", false, loop.StopOther},
	}
	for _, tt := range tests {
		t.Run(tt.finish, func(t *testing.T) {
			assert.Equal(t, tt.want, stopReason(tt.finish, tt.calls))
		})
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no model", Options{APIKey: "k"}, "model id is required"},
		{"no key and no base URL", Options{Model: "m"}, "API key is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	limited := providertest.Reply{Status: http.StatusTooManyRequests, File: "error_429.json", Header: map[string]string{"retry-after-ms": "1"}}
	srv := providertest.NewServer(t, limited, limited)
	m := newModel(t, srv, func(o *Options) { o.MaxRetries = 1 })
	_, err := m.Generate(context.Background(), providertest.FirstRequest())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "openai: HTTP 429 rate_limit_exceeded: Rate limit reached for gpt-4.1")
	assert.Len(t, srv.Requests(), 2, "one call and one retry")
}

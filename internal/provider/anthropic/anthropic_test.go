package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/providertest"
)

const (
	readID  = "toolu_015Sh8xNQBhJJnBCLz8x9F6f"
	writeID = "toolu_019FKPTDNUQxrGzdjFtpP9Yp"
)

func newModel(t *testing.T, srv *providertest.Server) *Model {
	t.Helper()
	m, err := New(Options{Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", BaseURL: srv.URL, HTTPClient: srv.Client()})
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
			replies:  []providertest.Reply{{File: "message_text.json"}},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 412, OutputTokens: 23},
		},
		{
			name:     "one tool call",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "message_tool_use.json"}},
			golden:   "request_first",
			wantText: "I will read the file first.",
			wantIDs:  []string{"toolu_019dfQh1VSo4ykF3MUFvGpMg"},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 414, OutputTokens: 61},
		},
		{
			name:     "parallel tool calls, cache tokens counted as input",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "message_parallel_tool_use.json"}},
			golden:   "request_first",
			wantText: "I will read the file first, then replace it.",
			wantIDs:  []string{readID, writeID},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 598 + 100 + 2000, OutputTokens: 112},
		},
		{
			name:     "tool result round trip",
			req:      providertest.RoundTripRequest(readID, writeID),
			replies:  []providertest.Reply{{File: "message_after_tool_results.json"}},
			golden:   "request_round_trip",
			wantText: `notes.txt says "buy milk". I could not replace it: the file is read-only.`,
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 790, OutputTokens: 31},
		},
		{
			name:     "refusal",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "message_refusal.json"}},
			golden:   "request_first",
			wantText: "I can't help with that.",
			wantStop: loop.StopRefusal,
			wantUse:  loop.Usage{InputTokens: 28, OutputTokens: 9},
		},
		{
			name: "429 then success",
			req:  providertest.FirstRequest(),
			replies: []providertest.Reply{
				{Status: http.StatusTooManyRequests, File: "error_429.json", Header: map[string]string{"retry-after-ms": "1"}},
				{File: "message_text.json"},
			},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 412, OutputTokens: 23},
		},
		{
			name:    "400 ends as an error with the provider's message",
			req:     providertest.RoundTripRequest(readID, "toolu_unknown"),
			replies: []providertest.Reply{{Status: http.StatusBadRequest, File: "error_400.json", Header: map[string]string{"request-id": "req_011CSHoEeqs5C35K2UUqR7Fz"}}},
			wantErr: []string{"anthropic: HTTP 400 invalid_request_error: messages.2.content.0: unexpected `tool_use_id`", "req_011CSHoEeqs5C35K2UUqR7Fz"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, tt.replies...)
			resp, err := newModel(t, srv).Generate(context.Background(), tt.req)
			reqs := srv.Requests()
			require.Len(t, reqs, len(tt.replies), "requests sent")
			for _, r := range reqs {
				assert.Equal(t, "/v1/messages", r.Path)
				assert.Equal(t, http.MethodPost, r.Method)
				// This SDK version sends the API key as a bearer token.
				assert.Equal(t, "Bearer sk-ant-test", r.Header.Get("Authorization"))
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

func TestToolInputsAreKeptExactly(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Reply{File: "message_parallel_tool_use.json"})
	resp, err := newModel(t, srv).Generate(context.Background(), providertest.FirstRequest())
	require.NoError(t, err)
	uses := resp.Message.ToolUses()
	require.Len(t, uses, 2)
	assert.Equal(t, loop.ToolUseBlock(readID, "read_file", json.RawMessage(`{"path":"notes.txt"}`)), uses[0])
	assert.JSONEq(t, `{"path":"notes.txt","content":"Hello!"}`, string(uses[1].Input))
}

// TestIDsSurviveSuspension takes the provider's tool-use ids from a real
// answer, stores the transcript the way a suspension does, decodes it in
// fresh values with a fresh Model, and checks the next request carries the
// same ids in both the tool_use and the tool_result blocks.
func TestIDsSurviveSuspension(t *testing.T) {
	ctx := context.Background()
	first := providertest.NewServer(t, providertest.Reply{File: "message_parallel_tool_use.json"})
	req := providertest.FirstRequest()
	resp, err := newModel(t, first).Generate(ctx, req)
	require.NoError(t, err)
	ids := toolUseIDs(resp.Message)
	require.Equal(t, []string{readID, writeID}, ids)

	tr := loop.Transcript{System: req.System, Messages: append(req.Messages, resp.Message)}
	decoded := providertest.ThroughSuspendedState(t, tr)
	decoded.Messages = append(decoded.Messages, providertest.ToolResults(ids[0], ids[1]))

	second := providertest.NewServer(t, providertest.Reply{File: "message_after_tool_results.json"})
	_, err = newModel(t, second).Generate(ctx, loop.ModelRequest{System: decoded.System, Messages: decoded.Messages, Tools: providertest.Tools()})
	require.NoError(t, err)

	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(second.LastBody(), &body))
	require.Len(t, body.Messages, 3)
	var sentUses, sentResults []string
	for _, c := range body.Messages[1].Content {
		if c.Type == "tool_use" {
			sentUses = append(sentUses, c.ID)
		}
	}
	for _, c := range body.Messages[2].Content {
		if c.Type == "tool_result" {
			sentResults = append(sentResults, c.ToolUseID)
		}
	}
	assert.Equal(t, ids, sentUses)
	assert.Equal(t, ids, sentResults)
	providertest.GoldenJSON(t, "request_after_resume", second.LastBody())
}

func TestRequestedModelOverridesConfigured(t *testing.T) {
	tests := []struct {
		name      string
		requested string
		want      string
	}{
		{"configured", "", "claude-sonnet-4-5"},
		{"bare id", "claude-opus-4-1", "claude-opus-4-1"},
		{"spec form", "anthropic:claude-haiku-4-5", "claude-haiku-4-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Reply{File: "message_text.json"})
			req := providertest.FirstRequest()
			req.Model = tt.requested
			_, err := newModel(t, srv).Generate(context.Background(), req)
			require.NoError(t, err)
			var body struct {
				Model     string `json:"model"`
				MaxTokens int    `json:"max_tokens"`
			}
			require.NoError(t, json.Unmarshal(srv.LastBody(), &body))
			assert.Equal(t, tt.want, body.Model)
			assert.Equal(t, DefaultMaxTokens, body.MaxTokens)
		})
	}
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		in   sdk.StopReason
		want loop.StopReason
	}{
		{sdk.StopReasonEndTurn, loop.StopEndTurn},
		{sdk.StopReasonToolUse, loop.StopToolUse},
		{sdk.StopReasonMaxTokens, loop.StopMaxTokens},
		{sdk.StopReasonModelContextWindowExceeded, loop.StopMaxTokens},
		{sdk.StopReasonRefusal, loop.StopRefusal},
		{sdk.StopReasonStopSequence, loop.StopOther},
		{sdk.StopReasonPauseTurn, loop.StopOther},
		{"something_new", loop.StopOther},
	}
	for _, tt := range tests {
		t.Run(string(tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, stopReason(tt.in))
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
		{"no key", Options{Model: "m"}, "API key is required"},
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
	m, err := New(Options{Model: "claude-sonnet-4-5", APIKey: "k", BaseURL: srv.URL, HTTPClient: srv.Client(), MaxRetries: 1})
	require.NoError(t, err)
	_, err = m.Generate(context.Background(), providertest.FirstRequest())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "anthropic: HTTP 429 rate_limit_error: This request would exceed the rate limit")
	assert.Len(t, srv.Requests(), 2, "one call and one retry")
}

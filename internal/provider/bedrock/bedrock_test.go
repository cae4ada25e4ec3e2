package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/providertest"
)

const (
	testModelID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	readID      = "tooluse_2SZ8OJ7rRxW8a3ZKpY4_xg"
	writeID     = "tooluse_Qm7t0bL9S4uYw1eR6vXcNA"
)

func testConfig() aws.Config {
	return aws.Config{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Source: "test"}, nil
		}),
	}
}

// noBackoff keeps the standard retryer's decisions but not its waits.
func noBackoff(o *bedrockruntime.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}

func newModel(t *testing.T, srv *providertest.Server, mod func(*Options)) *Model {
	t.Helper()
	opts := Options{ModelID: testModelID, BaseEndpoint: srv.URL, HTTPClient: srv.Client(), ClientOptions: []func(*bedrockruntime.Options){noBackoff}}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(testConfig(), opts)
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

var throttled = providertest.Reply{
	Status: http.StatusTooManyRequests,
	File:   "error_throttling.json",
	Header: map[string]string{"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", "x-amzn-RequestId": "5d1e8a2b-0c3f-4f7e-9a61-3b2f4c8d9e10"},
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
			replies:  []providertest.Reply{{File: "converse_text.json"}},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 422, OutputTokens: 24},
		},
		{
			name:     "one tool call",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "converse_tool_use.json"}},
			golden:   "request_first",
			wantText: "I will read the file first.",
			wantIDs:  []string{"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 424, OutputTokens: 63},
		},
		{
			name:     "parallel tool calls, cache tokens counted as input",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "converse_parallel_tool_use.json"}},
			golden:   "request_first",
			wantText: "I will read the file first, then replace it.",
			wantIDs:  []string{readID, writeID},
			wantStop: loop.StopToolUse,
			wantUse:  loop.Usage{InputTokens: 610 + 1500 + 80, OutputTokens: 118},
		},
		{
			name:     "tool result round trip",
			req:      providertest.RoundTripRequest(readID, writeID),
			replies:  []providertest.Reply{{File: "converse_after_tool_results.json"}},
			golden:   "request_round_trip",
			wantText: `notes.txt says "buy milk". I could not replace it: the file is read-only.`,
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 802, OutputTokens: 33},
		},
		{
			name:     "guardrail stop is a refusal",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{{File: "converse_guardrail.json"}},
			golden:   "request_first",
			wantText: "Sorry, the model cannot answer this question.",
			wantStop: loop.StopRefusal,
		},
		{
			name:     "429 then success",
			req:      providertest.FirstRequest(),
			replies:  []providertest.Reply{throttled, {File: "converse_text.json"}},
			golden:   "request_first",
			wantText: "I can read notes.txt for you, but I need the read_file tool to do it.",
			wantStop: loop.StopEndTurn,
			wantUse:  loop.Usage{InputTokens: 422, OutputTokens: 24},
		},
		{
			name: "400 ends as an error with the provider's message",
			req:  providertest.RoundTripRequest(readID, writeID),
			replies: []providertest.Reply{{
				Status: http.StatusBadRequest, File: "error_validation.json",
				Header: map[string]string{"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/", "x-amzn-RequestId": "0b7c2f41-9d8e-4a15-8c3b-6e2d1f0a9b87"},
			}},
			wantErr: []string{"bedrock: HTTP 400 ValidationException: The number of toolResult blocks at messages.2.content exceeds", "0b7c2f41-9d8e-4a15-8c3b-6e2d1f0a9b87"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, tt.replies...)
			resp, err := newModel(t, srv, nil).Generate(context.Background(), tt.req)
			reqs := srv.Requests()
			require.Len(t, reqs, len(tt.replies), "requests sent")
			for _, r := range reqs {
				// The SDK escapes the model id into one path segment.
				assert.Equal(t, "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse", r.Path)
				assert.Equal(t, http.MethodPost, r.Method)
				assert.True(t, strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), "SigV4 signed, got %q", r.Header.Get("Authorization"))
			}
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				assert.NotContains(t, err.Error(), providertest.Prompt, "the error must not carry the prompt")
				var ae smithy.APIError
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
	srv := providertest.NewServer(t, providertest.Reply{File: "converse_parallel_tool_use.json"})
	resp, err := newModel(t, srv, nil).Generate(context.Background(), providertest.FirstRequest())
	require.NoError(t, err)
	uses := resp.Message.ToolUses()
	require.Len(t, uses, 2)
	assert.JSONEq(t, `{"path":"notes.txt"}`, string(uses[0].Input))
	assert.JSONEq(t, `{"path":"notes.txt","content":"Hello!"}`, string(uses[1].Input))
}

func TestIDsSurviveSuspension(t *testing.T) {
	ctx := context.Background()
	first := providertest.NewServer(t, providertest.Reply{File: "converse_parallel_tool_use.json"})
	req := providertest.FirstRequest()
	resp, err := newModel(t, first, nil).Generate(ctx, req)
	require.NoError(t, err)
	ids := toolUseIDs(resp.Message)
	require.Equal(t, []string{readID, writeID}, ids)

	tr := loop.Transcript{System: req.System, Messages: append(req.Messages, resp.Message)}
	decoded := providertest.ThroughSuspendedState(t, tr)
	decoded.Messages = append(decoded.Messages, providertest.ToolResults(ids[0], ids[1]))

	second := providertest.NewServer(t, providertest.Reply{File: "converse_after_tool_results.json"})
	_, err = newModel(t, second, nil).Generate(ctx, loop.ModelRequest{System: decoded.System, Messages: decoded.Messages, Tools: providertest.Tools()})
	require.NoError(t, err)

	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				ToolUse *struct {
					ToolUseID string `json:"toolUseId"`
				} `json:"toolUse"`
				ToolResult *struct {
					ToolUseID string `json:"toolUseId"`
				} `json:"toolResult"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(second.LastBody(), &body))
	require.Len(t, body.Messages, 3)
	var sentUses, sentResults []string
	for _, c := range body.Messages[1].Content {
		if c.ToolUse != nil {
			sentUses = append(sentUses, c.ToolUse.ToolUseID)
		}
	}
	for _, c := range body.Messages[2].Content {
		if c.ToolResult != nil {
			sentResults = append(sentResults, c.ToolResult.ToolUseID)
		}
	}
	assert.Equal(t, ids, sentUses)
	assert.Equal(t, ids, sentResults)
	providertest.GoldenJSON(t, "request_after_resume", second.LastBody())
}

func TestToolResultStatus(t *testing.T) {
	tests := []struct {
		name       string
		modelID    string
		mode       ToolResultStatus
		wantStatus bool
	}{
		{"claude on demand", "anthropic.claude-3-5-sonnet-20240620-v1:0", ToolResultStatusAuto, true},
		{"claude profile", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", ToolResultStatusAuto, true},
		{"nova", "us.amazon.nova-pro-v1:0", ToolResultStatusAuto, true},
		{"inference profile arn", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", ToolResultStatusAuto, true},
		{"llama", "us.meta.llama3-3-70b-instruct-v1:0", ToolResultStatusAuto, false},
		{"mistral", "mistral.mistral-large-2407-v1:0", ToolResultStatusAuto, false},
		{"forced on", "mistral.mistral-large-2407-v1:0", ToolResultStatusAlways, true},
		{"forced off", "anthropic.claude-3-5-sonnet-20240620-v1:0", ToolResultStatusNever, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Reply{File: "converse_after_tool_results.json"})
			m := newModel(t, srv, func(o *Options) { o.ModelID = tt.modelID; o.ToolResultStatus = tt.mode })
			_, err := m.Generate(context.Background(), providertest.RoundTripRequest(readID, writeID))
			require.NoError(t, err)
			segment := strings.TrimSuffix(strings.TrimPrefix(srv.Requests()[0].Path, "/model/"), "/converse")
			assert.NotContains(t, segment, "/", "the model id is one path segment")
			id, err := url.PathUnescape(segment)
			require.NoError(t, err)
			assert.Equal(t, tt.modelID, id)
			var body struct {
				Messages []struct {
					Content []struct {
						ToolResult *struct {
							Status  string `json:"status"`
							Content []struct {
								Text string `json:"text"`
							} `json:"content"`
						} `json:"toolResult"`
					} `json:"content"`
				} `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(srv.LastBody(), &body))
			failed := body.Messages[2].Content[1].ToolResult
			require.NotNil(t, failed)
			if tt.wantStatus {
				assert.Equal(t, "error", failed.Status)
				assert.Equal(t, "permission denied: notes.txt is read-only", failed.Content[0].Text)
			} else {
				assert.Empty(t, failed.Status)
				assert.Equal(t, "Error: permission denied: notes.txt is read-only", failed.Content[0].Text)
			}
			assert.Empty(t, body.Messages[2].Content[0].ToolResult.Status, "a successful result carries no status")
		})
	}
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		in   types.StopReason
		want loop.StopReason
	}{
		{types.StopReasonEndTurn, loop.StopEndTurn},
		{types.StopReasonToolUse, loop.StopToolUse},
		{types.StopReasonMaxTokens, loop.StopMaxTokens},
		{types.StopReasonModelContextWindowExceeded, loop.StopMaxTokens},
		{types.StopReasonGuardrailIntervened, loop.StopRefusal},
		{types.StopReasonContentFiltered, loop.StopRefusal},
		{types.StopReasonStopSequence, loop.StopOther},
		{types.StopReasonMalformedToolUse, loop.StopOther},
		{types.StopReasonMalformedModelOutput, loop.StopOther},
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
		cfg     aws.Config
		opts    Options
		wantErr string
	}{
		{"no model", testConfig(), Options{}, "model id is required"},
		{"no region", aws.Config{}, Options{ModelID: "m"}, "no region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	srv := providertest.NewServer(t, throttled, throttled)
	m := newModel(t, srv, func(o *Options) { o.MaxRetries = 1 })
	_, err := m.Generate(context.Background(), providertest.FirstRequest())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bedrock: HTTP 429 ThrottlingException: Too many requests, please wait before trying again.")
	assert.Len(t, srv.Requests(), 2, "one call and one retry")
}

// TestNumbersKeptAsWritten checks that JSON numbers in tool inputs pass
// through Smithy documents unchanged in both directions (no float64 rounding).
func TestNumbersKeptAsWritten(t *testing.T) {
	const in = `{"big":12345678901234567890,"i":3,"n":1.50,"nested":{"a":[1,true,null,"x"]}}`
	srv := providertest.NewServer(t,
		providertest.Reply{Body: `{"output":{"message":{"content":[{"toolUse":{"input":` + in + `,"name":"read_file","toolUseId":"tooluse_n"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`},
		providertest.Reply{File: "converse_after_tool_results.json"},
	)
	m := newModel(t, srv, nil)
	req := providertest.FirstRequest()
	resp, err := m.Generate(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, resp.Message.ToolUses(), 1)
	assert.Equal(t, in, string(resp.Message.ToolUses()[0].Input))

	req.Messages = append(req.Messages, resp.Message, loop.Message{Role: loop.RoleUser, Content: []loop.Block{loop.ToolResultBlock("tooluse_n", loop.Result{Content: "ok"})}})
	_, err = m.Generate(context.Background(), req)
	require.NoError(t, err)
	var body struct {
		Messages []struct {
			Content []struct {
				ToolUse *struct {
					Input json.RawMessage `json:"input"`
				} `json:"toolUse"`
			} `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(srv.LastBody(), &body))
	assert.Equal(t, in, string(body.Messages[1].Content[0].ToolUse.Input))
}

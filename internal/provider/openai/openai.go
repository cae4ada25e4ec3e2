package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentgate/agentgate/internal/loop"
)

// Name is the provider name used in model specs ("openai:<model>") and error
// messages.
const Name = "openai"

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// DefaultMaxTokens caps an answer when neither the request nor Options set a cap.
const DefaultMaxTokens = 4096

// DefaultMaxRetries is how many times the SDK retries a call that failed with
// a retryable status when Options.MaxRetries is 0.
const DefaultMaxRetries = 2

// errorPrefix marks a tool result whose IsError is set; Chat Completions has
// no field for it.
const errorPrefix = "Error: "

// Options configure a Model.
type Options struct {
	// Model is the model id, for example "gpt-4.1" or, on a compatible server,
	// "llama3.1:8b"; a request's own Model, when set, takes precedence. Required.
	Model string
	// APIKey authenticates the calls. Required unless BaseURL is set (local
	// compatible servers often need none).
	APIKey string
	// BaseURL replaces DefaultBaseURL, for compatible servers such as vLLM
	// ("http://host:8000/v1") or Ollama ("http://localhost:11434/v1").
	BaseURL string
	// HTTPClient replaces the SDK's default HTTP client.
	HTTPClient *http.Client
	// MaxTokens caps an answer when the request sets no cap (0: DefaultMaxTokens).
	MaxTokens int
	// LegacyMaxTokens sends the cap as "max_tokens" instead of
	// "max_completion_tokens", for compatible servers that know only the former.
	LegacyMaxTokens bool
	// DisableParallelToolCalls sends parallel_tool_calls=false; by default the
	// field is left out and the model may call several tools in one turn.
	DisableParallelToolCalls bool
	// MaxRetries is how many times a call failing with 408, 409, 429, 5xx or a
	// connection error is retried with backoff (0: DefaultMaxRetries; negative: none).
	MaxRetries int
}

// Model calls a Chat Completions API. It is safe for concurrent use.
type Model struct {
	client sdk.Client
	opts   Options
}

var _ loop.Model = (*Model)(nil)

// New returns a Model for opts; it makes no call.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: a model id is required")
	}
	if opts.APIKey == "" && opts.BaseURL == "" {
		return nil, errors.New("openai: an API key is required (or a base URL of a compatible server that needs none)")
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	// Every setting the SDK would otherwise read from the environment
	// (OPENAI_API_KEY, OPENAI_BASE_URL) is given explicitly.
	ro := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(retries),
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	return &Model{client: sdk.NewClient(ro...), opts: opts}, nil
}

// Generate sends the request as one chat completion and maps the answer back.
func (m *Model) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return loop.ModelResponse{}, err
	}
	completion, err := m.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return loop.ModelResponse{}, callError(err)
	}
	return response(completion)
}

// params maps a request onto the Chat Completions parameters.
func (m *Model) params(req loop.ModelRequest) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: req.ModelFor(Name, m.opts.Model)}
	maxTokens := int64(m.opts.MaxTokens)
	if req.MaxOutputTokens > 0 {
		maxTokens = int64(req.MaxOutputTokens)
	}
	if m.opts.LegacyMaxTokens {
		p.MaxTokens = param.NewOpt(maxTokens)
	} else {
		p.MaxCompletionTokens = param.NewOpt(maxTokens)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		mps, err := messageParams(msg)
		if err != nil {
			return p, fmt.Errorf("openai: message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, mps...)
	}
	for i, t := range req.Tools {
		tp, err := toolParam(t)
		if err != nil {
			return p, fmt.Errorf("openai: tool %d (%s): %w", i, t.Name, err)
		}
		p.Tools = append(p.Tools, tp)
	}
	if len(p.Tools) > 0 && m.opts.DisableParallelToolCalls {
		p.ParallelToolCalls = param.NewOpt(false)
	}
	return p, nil
}

// messageParams maps one message of ours onto one or more API messages.
func messageParams(msg loop.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var texts []string
	var out []sdk.ChatCompletionMessageParamUnion
	var calls []sdk.ChatCompletionMessageToolCallUnionParam
	for _, b := range msg.Content {
		switch b.Type {
		case loop.BlockText:
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case loop.BlockToolUse:
			if msg.Role != loop.RoleAssistant {
				return nil, fmt.Errorf("tool_use block %s in a message of role %s", b.ID, msg.Role)
			}
			calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       b.ID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: arguments(b.Input)},
			}})
		case loop.BlockToolResult:
			if msg.Role != loop.RoleUser {
				return nil, fmt.Errorf("tool_result block for %s in a message of role %s", b.ToolUseID, msg.Role)
			}
			content := b.Content
			if b.IsError && !strings.HasPrefix(content, errorPrefix) {
				// Our own error results already start so: not "Error: Error:".
				content = errorPrefix + content
			}
			out = append(out, sdk.ToolMessage(content, b.ToolUseID))
		default:
			return nil, fmt.Errorf("unknown block type %q", b.Type)
		}
	}
	switch msg.Role {
	case loop.RoleUser:
		switch len(texts) {
		case 0:
		case 1:
			out = append(out, sdk.UserMessage(texts[0]))
		default:
			parts := make([]sdk.ChatCompletionContentPartUnionParam, len(texts))
			for i, s := range texts {
				parts[i] = sdk.ChatCompletionContentPartUnionParam{OfText: &sdk.ChatCompletionContentPartTextParam{Text: s}}
			}
			out = append(out, sdk.UserMessage(parts))
		}
	case loop.RoleAssistant:
		a := &sdk.ChatCompletionAssistantMessageParam{ToolCalls: calls}
		switch len(texts) {
		case 0:
			if len(calls) == 0 {
				a.Content.OfString = param.NewOpt("")
			}
		case 1:
			a.Content.OfString = param.NewOpt(texts[0])
		default:
			for _, s := range texts {
				a.Content.OfArrayOfContentParts = append(a.Content.OfArrayOfContentParts,
					sdk.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{OfText: &sdk.ChatCompletionContentPartTextParam{Text: s}})
			}
		}
		out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: a})
	default:
		return nil, fmt.Errorf("unknown role %q", msg.Role)
	}
	return out, nil
}

// toolParam maps a tool spec onto a function tool. The schema's top-level
// keywords become the parameters map with their values as raw JSON, so
// nothing below the top level is re-encoded.
func toolParam(t loop.ToolSpec) (sdk.ChatCompletionToolUnionParam, error) {
	params := shared.FunctionParameters{"type": "object"}
	if len(t.InputSchema) > 0 {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(t.InputSchema, &top); err != nil {
			return sdk.ChatCompletionToolUnionParam{}, fmt.Errorf("input schema is not a JSON object: %w", err)
		}
		params = make(shared.FunctionParameters, len(top))
		for k, v := range top {
			params[k] = v
		}
	}
	fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
	if t.Description != "" {
		fd.Description = param.NewOpt(t.Description)
	}
	return sdk.ChatCompletionFunctionTool(fd), nil
}

// arguments is the "arguments" string for a tool_use input: the JSON text,
// or the original text when the model's arguments were not JSON and we kept
// them as a JSON string.
func arguments(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 {
		return "{}"
	}
	if in[0] == '"' {
		var s string
		if err := json.Unmarshal(in, &s); err == nil {
			return s
		}
	}
	return string(in)
}

// input is the tool_use input for an "arguments" string; see arguments.
func input(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(trimmed)) && trimmed[0] != '"' {
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args)
	return quoted
}

// response maps a chat completion onto the loop's response.
func response(c *sdk.ChatCompletion) (loop.ModelResponse, error) {
	if len(c.Choices) == 0 {
		return loop.ModelResponse{}, errors.New("openai: the completion has no choices")
	}
	choice := c.Choices[0]
	msg := choice.Message
	out := loop.ModelResponse{
		Message: loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{}},
		Usage:   loop.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens},
	}
	if msg.Content != "" {
		out.Message.Content = append(out.Message.Content, loop.TextBlock(msg.Content))
	}
	if msg.Refusal != "" {
		out.Message.Content = append(out.Message.Content, loop.TextBlock(msg.Refusal))
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return loop.ModelResponse{}, fmt.Errorf("openai: tool call %d has unsupported type %q", i, tc.Type)
		}
		if tc.Function.Name == "" {
			return loop.ModelResponse{}, fmt.Errorf("openai: tool call %d has no function name", i)
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d", c.ID, i)
		}
		out.Message.Content = append(out.Message.Content, loop.ToolUseBlock(id, tc.Function.Name, input(tc.Function.Arguments)))
	}
	out.StopReason = stopReason(choice.FinishReason, len(msg.ToolCalls) > 0)
	if msg.Refusal != "" {
		out.StopReason = loop.StopRefusal
	}
	return out, nil
}

func stopReason(finish string, hasToolCalls bool) loop.StopReason {
	switch finish {
	case "stop":
		if hasToolCalls {
			return loop.StopToolUse
		}
		return loop.StopEndTurn
	case "tool_calls", "function_call":
		return loop.StopToolUse
	case "length":
		return loop.StopMaxTokens
	case "content_filter":
		return loop.StopRefusal
	default:
		return loop.StopOther
	}
}

func callError(err error) error {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		msg := fmt.Sprintf("openai: HTTP %d", ae.StatusCode)
		switch {
		case ae.Code != "":
			msg += " " + ae.Code
		case ae.Type != "":
			msg += " " + ae.Type
		}
		if ae.Message != "" {
			msg += ": " + ae.Message
		}
		if ae.Response != nil {
			if id := ae.Response.Header.Get("x-request-id"); id != "" {
				msg += " (request id " + id + ")"
			}
		}
		return &loop.ModelError{Message: msg, Err: err}
	}
	return fmt.Errorf("openai: chat completion call: %w", err)
}

package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentgate/agentgate/internal/loop"
)

// Name is the provider name used in model specs ("anthropic:<model>") and
// error messages.
const Name = "anthropic"

// DefaultMaxTokens caps an answer when neither the request nor Options set a cap.
const DefaultMaxTokens = 4096

// DefaultMaxRetries is how many times the SDK retries a call that failed with
// a retryable status when Options.MaxRetries is 0.
const DefaultMaxRetries = 2

// Options configure a Model.
type Options struct {
	// Model is the model id, for example "claude-sonnet-4-5"; a request's own
	// Model, when set, takes precedence. Required.
	Model string
	// APIKey authenticates the calls. Required.
	APIKey string
	// BaseURL replaces https://api.anthropic.com/ (tests, proxies).
	BaseURL string
	// HTTPClient replaces the SDK's default HTTP client.
	HTTPClient *http.Client
	// MaxTokens caps an answer when the request sets no cap (0: DefaultMaxTokens).
	MaxTokens int
	// MaxRetries is how many times a call failing with 408, 409, 429, 5xx or a
	// connection error is retried with backoff (0: DefaultMaxRetries; negative: none).
	MaxRetries int
}

// Model calls Anthropic's Messages API. It is safe for concurrent use.
type Model struct {
	client    sdk.Client
	model     string
	maxTokens int64
}

var _ loop.Model = (*Model)(nil)

// New returns a Model for opts; it makes no call.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("anthropic: a model id is required")
	}
	if opts.APIKey == "" {
		return nil, errors.New("anthropic: an API key is required")
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	ro := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(retries),
	}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	maxTokens := int64(opts.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{client: sdk.NewClient(ro...), model: opts.Model, maxTokens: maxTokens}, nil
}

// Generate sends the request as one Messages call and maps the answer back.
func (m *Model) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return loop.ModelResponse{}, err
	}
	msg, err := m.client.Messages.New(ctx, params)
	if err != nil {
		return loop.ModelResponse{}, callError(err)
	}
	return response(msg)
}

// params maps a request onto the Messages API's parameters.
func (m *Model) params(req loop.ModelRequest) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:     req.ModelFor(Name, m.model),
		MaxTokens: m.maxTokens,
	}
	if req.MaxOutputTokens > 0 {
		p.MaxTokens = int64(req.MaxOutputTokens)
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, msg := range req.Messages {
		mp, err := messageParam(msg)
		if err != nil {
			return p, fmt.Errorf("anthropic: message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, toolParam(t))
	}
	return p, nil
}

func messageParam(msg loop.Message) (sdk.MessageParam, error) {
	var blocks []sdk.ContentBlockParamUnion
	for _, b := range msg.Content {
		switch b.Type {
		case loop.BlockText:
			if b.Text == "" {
				continue
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: b.Text}})
		case loop.BlockToolUse:
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{
				ID: b.ID, Name: b.Name, Input: inputOrEmpty(b.Input),
			}})
		case loop.BlockToolResult:
			tr := &sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID}
			if b.Content != "" {
				tr.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Content}}}
			}
			if b.IsError {
				tr.IsError = param.NewOpt(true)
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: tr})
		default:
			return sdk.MessageParam{}, fmt.Errorf("unknown block type %q", b.Type)
		}
	}
	switch msg.Role {
	case loop.RoleUser:
		return sdk.NewUserMessage(blocks...), nil
	case loop.RoleAssistant:
		return sdk.NewAssistantMessage(blocks...), nil
	default:
		return sdk.MessageParam{}, fmt.Errorf("unknown role %q", msg.Role)
	}
}

func toolParam(t loop.ToolSpec) sdk.ToolUnionParam {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	tp := &sdk.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
	}
	if t.Description != "" {
		tp.Description = param.NewOpt(t.Description)
	}
	return sdk.ToolUnionParam{OfTool: tp}
}

// response maps a Messages answer onto the loop's response.
func response(msg *sdk.Message) (loop.ModelResponse, error) {
	out := loop.ModelResponse{
		Message:    loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{}},
		StopReason: stopReason(msg.StopReason),
		Usage: loop.Usage{
			InputTokens:  msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens,
			OutputTokens: msg.Usage.OutputTokens,
		},
	}
	for i, c := range msg.Content {
		switch c.Type {
		case "text":
			out.Message.Content = append(out.Message.Content, loop.TextBlock(c.Text))
		case "tool_use":
			if c.ID == "" || c.Name == "" {
				return loop.ModelResponse{}, fmt.Errorf("anthropic: response block %d: tool_use without id or name", i)
			}
			input := inputOrEmpty(c.Input)
			if !json.Valid(input) {
				return loop.ModelResponse{}, fmt.Errorf("anthropic: response block %d: tool_use %s input is not JSON", i, c.ID)
			}
			out.Message.Content = append(out.Message.Content, loop.ToolUseBlock(c.ID, c.Name, input))
		}
	}
	return out, nil
}

func stopReason(r sdk.StopReason) loop.StopReason {
	switch r {
	case sdk.StopReasonEndTurn:
		return loop.StopEndTurn
	case sdk.StopReasonToolUse:
		return loop.StopToolUse
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return loop.StopMaxTokens
	case sdk.StopReasonRefusal:
		return loop.StopRefusal
	default:
		return loop.StopOther
	}
}

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 || string(in) == "null" {
		return json.RawMessage(`{}`)
	}
	return in
}

func callError(err error) error {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		msg := fmt.Sprintf("anthropic: HTTP %d", ae.StatusCode)
		if t := string(ae.Type()); t != "" {
			msg += " " + t
		}
		if ae.Message != "" {
			msg += ": " + ae.Message
		}
		if ae.RequestID != "" {
			msg += " (request id " + ae.RequestID + ")"
		}
		return &loop.ModelError{Message: msg, Err: err}
	}
	return fmt.Errorf("anthropic: messages call: %w", err)
}

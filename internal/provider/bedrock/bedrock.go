package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithydocument "github.com/aws/smithy-go/document"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/agentgate/agentgate/internal/loop"
)

// Name is the provider name used in model specs ("bedrock:<model-id>") and
// error messages.
const Name = "bedrock"

// DefaultMaxTokens caps an answer when neither the request nor Options set a cap.
const DefaultMaxTokens = 4096

// DefaultMaxRetries is how many times the SDK retries a call that failed with
// a retryable error when Options.MaxRetries is 0 (the SDK's standard 3 attempts).
const DefaultMaxRetries = 2

// errorPrefix marks a tool result whose IsError is set when the status field
// cannot be sent.
const errorPrefix = "Error: "

// ToolResultStatus says whether tool results carry Converse's status field.
type ToolResultStatus int

// The ToolResultStatus choices. Auto sends the status for model ids that name
// Anthropic Claude or Amazon Nova ("anthropic.", "amazon.nova", with or without
// a region prefix) and for ARNs (inference profiles, most often Claude), and
// not for other model families, which refuse the field.
const (
	ToolResultStatusAuto ToolResultStatus = iota
	ToolResultStatusAlways
	ToolResultStatusNever
)

// Options configure a Model.
type Options struct {
	// ModelID is the model or inference profile id or ARN, for example
	// "us.anthropic.claude-sonnet-4-5-20250929-v1:0"; a request's own Model,
	// when set, takes precedence. Required.
	ModelID string
	// MaxTokens caps an answer when the request sets no cap (0: DefaultMaxTokens).
	MaxTokens int
	// MaxRetries is how many times a throttled or failed call is retried with
	// backoff (0: DefaultMaxRetries; negative: none).
	MaxRetries int
	// ToolResultStatus says whether tool results carry the status field.
	ToolResultStatus ToolResultStatus
	// BaseEndpoint replaces the regional endpoint (tests, VPC endpoints).
	BaseEndpoint string
	// HTTPClient replaces the aws.Config's HTTP client.
	HTTPClient *http.Client
	// ClientOptions are applied last to the bedrockruntime client options (for
	// example a retryer without backoff in tests).
	ClientOptions []func(*bedrockruntime.Options)
}

// Model calls Bedrock's Converse API. It is safe for concurrent use.
type Model struct {
	client *bedrockruntime.Client
	opts   Options
}

var _ loop.Model = (*Model)(nil)

// New returns a Model calling Bedrock with cfg (its region and credentials);
// it makes no call. Build cfg once, outside any handler.
func New(cfg aws.Config, opts Options) (*Model, error) {
	if opts.ModelID == "" {
		return nil, errors.New("bedrock: a model id is required")
	}
	if cfg.Region == "" {
		return nil, errors.New("bedrock: the AWS config has no region")
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	client := bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
		o.RetryMaxAttempts = retries + 1
		if opts.BaseEndpoint != "" {
			o.BaseEndpoint = aws.String(opts.BaseEndpoint)
		}
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
		for _, f := range opts.ClientOptions {
			f(o)
		}
	})
	return &Model{client: client, opts: opts}, nil
}

// Generate sends the request as one Converse call and maps the answer back.
func (m *Model) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	in, err := m.input(req)
	if err != nil {
		return loop.ModelResponse{}, err
	}
	out, err := m.client.Converse(ctx, in)
	if err != nil {
		return loop.ModelResponse{}, callError(err)
	}
	return response(out)
}

// input maps a request onto a Converse input.
func (m *Model) input(req loop.ModelRequest) (*bedrockruntime.ConverseInput, error) {
	modelID := req.ModelFor(Name, m.opts.ModelID)
	maxTokens := m.opts.MaxTokens
	if req.MaxOutputTokens > 0 {
		maxTokens = req.MaxOutputTokens
	}
	in := &bedrockruntime.ConverseInput{
		ModelId:         aws.String(modelID),
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(int32(min(max(maxTokens, 0), math.MaxInt32)))}, //nolint:gosec // clamped to the int32 range
	}
	if req.System != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	withStatus := statusSupported(m.opts.ToolResultStatus, modelID)
	for i, msg := range req.Messages {
		mm, err := message(msg, withStatus)
		if err != nil {
			return nil, fmt.Errorf("bedrock: message %d: %w", i, err)
		}
		in.Messages = append(in.Messages, mm)
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{}
		for i, t := range req.Tools {
			spec, err := toolSpec(t)
			if err != nil {
				return nil, fmt.Errorf("bedrock: tool %d (%s): %w", i, t.Name, err)
			}
			tc.Tools = append(tc.Tools, spec)
		}
		in.ToolConfig = tc
	}
	return in, nil
}

func message(msg loop.Message, withStatus bool) (types.Message, error) {
	out := types.Message{}
	switch msg.Role {
	case loop.RoleUser:
		out.Role = types.ConversationRoleUser
	case loop.RoleAssistant:
		out.Role = types.ConversationRoleAssistant
	default:
		return out, fmt.Errorf("unknown role %q", msg.Role)
	}
	for _, b := range msg.Content {
		switch b.Type {
		case loop.BlockText:
			if b.Text == "" {
				continue
			}
			out.Content = append(out.Content, &types.ContentBlockMemberText{Value: b.Text})
		case loop.BlockToolUse:
			doc, err := jsonDocument(b.Input)
			if err != nil {
				return out, fmt.Errorf("tool_use %s: input: %w", b.ID, err)
			}
			out.Content = append(out.Content, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
				ToolUseId: aws.String(b.ID), Name: aws.String(b.Name), Input: doc,
			}})
		case loop.BlockToolResult:
			tr := types.ToolResultBlock{ToolUseId: aws.String(b.ToolUseID)}
			content := b.Content
			if b.IsError {
				if withStatus {
					tr.Status = types.ToolResultStatusError
				} else if !strings.HasPrefix(content, errorPrefix) {
					// Our own error results already start so: not "Error: Error:".
					content = errorPrefix + content
				}
			}
			tr.Content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: content}}
			out.Content = append(out.Content, &types.ContentBlockMemberToolResult{Value: tr})
		default:
			return out, fmt.Errorf("unknown block type %q", b.Type)
		}
	}
	return out, nil
}

func toolSpec(t loop.ToolSpec) (types.Tool, error) {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonDocument(schema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	spec := types.ToolSpecification{Name: aws.String(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: doc}}
	if t.Description != "" {
		spec.Description = aws.String(t.Description)
	}
	return &types.ToolMemberToolSpec{Value: spec}, nil
}

// jsonDocument turns JSON into a Smithy document, keeping numbers as written.
func jsonDocument(raw json.RawMessage) (document.Interface, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return document.NewLazyDocument(smithyValue(v)), nil
}

// smithyValue replaces json.Number with smithy's document.Number, which the
// document encoder writes verbatim.
func smithyValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		return smithydocument.Number(x)
	case map[string]any:
		for k, e := range x {
			x[k] = smithyValue(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = smithyValue(e)
		}
		return x
	default:
		return v
	}
}

// response maps a Converse output onto the loop's response.
func response(out *bedrockruntime.ConverseOutput) (loop.ModelResponse, error) {
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return loop.ModelResponse{}, fmt.Errorf("bedrock: the output holds no message (%T)", out.Output)
	}
	resp := loop.ModelResponse{
		Message:    loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{}},
		StopReason: stopReason(out.StopReason),
	}
	if u := out.Usage; u != nil {
		resp.Usage = loop.Usage{
			InputTokens:  int64(aws.ToInt32(u.InputTokens)) + int64(aws.ToInt32(u.CacheReadInputTokens)) + int64(aws.ToInt32(u.CacheWriteInputTokens)),
			OutputTokens: int64(aws.ToInt32(u.OutputTokens)),
		}
	}
	for i, c := range msg.Value.Content {
		switch b := c.(type) {
		case *types.ContentBlockMemberText:
			resp.Message.Content = append(resp.Message.Content, loop.TextBlock(b.Value))
		case *types.ContentBlockMemberToolUse:
			id, name := aws.ToString(b.Value.ToolUseId), aws.ToString(b.Value.Name)
			if id == "" || name == "" {
				return loop.ModelResponse{}, fmt.Errorf("bedrock: response block %d: toolUse without id or name", i)
			}
			input := json.RawMessage(`{}`)
			if b.Value.Input != nil {
				raw, err := b.Value.Input.MarshalSmithyDocument()
				if err != nil {
					return loop.ModelResponse{}, fmt.Errorf("bedrock: response block %d: toolUse %s input: %w", i, id, err)
				}
				if len(bytes.TrimSpace(raw)) > 0 && string(raw) != "null" {
					input = raw
				}
			}
			if !json.Valid(input) {
				return loop.ModelResponse{}, fmt.Errorf("bedrock: response block %d: toolUse %s input is not JSON", i, id)
			}
			resp.Message.Content = append(resp.Message.Content, loop.ToolUseBlock(id, name, input))
		}
	}
	return resp, nil
}

func stopReason(r types.StopReason) loop.StopReason {
	switch r {
	case types.StopReasonEndTurn:
		return loop.StopEndTurn
	case types.StopReasonToolUse:
		return loop.StopToolUse
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return loop.StopMaxTokens
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return loop.StopRefusal
	default:
		return loop.StopOther
	}
}

// statusSupported says whether tool results may carry the status field.
func statusSupported(mode ToolResultStatus, modelID string) bool {
	switch mode {
	case ToolResultStatusAlways:
		return true
	case ToolResultStatusNever:
		return false
	}
	if strings.HasPrefix(modelID, "arn:") {
		return true
	}
	return strings.Contains(modelID, "anthropic.") || strings.Contains(modelID, "amazon.nova")
}

func callError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		msg := "bedrock:"
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
			msg += fmt.Sprintf(" HTTP %d", re.HTTPStatusCode())
		}
		msg += " " + ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		var rid interface{ ServiceRequestID() string }
		if errors.As(err, &rid) && rid.ServiceRequestID() != "" {
			msg += " (request id " + rid.ServiceRequestID() + ")"
		}
		return &loop.ModelError{Message: msg, Err: err}
	}
	return fmt.Errorf("bedrock: converse call: %w", err)
}

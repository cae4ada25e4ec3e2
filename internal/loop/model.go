package loop

import (
	"context"
	"encoding/json"
	"strings"
)

// ToolSpec is what a model is told about a tool: its name, description and
// JSON-schema input.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ModelRequest is one call to a model: the transcript so far, the tools it may
// call, and per-call options.
type ModelRequest struct {
	// Model is the provider's model identifier (may be empty: provider default).
	Model string
	// System is the system text.
	System string
	// Messages is the conversation so far; the last message is from the user.
	Messages []Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
	// MaxOutputTokens caps the tokens of this answer (0: provider default).
	MaxOutputTokens int
}

// ModelFor returns the model id a provider uses for r: r.Model without the
// "<provider>:" prefix of a model spec (a run may name "openai:gpt-4.1" or
// "gpt-4.1"), or configured when r names none.
func (r ModelRequest) ModelFor(provider, configured string) string {
	if r.Model == "" {
		return configured
	}
	return strings.TrimPrefix(r.Model, provider+":")
}

// ModelError is a failed model call as a provider reports it: Message
// names the provider and the API's own words (status, code, message,
// request id), and Err, the SDK's error, stays reachable with errors.As.
type ModelError struct {
	Message string
	Err     error
}

func (e *ModelError) Error() string { return e.Message }

// Unwrap returns the SDK's error.
func (e *ModelError) Unwrap() error { return e.Err }

// StopReason says why the model stopped producing its turn.
type StopReason string

// The stop reasons providers map theirs onto.
const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopRefusal   StopReason = "refusal"
	StopOther     StopReason = "other"
)

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// ModelResponse is the model's assistant turn with its stop reason and usage.
type ModelResponse struct {
	Message    Message
	StopReason StopReason
	Usage      Usage
}

// Model is a language model behind any provider. Generate makes one call. An
// error means the provider failed after its own retries (or ctx ended); the
// loop then ends the run with ReasonProviderFailed (or ReasonCancelled).
type Model interface {
	Generate(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// ModelFunc adapts a function to the Model interface.
type ModelFunc func(ctx context.Context, req ModelRequest) (ModelResponse, error)

// Generate calls f.
func (f ModelFunc) Generate(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	return f(ctx, req)
}

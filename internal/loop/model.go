package loop

import (
	"context"
	"encoding/json"
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

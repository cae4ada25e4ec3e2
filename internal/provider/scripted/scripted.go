package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/agentgate/agentgate/internal/loop"
)

// ErrScriptEnded is returned (wrapped) by Generate when the request asks for a
// turn past the end of the script.
var ErrScriptEnded = errors.New("scripted model: script ended")

// Turn is one scripted assistant turn.
type Turn struct {
	// Content is the assistant message's blocks, as loop.Block encodes them.
	Content []loop.Block `json:"content"`
	// StopReason is reported with the turn; empty means "tool_use" when the
	// turn holds a tool call and "end_turn" otherwise.
	StopReason loop.StopReason `json:"stop_reason,omitempty"`
	// Usage is reported with the turn; nil means estimated from the sizes of
	// the request and of the turn.
	Usage *loop.Usage `json:"usage,omitempty"`
}

// Script is the JSON document a scripted model replays.
type Script struct {
	Turns []Turn `json:"turns"`
}

// Model replays a script of assistant turns. It is safe for concurrent use:
// it holds no state besides the immutable script.
type Model struct {
	turns []Turn
}

var _ loop.Model = (*Model)(nil)

// New returns a model replaying turns, after checking each one (see Parse for
// the rules). The turns are copied.
func New(turns []Turn) (*Model, error) {
	cp := make([]Turn, len(turns))
	for i, t := range turns {
		if err := validateTurn(t); err != nil {
			return nil, fmt.Errorf("scripted model: turn %d: %w", i, err)
		}
		t.Content = append([]loop.Block(nil), t.Content...)
		if t.StopReason == "" {
			t.StopReason = loop.StopEndTurn
			if len(loop.Message{Content: t.Content}.ToolUses()) > 0 {
				t.StopReason = loop.StopToolUse
			}
		}
		if t.Usage != nil {
			u := *t.Usage
			t.Usage = &u
		}
		cp[i] = t
	}
	return &Model{turns: cp}, nil
}

// Parse reads a script (the format is described in the package doc) and
// returns a model replaying it. Unknown fields, blocks that fail
// loop.Block.Validate, tool_result blocks and unknown stop reasons are errors.
func Parse(raw []byte) (*Model, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted model: parse script: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("scripted model: parse script: trailing data after the script object")
	}
	return New(s.Turns)
}

// Load reads and parses the script file at path.
func Load(path string) (*Model, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: read script: %w", err)
	}
	m, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return m, nil
}

// Len returns the number of turns in the script.
func (m *Model) Len() int { return len(m.turns) }

// Generate plays turn i, where i is the number of assistant messages in
// req.Messages. It returns an error wrapping ErrScriptEnded past the end of
// the script, and ctx.Err() when ctx is done.
func (m *Model) Generate(ctx context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return loop.ModelResponse{}, err
	}
	i := 0
	for _, msg := range req.Messages {
		if msg.Role == loop.RoleAssistant {
			i++
		}
	}
	if i >= len(m.turns) {
		return loop.ModelResponse{}, fmt.Errorf("%w: asked for turn %d of a %d-turn script", ErrScriptEnded, i+1, len(m.turns))
	}
	t := m.turns[i]
	resp := loop.ModelResponse{
		Message:    loop.Message{Role: loop.RoleAssistant, Content: append([]loop.Block(nil), t.Content...)},
		StopReason: t.StopReason,
	}
	if t.Usage != nil {
		resp.Usage = *t.Usage
	} else {
		resp.Usage = estimateUsage(req, t)
	}
	return resp, nil
}

func validateTurn(t Turn) error {
	for j, b := range t.Content {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("block %d: %w", j, err)
		}
		if b.Type == loop.BlockToolResult {
			return fmt.Errorf("block %d: tool_result blocks belong to user turns, not assistant turns", j)
		}
	}
	switch t.StopReason {
	case "", loop.StopEndTurn, loop.StopToolUse, loop.StopMaxTokens, loop.StopRefusal, loop.StopOther:
	default:
		return fmt.Errorf("unknown stop_reason %q", t.StopReason)
	}
	if t.Usage != nil && (t.Usage.InputTokens < 0 || t.Usage.OutputTokens < 0) {
		return fmt.Errorf("usage token counts must not be negative")
	}
	return nil
}

// estimateUsage counts about one token per four bytes of JSON, the same for
// the same request and turn in every process.
func estimateUsage(req loop.ModelRequest, t Turn) loop.Usage {
	in := struct {
		System   string          `json:"system,omitempty"`
		Messages []loop.Message  `json:"messages"`
		Tools    []loop.ToolSpec `json:"tools,omitempty"`
	}{req.System, req.Messages, req.Tools}
	inRaw, _ := json.Marshal(in)
	outRaw, _ := json.Marshal(t.Content)
	return loop.Usage{InputTokens: tokens(len(inRaw)), OutputTokens: tokens(len(outRaw))}
}

func tokens(n int) int64 {
	if n < 4 {
		return 1
	}
	return int64(n / 4)
}

package loop

import (
	"encoding/json"
	"fmt"
)

// Role says who authored a message.
type Role string

// The roles of a transcript. System text is kept in Transcript.System, not as a message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names the kind of a content block; it is written as "type" in JSON.
type BlockType string

// The content block kinds.
const (
	BlockText       BlockType = "text"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
)

// Block is one typed content block of a message. Which fields are set depends
// on Type: text uses Text; tool_use uses ID, Name and Input; tool_result uses
// ToolUseID, Content and IsError.
type Block struct {
	Type      BlockType       `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// TextBlock returns a text block.
func TextBlock(text string) Block { return Block{Type: BlockText, Text: text} }

// ToolUseBlock returns a tool_use block for a call of the named tool.
func ToolUseBlock(id, name string, input json.RawMessage) Block {
	return Block{Type: BlockToolUse, ID: id, Name: name, Input: input}
}

// ToolResultBlock returns the tool_result block answering the tool_use with id toolUseID.
func ToolResultBlock(toolUseID string, r Result) Block {
	return Block{Type: BlockToolResult, ToolUseID: toolUseID, Content: r.Content, IsError: r.IsError}
}

// Validate reports whether the block carries the fields its type needs.
func (b Block) Validate() error {
	switch b.Type {
	case BlockText:
		return nil
	case BlockToolUse:
		if b.ID == "" || b.Name == "" {
			return fmt.Errorf("tool_use block needs id and name")
		}
		if len(b.Input) > 0 && !json.Valid(b.Input) {
			return fmt.Errorf("tool_use %s: input is not valid JSON", b.ID)
		}
		return nil
	case BlockToolResult:
		if b.ToolUseID == "" {
			return fmt.Errorf("tool_result block needs tool_use_id")
		}
		return nil
	default:
		return fmt.Errorf("unknown block type %q", b.Type)
	}
}

// Message is one turn of the conversation: a role and its content blocks.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// UserText returns a user message holding one text block.
func UserText(text string) Message {
	return Message{Role: RoleUser, Content: []Block{TextBlock(text)}}
}

// ToolUses returns the tool_use blocks of the message, in order.
func (m Message) ToolUses() []Block {
	var uses []Block
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			uses = append(uses, b)
		}
	}
	return uses
}

// Text returns the message's text blocks joined by newlines.
func (m Message) Text() string {
	var s string
	for _, b := range m.Content {
		if b.Type == BlockText && b.Text != "" {
			if s != "" {
				s += "\n"
			}
			s += b.Text
		}
	}
	return s
}

// Transcript is the provider-neutral conversation: the system text and the messages.
type Transcript struct {
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
}

// Validate checks every block and that the roles are user or assistant.
func (t Transcript) Validate() error {
	for i, m := range t.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		for j, b := range m.Content {
			if err := b.Validate(); err != nil {
				return fmt.Errorf("message %d block %d: %w", i, j, err)
			}
		}
	}
	return nil
}

// CheckToolPairing reports whether tool_use blocks are only in assistant
// messages and tool_result blocks only in user messages, every tool_use
// of an assistant turn has exactly one tool_result in the user message
// right after it, and every tool_result answers a tool_use of the turn
// right before it. A transcript that passes is valid for every provider.
func CheckToolPairing(t Transcript) error {
	for i, m := range t.Messages {
		for j, b := range m.Content {
			switch {
			case b.Type == BlockToolUse && m.Role != RoleAssistant:
				return fmt.Errorf("message %d block %d: tool_use %s is in a %s message: tool_use blocks belong to assistant messages", i, j, b.ID, m.Role)
			case b.Type == BlockToolResult && m.Role != RoleUser:
				return fmt.Errorf("message %d block %d: tool_result %s is in an %s message: tool_result blocks belong to user messages", i, j, b.ToolUseID, m.Role)
			}
		}
		uses := m.ToolUses()
		if m.Role == RoleAssistant && len(uses) > 0 {
			if i+1 >= len(t.Messages) {
				return fmt.Errorf("message %d: %d tool_use blocks have no results", i, len(uses))
			}
			seen := map[string]int{}
			for _, b := range t.Messages[i+1].Content {
				if b.Type == BlockToolResult {
					seen[b.ToolUseID]++
				}
			}
			for _, u := range uses {
				if seen[u.ID] != 1 {
					return fmt.Errorf("message %d: tool_use %s has %d results", i, u.ID, seen[u.ID])
				}
				delete(seen, u.ID)
			}
			for id := range seen {
				return fmt.Errorf("message %d: tool_result %s answers no tool_use of the turn", i+1, id)
			}
		}
		if m.Role == RoleUser {
			for _, b := range m.Content {
				if b.Type != BlockToolResult {
					continue
				}
				if i == 0 || t.Messages[i-1].Role != RoleAssistant {
					return fmt.Errorf("message %d: tool_result %s follows no assistant turn", i, b.ToolUseID)
				}
			}
		}
	}
	return nil
}

package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// scriptModel replays assistant turns; like the scripted provider it picks the
// turn by counting the assistant messages already in the request, so it needs
// no state across Run and Resume.
func scriptModel(turns ...loop.Message) loop.Model {
	return loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == loop.RoleAssistant {
				n++
			}
		}
		if n >= len(turns) {
			return loop.ModelResponse{}, fmt.Errorf("script ended after %d turns", len(turns))
		}
		t := turns[n]
		stop := loop.StopEndTurn
		if len(t.ToolUses()) > 0 {
			stop = loop.StopToolUse
		}
		return loop.ModelResponse{Message: t, StopReason: stop, Usage: loop.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	})
}

func asst(blocks ...loop.Block) loop.Message {
	return loop.Message{Role: loop.RoleAssistant, Content: blocks}
}

func use(id, name, input string) loop.Block {
	return loop.ToolUseBlock(id, name, json.RawMessage(input))
}

func say(text string) loop.Block { return loop.TextBlock(text) }

// execLog records every tool execution: "tool(input)@key".
type execLog struct {
	mu    sync.Mutex
	calls []string
	keys  []string
}

func (l *execLog) add(name string, input json.RawMessage, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf("%s(%s)", name, compact(input)))
	l.keys = append(l.keys, key)
}

func (l *execLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func compact(raw json.RawMessage) string {
	c, err := loop.CanonicalJSON(raw)
	if err != nil {
		return string(raw)
	}
	return string(c)
}

const pathSchema = `{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"],"additionalProperties":false}`
const writeSchema = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"text":{"type":"string"}},"required":["path","text"],"additionalProperties":false}`

// testTools builds: read_doc (read), list_docs (read, path optional via policy),
// write_doc (write, previews), delete_doc (write, idempotent), flagged_read
// (read with the approval marker), guarded_read (read; approval when the path
// starts with /secret), broken (returns a Go error).
func testTools(t testing.TB, log *execLog, schemaOverride map[string]string) *loop.Toolbox {
	t.Helper()
	mk := func(name string, effect loop.Effect, schema string, mutate func(*loop.FuncTool)) loop.Tool {
		if s, ok := schemaOverride[name]; ok {
			schema = s
		}
		ft := &loop.FuncTool{
			Def: loop.Definition{Name: name, Description: "the " + name + " tool", InputSchema: json.RawMessage(schema), Effect: effect},
			CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
				log.add(name, input, loop.IdempotencyKey(ctx))
				return loop.Result{Content: name + " ok"}, nil
			},
		}
		if mutate != nil {
			mutate(ft)
		}
		return ft
	}
	tb, err := loop.NewToolbox(
		mk("read_doc", loop.EffectRead, pathSchema, nil),
		mk("write_doc", loop.EffectWrite, writeSchema, func(ft *loop.FuncTool) {
			ft.PreviewFunc = func(_ context.Context, input json.RawMessage) (string, error) {
				var in struct{ Path, Text string }
				_ = json.Unmarshal(input, &in)
				return "--- " + in.Path + "\n+++ " + in.Path + "\n+" + in.Text, nil
			}
		}),
		mk("delete_doc", loop.EffectWrite, pathSchema, func(ft *loop.FuncTool) { ft.Def.Idempotent = true }),
		mk("flagged_read", loop.EffectRead, pathSchema, func(ft *loop.FuncTool) { ft.Def.RequiresApproval = true }),
		mk("guarded_read", loop.EffectRead, pathSchema, func(ft *loop.FuncTool) {
			ft.NeedsApprovalFunc = func(input json.RawMessage) bool {
				var in struct{ Path string }
				_ = json.Unmarshal(input, &in)
				return strings.HasPrefix(in.Path, "/secret")
			}
		}),
		mk("broken", loop.EffectRead, pathSchema, func(ft *loop.FuncTool) {
			ft.CallFunc = func(context.Context, json.RawMessage) (loop.Result, error) {
				return loop.Result{}, fmt.Errorf("backend unreachable")
			}
		}),
	)
	if err != nil {
		t.Fatalf("NewToolbox: %v", err)
	}
	return tb
}

// fixedClock returns a clock that advances by step on every call.
func fixedClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

func seqIDs(prefix string) func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s%d", prefix, n)
	}
}

func newRunner(t testing.TB, model loop.Model, log *execLog) *loop.Runner {
	t.Helper()
	return &loop.Runner{Model: model, Tools: testTools(t, log, nil), Now: fixedClock(time.Millisecond), NewID: seqIDs("susp-")}
}

func request(prompt string) loop.Request {
	return loop.Request{RunID: "run-1", Transcript: loop.Transcript{System: "be careful", Messages: []loop.Message{loop.UserText(prompt)}}}
}

// checkTranscript asserts every tool_use has exactly one tool_result, in the
// message right after its assistant turn, and that no result is orphaned.
func checkTranscript(t testing.TB, tr loop.Transcript) {
	t.Helper()
	if err := loop.CheckToolPairing(tr); err != nil {
		t.Fatalf("transcript invalid: %v", err)
	}
}

func resultFor(tr loop.Transcript, callID string) (loop.Block, bool) {
	for _, m := range tr.Messages {
		for _, b := range m.Content {
			if b.Type == loop.BlockToolResult && b.ToolUseID == callID {
				return b, true
			}
		}
	}
	return loop.Block{}, false
}

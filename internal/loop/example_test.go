package loop_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgate/agentgate/internal/loop"
)

// Example_runAndResume runs a loop whose model wants to write, stores the
// suspended state as JSON, and resumes it with an approval.
func Example_runAndResume() {
	write := &loop.FuncTool{
		Def: loop.Definition{
			Name:        "write_note",
			Description: "Write a note.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Effect:      loop.EffectWrite,
		},
		CallFunc: func(ctx context.Context, input json.RawMessage) (loop.Result, error) {
			fmt.Println("writing with key", loop.IdempotencyKey(ctx))
			return loop.Result{Content: "saved"}, nil
		},
	}
	tools, _ := loop.NewToolbox(write)
	turns := []loop.Message{
		{Role: loop.RoleAssistant, Content: []loop.Block{loop.ToolUseBlock("call-1", "write_note", json.RawMessage(`{"text":"hi"}`))}},
		{Role: loop.RoleAssistant, Content: []loop.Block{loop.TextBlock("The note is saved.")}},
	}
	model := loop.ModelFunc(func(_ context.Context, req loop.ModelRequest) (loop.ModelResponse, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == loop.RoleAssistant {
				n++
			}
		}
		return loop.ModelResponse{Message: turns[n]}, nil
	})
	r := &loop.Runner{Model: model, Tools: tools, NewID: func() string { return "s1" }}

	out, _ := r.Run(context.Background(), loop.Request{RunID: "run-7", Transcript: loop.Transcript{Messages: []loop.Message{loop.UserText("Save a note saying hi.")}}})
	fmt.Println(out.Kind, "on", out.Suspended.PendingCalls[0].Name)

	saved, _ := out.Suspended.Encode() // store anywhere; resume in any process
	state, _ := loop.DecodeState(saved)
	out, _ = r.Resume(context.Background(), state, loop.Decision{TurnDigest: state.TurnDigest, Action: loop.ActionApprove})
	fmt.Println(out.Reason+":", out.FinalText)
	// Output:
	// suspended on write_note
	// writing with key run-7/s1/call-1
	// completed: The note is saved.
}

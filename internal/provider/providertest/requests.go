package providertest

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// System is the system text of every test request.
const System = "You are a careful assistant. Use the tools to answer."

// Prompt is the user's question in every test request.
const Prompt = "What does notes.txt say? Then replace it with a greeting."

// Tools returns the two tools every test request offers: a read and a write.
func Tools() []loop.ToolSpec {
	return []loop.ToolSpec{
		{
			Name:        "read_file",
			Description: "Read a text file and return its content.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Path of the file, relative to the workspace."}},"required":["path"],"additionalProperties":false}`),
		},
		{
			Name:        "write_file",
			Description: "Replace the content of a text file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string","maxLength":10000}},"required":["path","content"]}`),
		},
	}
}

// FirstRequest is the opening request of a run: system text, one user
// message, the tools, and no per-call token cap.
func FirstRequest() loop.ModelRequest {
	return loop.ModelRequest{System: System, Messages: []loop.Message{loop.UserText(Prompt)}, Tools: Tools()}
}

// AssistantToolTurn is an assistant turn with text and two tool calls, the
// way a provider returned it, with the provider's ids.
func AssistantToolTurn(readID, writeID string) loop.Message {
	return loop.Message{Role: loop.RoleAssistant, Content: []loop.Block{
		loop.TextBlock("I will read the file first, then replace it."),
		loop.ToolUseBlock(readID, "read_file", json.RawMessage(`{"path":"notes.txt"}`)),
		loop.ToolUseBlock(writeID, "write_file", json.RawMessage(`{"path":"notes.txt","content":"Hello!"}`)),
	}}
}

// ToolResults is the user turn answering AssistantToolTurn: a successful
// read and a failed write.
func ToolResults(readID, writeID string) loop.Message {
	return loop.Message{Role: loop.RoleUser, Content: []loop.Block{
		loop.ToolResultBlock(readID, loop.Result{Content: "buy milk"}),
		loop.ToolResultBlock(writeID, loop.Result{Content: "permission denied: notes.txt is read-only", IsError: true}),
	}}
}

// RoundTripRequest is the request after a turn of two tool calls and their
// results, with a per-call cap of 512 output tokens.
func RoundTripRequest(readID, writeID string) loop.ModelRequest {
	req := FirstRequest()
	req.Messages = append(req.Messages, AssistantToolTurn(readID, writeID), ToolResults(readID, writeID))
	req.MaxOutputTokens = 512
	return req
}

// ThroughSuspendedState encodes tr inside a SuspendedState the way a
// suspension stores it, decodes it into fresh values the way a resume in
// another process does, and returns the decoded transcript.
func ThroughSuspendedState(t testing.TB, tr loop.Transcript) loop.Transcript {
	t.Helper()
	st := &loop.SuspendedState{SchemaVersion: loop.SchemaVersion, RunID: "run-1", SuspensionID: "susp-1", Transcript: tr}
	return ThroughStore(t, st).Transcript
}

// ThroughStore encodes st the way the worker hands it to the run store
// (loop JSON, gzipped and hashed by runs.EncodeBlob) and decodes it the way
// a resume in another process loads it.
func ThroughStore(t testing.TB, st *loop.SuspendedState) *loop.SuspendedState {
	t.Helper()
	raw, err := st.Encode()
	if err != nil {
		t.Fatalf("encode suspended state: %v", err)
	}
	ref, blob, err := runs.EncodeBlob(st.RunID, raw)
	if err != nil {
		t.Fatalf("store suspended state: %v", err)
	}
	plain, err := runs.DecodeBlob(ref, blob)
	if err != nil {
		t.Fatalf("load suspended state: %v", err)
	}
	back, err := loop.DecodeState(plain)
	if err != nil {
		t.Fatalf("decode suspended state: %v", err)
	}
	return back
}

package apitest_test

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
)

// TestStartRefusesBlocksInTheWrongRole: an opening conversation with a
// tool_result in an assistant message or a tool_use in a user message,
// which no provider takes, is refused 422 at submission (no run is
// created), naming the message and the block; one with each block in its
// place is taken.
func TestStartRefusesBlocksInTheWrongRole(t *testing.T) {
	s := start(t, apitest.Options{})
	c := s.Client(t)
	cases := []struct {
		name, messages, want string
	}{
		{"tool_result in an assistant message",
			`[{"role":"user","content":[{"type":"text","text":"hi"}]},
			  {"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_result","tool_use_id":"zz","content":"fake"}]},
			  {"role":"user","content":[{"type":"text","text":"go"}]}]`,
			"messages: message 1 block 1: tool_result zz is in an assistant message: tool_result blocks belong to user messages"},
		{"tool_use in a user message",
			`[{"role":"user","content":[{"type":"tool_use","id":"x","name":"write_document","input":{"path":"pages/a.md","text":"b"}}]}]`,
			"messages: message 0 block 0: tool_use x is in a user message: tool_use blocks belong to assistant messages"},
		{"tool_use answered in a user message",
			`[{"role":"user","content":[{"type":"text","text":"hi"}]},
			  {"role":"assistant","content":[{"type":"tool_use","id":"r","name":"read_document","input":{"path":"pages/pricing.md"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"r","content":"# Pricing"},{"type":"tool_use","id":"x","name":"write_document","input":{"path":"pages/a.md","text":"b"}}]}]`,
			"messages: message 2 block 1: tool_use x is in a user message"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			status, out, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"approvers":["bob"],"messages":`+tt.messages+`}`)
			if msg := errMessage(out); status != 422 || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %q, want 422 saying %q", status, msg, tt.want)
			}
		})
	}
	status, out, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"approvers":["bob"],"messages":[
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"r","name":"read_document","input":{"path":"pages/pricing.md"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"r","content":"# Pricing"},{"type":"text","text":"go on"}]}]}`)
	if status != 202 {
		t.Errorf("a conversation with each block in its place: got %d %v, want 202", status, out)
	}
}

package runs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

func TestShortenInput(t *testing.T) {
	long := strings.Repeat("ü", 10000)
	tests := []struct {
		name, in  string
		truncated bool
		contains  string
	}{
		{"fits", `{"path":"a","text":"b"}`, false, `"text":"b"`},
		{"long string cut, short kept", `{"path":"pages/a.md","text":"` + long + `"}`, true, `"path":"pages/a.md"`},
		{"nested", `{"a":[{"b":"` + long + `"}],"n":1.50}`, true, `"n":1.50`},
		{"huge array of numbers cannot be shortened", `[` + strings.Repeat("1,", 20000) + `1]`, true, ""},
		{"not JSON", `{"a":` + long, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := shortenInput(json.RawMessage(tt.in), 4096)
			assert.Equal(t, tt.truncated, truncated)
			assert.LessOrEqual(t, len(got), 4096)
			if tt.contains == "" {
				assert.Nil(t, got)
				return
			}
			assert.True(t, json.Valid(got), "%s", got)
			assert.True(t, utf8.Valid(got))
			assert.Contains(t, string(got), tt.contains)
			if truncated {
				assert.Contains(t, string(got), "…")
			}
		})
	}
}

//agentgate:megabytes
func TestSummarizeCallsFitsTheRow(t *testing.T) {
	// A call has approval terms (held) or its rule's description (let run,
	// or denied), never both: the worst case of each.
	for _, held := range []bool{true, false} {
		st := &loop.SuspendedState{Previews: map[string]string{}}
		for i := range MaxPendingCalls {
			id := strings.Repeat("i", loop.MaxCallIDBytes-3) + string(rune('A'+i%26)) + string(rune('a'+i/26))
			in := `{"text":"` + strings.Repeat("\u0001", 5000) + `"}`
			c := loop.PendingCall{ID: id, Name: strings.Repeat("n", 300), Input: json.RawMessage(in), NeedsApproval: held,
				Rule: strings.Repeat("r", 64), Rejected: strings.Repeat("\u0001", 2000),
				DefinitionUnverified: &loop.UnverifiedDefinition{Reason: strings.Repeat("r", loop.MaxUnverifiedReasonBytes), ListedAt: time.Date(2026, 12, 5, 9, 14, 2, 123456789, time.UTC)}}
			if held {
				c.Approval = &loop.ApprovalRule{Approvers: []string{"group:finance-approvers", "group:security-officers"}, RequiredApprovals: 2,
					FourEyes: true, AlwaysAsk: true, Description: strings.Repeat("d", 200)}
			} else {
				c.RuleDescription = strings.Repeat("\u0001", 1000)
			}
			st.PendingCalls = append(st.PendingCalls, c)
			st.Previews[id] = strings.Repeat("\u0001", 50000)
		}
		calls := SummarizeCalls(st)
		b, err := json.Marshal(calls)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(b), MaxPendingCallsSize, "worst-case escaping still fits (held: %v)", held)
		for _, c := range calls {
			assert.True(t, c.InputTruncated)
			assert.True(t, c.PreviewTruncated)
			assert.Equal(t, 50000, c.PreviewSize)
			assert.LessOrEqual(t, len(c.Tool), SummaryToolBytes+len("…"))
			assert.NotEmpty(t, c.Rejected, "why a call cannot run is cut, never dropped")
			if !held {
				assert.NotEmpty(t, c.RuleDescription, "the rule's description is cut, never dropped")
			}
		}
	}
}

func TestFinalOutputStaysWithinTheRowLimit(t *testing.T) {
	short := FinalOutput("done", loop.ReasonCompleted, "")
	assert.JSONEq(t, `{"text":"done","reason":"completed"}`, string(short))

	text := strings.Repeat("\"quoted\" ", MaxOutputSize/4)
	out := FinalOutput(text, loop.ReasonCompleted, "")
	assert.LessOrEqual(t, len(out), MaxOutputSize)
	var got struct {
		Text          string `json:"text"`
		TextTruncated bool   `json:"text_truncated"`
		TextSize      int    `json:"text_size"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	assert.True(t, got.TextTruncated)
	assert.Equal(t, len(text), got.TextSize)
	assert.True(t, strings.HasPrefix(text, strings.TrimSuffix(got.Text, "…")))
	assert.Greater(t, len(out), MaxOutputSize-16, "as much of the text is kept as fits")

	plain := strings.Repeat("x", MaxOutputSize+20000)
	out = FinalOutput(plain, loop.ReasonCompleted, "")
	assert.LessOrEqual(t, len(out), MaxOutputSize)
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Greater(t, len(got.Text), MaxOutputSize-100, "an output just over the limit keeps nearly all that fits, not half")
}

// TestInputSizeIsTheServedInputs: a model may space its JSON; the state
// keeps the input compact, and GET /runs/{id}/calls/{call_id}?part=input
// serves that, so input_size counts the compact form.
func TestInputSizeIsTheServedInputs(t *testing.T) {
	spaced := json.RawMessage(`{ "path" : "a.md",  "text": "x y" }`)
	// What the state keeps: the call through the transcript's encoding.
	kept, err := loop.MarshalJSON(loop.ClientCall{ID: "c1", Name: "w", Input: spaced})
	require.NoError(t, err)
	var back loop.ClientCall
	require.NoError(t, json.Unmarshal(kept, &back))
	got := SummarizeHandOver([]loop.ClientCall{{ID: "c1", Name: "w", Input: spaced}})
	require.Len(t, got, 1)
	assert.Equal(t, len(back.Input), got[0].InputSize, "input_size is the kept input's length")
	assert.False(t, got[0].InputTruncated)
}

// TestHandedOverCallsStayWithinTheEventLimit: the originals of edited
// calls are kept whole only while their encoding (escapes count) fits.
func TestHandedOverCallsStayWithinTheEventLimit(t *testing.T) {
	big := json.RawMessage(`{"q":"` + strings.Repeat("<", 4<<10) + `"}`) // 24 KiB encoded
	st := &loop.SuspendedState{HandOver: &loop.HandOver{}}
	var blocks []loop.Block
	rec := &HandOverRecord{}
	for i := range 8 {
		id := fmt.Sprintf("c%d", i)
		blocks = append(blocks, loop.ToolUseBlock(id, "order", big))
		st.HandOver.Calls = append(st.HandOver.Calls, loop.ClientCall{ID: id, Name: "order", Input: json.RawMessage(`{"q":"x"}`), Edited: true})
		rec.Calls = append(rec.Calls, ClientCallSummary{ID: id, Name: "order"})
	}
	st.Transcript = loop.Transcript{Messages: []loop.Message{loop.UserText("hi"), {Role: loop.RoleAssistant, Content: blocks}}}
	calls := handedOverCalls(st, rec)
	data := mustJSON(calls)
	assert.LessOrEqual(t, len(data), MaxEventDataSize/2+4096, "%d bytes", len(data))
	assert.NotEmpty(t, calls[0].OriginalInput, "the first original fits")
	assert.NotEmpty(t, calls[1].OriginalInput)
	assert.Empty(t, calls[2].OriginalInput, "the third would pass half the event limit, encoded")
	last := calls[len(calls)-1]
	assert.Empty(t, last.OriginalInput)
	assert.Equal(t, len(big), last.OriginalInputSize, "the rest by digest and size")
	assert.Len(t, last.OriginalInputSHA256, 64)
}

package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/loop"
)

// Bounds of the run row's summary of a held turn (SummarizeCalls). The
// whole inputs and previews are in the suspended state; the row keeps at
// most this much of each call, less when the turn has many calls, so that
// the summary of a turn stays within MaxPendingCallsSize.
const (
	// SummaryInputBytes is the most of one call's input the row keeps.
	SummaryInputBytes = 8 << 10
	// SummaryPreviewBytes is the most of one call's preview the row keeps.
	SummaryPreviewBytes = 16 << 10
	// SummaryToolBytes is the most of a tool name the row keeps (only the
	// name of an unknown tool, which never runs, can be longer).
	SummaryToolBytes = 128
	// SummaryRejectedBytes is the most of why a call cannot run
	// (CallSummary.Rejected) the row keeps.
	SummaryRejectedBytes = 500
)

// minSummaryBytes is the smallest share of input and preview a call keeps
// before SummarizeCalls leaves them out altogether.
const minSummaryBytes = 128

// summaryNoteBytes is how much of a rule's description and of an
// unverified definition's reason a call's summary keeps when even its
// smallest input and preview shares do not fit.
const summaryNoteBytes = 32

// summaryShortNoteBytes is how much of why a call cannot run
// (CallSummary.Rejected) and of the description of the rule that let it
// run or denied it (CallSummary.RuleDescription) a call's summary keeps
// then (such a call has no approval terms to make room for them). Why a
// call cannot run is kept at all so that a per-call decision on it is
// still refused for the right reason (loop.CheckCallDecision).
const summaryShortNoteBytes = 16

// SummarizeCalls returns the run row's summary of a suspended state's
// pending calls, in turn order, within MaxPendingCallsSize as JSON when the
// calls' ids are of a sane size (the loop bounds them, loop.MaxCallIDBytes):
// each input and preview is kept whole when it fits its share, else
// shortened and marked truncated, with its whole size.
func SummarizeCalls(st *loop.SuspendedState) []CallSummary {
	return fitSummary(MaxPendingCallsSize, func(in, pre int) []CallSummary { return summarize(st, in, pre) })
}

// SummarizeHandOver returns the run row's summary of handed-over client
// calls, in turn order, within MaxHandOverCallsSize as JSON (ids of a sane
// size given): each final input is kept whole when it fits its share, else
// shortened and marked truncated, with its whole size. The whole inputs
// stay in the state blob (Store.HeldCall).
func SummarizeHandOver(calls []loop.ClientCall) []ClientCallSummary {
	return fitSummary(MaxHandOverCallsSize, func(in, _ int) []ClientCallSummary {
		out := make([]ClientCallSummary, len(calls))
		for i, c := range calls {
			input := compactInput(c.Input)
			out[i] = ClientCallSummary{ID: c.ID, Name: cutText(c.Name, SummaryToolBytes, "…"), InputSize: len(input), Edited: c.Edited}
			out[i].Input, out[i].InputTruncated = shortenInput(input, in)
		}
		return out
	})
}

// fitSummary returns build(in, pre) with the largest shares of input and
// preview per call, from SummaryInputBytes and SummaryPreviewBytes halving
// down to minSummaryBytes, whose JSON is within limit; failing that, with
// no input or preview at all.
func fitSummary[T any](limit int, build func(in, pre int) []T) []T {
	in, pre := SummaryInputBytes, SummaryPreviewBytes
	for {
		out := build(in, pre)
		if in == 0 {
			return out
		}
		if b, err := json.Marshal(out); err == nil && len(b) <= limit {
			return out
		}
		if in, pre = in/2, pre/2; in < minSummaryBytes {
			in, pre = 0, 0
		}
	}
}

func summarize(st *loop.SuspendedState, inMax, preMax int) []CallSummary {
	out := make([]CallSummary, 0, len(st.PendingCalls))
	for _, c := range st.PendingCalls {
		s := CallSummary{
			ID: c.ID, Tool: cutText(c.Name, SummaryToolBytes, "…"), NeedsApproval: c.NeedsApproval, Effect: c.Effect,
			InputSize: len(compactInput(c.Input)),
			Rule:      c.Rule, Approval: cloneApproval(c.Approval), Denied: c.Denied, ApprovedBy: c.ApprovedBy,
			Rejected: cutText(c.Rejected, SummaryRejectedBytes, "…"), RuleDescription: c.RuleDescription,
		}
		if u := c.DefinitionUnverified; u != nil {
			note := *u
			s.DefinitionUnverified = &note
		}
		if inMax == 0 {
			// The last resort of fitSummary: the texts for approvers are
			// cut too (the state keeps them whole; the approvers named,
			// which authorization reads, never are).
			if s.Approval != nil {
				s.Approval.Description = cutText(s.Approval.Description, summaryNoteBytes, "…")
			}
			s.RuleDescription = cutText(s.RuleDescription, summaryShortNoteBytes, "…")
			if s.DefinitionUnverified != nil {
				s.DefinitionUnverified.Reason = cutText(s.DefinitionUnverified.Reason, summaryNoteBytes, "…")
			}
			s.Rejected = cutText(s.Rejected, summaryShortNoteBytes, "…")
		}
		s.Input, s.InputTruncated = shortenInput(compactInput(c.Input), inMax)
		if p := st.Previews[c.ID]; p != "" {
			s.PreviewSize = len(p)
			if len(p) <= preMax {
				s.Preview = p
			} else {
				s.PreviewTruncated = true
				if preMax > 0 {
					s.Preview = cutText(p, preMax, fmt.Sprintf("\n… [preview cut here: %d of %d bytes shown; the call's full preview has the rest]", len(cutText(p, preMax, "")), len(p)))
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// shortenInput returns in when it is at most max bytes; otherwise a copy
// whose long strings are cut (ending in "…") to fit max, or nil when no such
// copy fits. ok-to-show inputs keep the model's own bytes.
func shortenInput(in json.RawMessage, max int) (json.RawMessage, bool) {
	if len(in) <= max {
		return in, false
	}
	if max == 0 {
		return nil, true
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, true
	}
	for limit := max / 2; limit >= 16; limit /= 2 {
		b, err := loop.MarshalJSON(cutStrings(v, limit))
		if err == nil && len(b) <= max {
			return b, true
		}
	}
	return nil, true
}

// cutStrings returns v with every string longer than limit bytes cut to
// its first limit bytes (whole characters) followed by "…".
func cutStrings(v any, limit int) any {
	switch t := v.(type) {
	case string:
		return cutText(t, limit, "…")
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cutStrings(e, limit)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = cutStrings(e, limit)
		}
		return out
	}
	return v
}

// cutText returns s when it has at most max bytes; otherwise its longest
// prefix of whole characters within max bytes, followed by mark.
func cutText(s string, max int, mark string) string {
	if len(s) <= max {
		return s
	}
	return s[:runeStart(s, max)] + mark
}

// runeStart returns the largest i <= n at which a character of s begins
// (or len(s) when n is past the end).
func runeStart(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// largestParts says what makes a suspended state large: the held calls
// with the most input and preview bytes (at most three) and the rest of
// the transcript, for the message of a state over MaxStateSize.
func largestParts(st *loop.SuspendedState) string {
	type part struct {
		id, tool       string
		input, preview int
	}
	parts := make([]part, 0, len(st.PendingCalls))
	for _, c := range st.PendingCalls {
		parts = append(parts, part{c.ID, c.Name, len(c.Input), len(st.Previews[c.ID])})
	}
	slices.SortStableFunc(parts, func(a, b part) int { return (b.input + b.preview) - (a.input + a.preview) })
	var b strings.Builder
	b.WriteString("the largest held calls:")
	for i, p := range parts {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", len(parts)-3)
			break
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " call %s (%s) input %d bytes, preview %d bytes", cutText(p.id, 64, "…"), cutText(p.tool, 64, "…"), p.input, p.preview)
	}
	text := 0
	for _, m := range st.Transcript.Messages {
		for _, bl := range m.Content {
			text += len(bl.Text) + len(bl.Input) + len(bl.Content)
		}
	}
	fmt.Fprintf(&b, "; the transcript holds %d bytes of text, tool inputs and results (each held input is counted there too)", text+len(st.Transcript.System))
	return b.String()
}

// compactInput is a call's input as the state blob keeps it and GET
// /runs/{id}/calls/{call_id}?part=input serves it: compact JSON (the
// model's own spacing does not survive the state's encoding). input_size
// and the shortening both go by it.
func compactInput(input json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, input) != nil {
		return input
	}
	return b.Bytes()
}

package httpapi

import (
	"context"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/runs"
)

// MaxTextPage bounds one page of a held or handed-over call's whole input
// or preview (GET /runs/{id}/calls/{call_id}, and the approval page's
// ?call= view):
// the page's text as it travels, escaped into the JSON or HTML body and
// again into the Lambda proxy response, stays within it, well under
// Lambda's 6 MB response limit. Plain text of about this many bytes fits
// one page; text that needs escaping fits less.
const MaxTextPage = 4 << 20

// The parts of a held call a text page shows.
const (
	PartPreview = "preview"
	PartInput   = "input"
)

// CallTextView is one page of the whole input or preview of a call the run
// holds (GET /runs/{id}/calls/{call_id}): a pending call of the held turn,
// or a client call handed over to the caller.
type CallTextView struct {
	RunID string `json:"run_id"`
	// SuspensionID and TurnDigest name the held turn of a pending call
	// (absent for a handed-over call).
	SuspensionID string `json:"suspension_id,omitempty"`
	TurnDigest   string `json:"turn_digest,omitempty"`
	// ToolResultsID names the hand-over of a handed-over call (absent for a
	// pending call).
	ToolResultsID string `json:"tool_results_id,omitempty"`
	CallID        string `json:"call_id"`
	Tool          string `json:"tool"`
	// Part is "preview" or "input" (the call's JSON arguments as text).
	Part string `json:"part"`
	// Size is the part's whole length in bytes.
	Size int `json:"size"`
	// Offset is where Text begins, in bytes.
	Offset int `json:"offset"`
	// Text is the part from Offset, whole characters, at most one page.
	Text string `json:"text"`
	// NextOffset is where the next page begins; absent on the last page.
	NextOffset *int `json:"next_offset,omitempty"`
}

// HeldText is one page of a held call's part, as both the API and the
// approval page serve it.
type HeldText struct {
	Call       runs.CallSummary
	Part       string
	Size       int
	Offset     int
	Text       string
	NextOffset int // 0 on the last page
}

// heldText reads one page of a part of a waiting run's held call from the
// suspended state (the approval page's view). cost says what a character
// costs on the wire (JSON or HTML). Codes: EBadRequest (part or offset
// malformed), EInvalid (offset not at a character of the part, or past its
// end), ENotFound, EConflict (the run does not wait for approval), EGone,
// EInternal.
func (a *API) heldText(ctx context.Context, r *runs.Run, callID, part string, offset int64, cost func(rune, int) int) (HeldText, error) {
	if r.Status != runs.StatusWaiting {
		return HeldText{}, errorf(runs.EConflict, "run %s is %s: held calls are shown while it waits for approval", r.ID, r.Status)
	}
	return a.callText(ctx, r, callID, part, offset, cost)
}

// callText reads one page of a part of a call r holds from its state: a
// pending call while r waits for approval (part "preview" by default), or
// a handed-over client call while it waits for tool results (part "input",
// the only one such a call has). Codes: those of heldText, and EConflict
// when r waits for neither, EInvalid for the preview of a handed-over call.
func (a *API) callText(ctx context.Context, r *runs.Run, callID, part string, offset int64, cost func(rune, int) int) (HeldText, error) {
	switch part {
	case "":
		part = PartPreview
		if r.Status == runs.StatusWaitingForToolResults {
			part = PartInput
		}
	case PartPreview, PartInput:
	default:
		return HeldText{}, errorf(runs.EBadRequest, "query parameter part must be %q or %q", PartPreview, PartInput)
	}
	var sum runs.CallSummary
	switch r.Status {
	case runs.StatusWaiting:
		for _, c := range r.PendingCalls {
			if c.ID == callID {
				sum = c
			}
		}
	case runs.StatusWaitingForToolResults:
		for _, c := range r.HandOver.Calls {
			if c.ID == callID {
				sum = runs.CallSummary{ID: c.ID, Tool: c.Name}
			}
		}
		if sum.ID != "" && part == PartPreview {
			return HeldText{}, errorf(runs.EInvalid, "call %s was handed over to the caller and has no preview: ask for part=%s", callID, PartInput)
		}
	default:
		return HeldText{}, errorf(runs.EConflict, "run %s is %s: calls are shown while it waits for approval or for tool results", r.ID, r.Status)
	}
	if sum.ID == "" {
		return HeldText{}, errorf(runs.ENotFound, "call %q is not held by run %s", callID, r.ID)
	}
	call, preview, err := a.Store.HeldCall(ctx, r, callID)
	if err != nil {
		return HeldText{}, err
	}
	text := preview
	if part == PartInput {
		text = string(call.Input)
	}
	if offset > int64(len(text)) || (offset < int64(len(text)) && !utf8.RuneStart(text[offset])) || !pageStart(text, int(offset), MaxTextPage, cost) {
		return HeldText{}, errorf(runs.EInvalid, "offset %d is not where a page of the %s (%d bytes) begins: use 0 or a next_offset", offset, part, len(text))
	}
	page, next := textPage(text, int(offset), MaxTextPage, cost)
	ht := HeldText{Call: sum, Part: part, Size: len(text), Offset: int(offset), Text: page}
	if next < len(text) {
		ht.NextOffset = next
	}
	return ht, nil
}

// pageStart reports whether a page begins at offset: 0, or where the
// pages from 0 on (textPage, with the same budget and costs) reach it.
func pageStart(text string, offset, budget int, cost func(r rune, size int) int) bool {
	at := 0
	for at < offset {
		_, at = textPage(text, at, budget, cost)
	}
	// The end is no page's start (no next_offset points there), unless
	// the text is empty.
	return at == offset && (offset < len(text) || offset == 0)
}

// textPage returns the text from offset on whose characters cost at most
// budget together (at least one character), and the offset after it.
func textPage(text string, offset, budget int, cost func(r rune, size int) int) (string, int) {
	used, end := 0, offset
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		c := cost(r, size)
		if used+c > budget && end > offset {
			break
		}
		used += c
		end += size
	}
	return text[offset:end], end
}

// jsonCost is what one character of a JSON string costs once escaped into
// the body and the body escaped again into the Lambda proxy response
// (assuming the worst: HTML characters escaped there too).
func jsonCost(r rune, size int) int {
	switch {
	case r == '"' || r == '\\':
		return 4 // \" then \\\"
	case r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 3 // \n then \\n
	case r < 0x20, r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
		return 7 // \u0001 then \\u0001
	case r == '<' || r == '>' || r == '&':
		return 6 // then \u003c
	}
	return size
}

// HTMLCost is what one character of a preview costs on the approval page:
// made visible (approval.CleanText turns control and format characters
// into \u escapes), HTML-escaped, then escaped into the Lambda proxy
// response.
func HTMLCost(r rune, size int) int {
	switch {
	case r == '\n' || r == '\t':
		return 2
	case r == utf8.RuneError && size == 1:
		return 3 // U+FFFD
	case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
		return 11 // \u0085 (or \U0001xxxx as \u1xxxx) then \\u...
	case r == '<' || r == '>':
		return 9 // &lt; then \u0026lt;
	case r == '&' || r == '"' || r == '\'' || r == '+':
		return 10 // &amp; &#34; &#39; &#43; then \u0026...
	}
	return size
}

func (a *API) getCall(ctx context.Context, req events.APIGatewayProxyRequest, id, callID string) (events.APIGatewayProxyResponse, error) {
	offset, err := queryInt(req, "offset", 0, 0, 1<<40)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	r, _, err := a.readable(ctx, req, id)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	ht, err := a.callText(ctx, r, callID, req.QueryStringParameters["part"], offset, jsonCost)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	v := CallTextView{RunID: r.ID, CallID: ht.Call.ID, Tool: ht.Call.Tool, Part: ht.Part, Size: ht.Size, Offset: ht.Offset, Text: ht.Text}
	if r.Status == runs.StatusWaitingForToolResults {
		v.ToolResultsID = r.HandOver.ID
	} else {
		v.SuspensionID, v.TurnDigest = r.SuspensionID, r.TurnDigest
	}
	if ht.NextOffset > 0 {
		v.NextOffset = &ht.NextOffset
	}
	return jsonResponse(http.StatusOK, v), nil
}

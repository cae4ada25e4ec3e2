package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
)

// Limits of client-tool results (issue #13). A caller's submission over
// them is refused with ETooLarge and changes nothing.
const (
	// MaxToolResultSize bounds the content of one result, the bound of an
	// MCP tool's result (mcptool.MaxResultBytes).
	MaxToolResultSize = 64 << 10
	// MaxToolResultsSize bounds the contents of one submission together.
	MaxToolResultsSize = 1 << 20
	// MaxHandOverCallsSize bounds the row's summary of the handed-over
	// calls (ids, names and bounded final inputs, as JSON:
	// SummarizeHandOver). The calls' inputs themselves are bounded only by
	// the state blob (MaxStateSize).
	MaxHandOverCallsSize = 32 << 10
)

// Event types of client-tool hand-overs.
const (
	// EventHandedOver: the turn's approved client calls were handed to
	// the caller (tool-results id, call ids and tools, deadline).
	EventHandedOver = string(loop.StepHandedOver)
	// EventToolResults: the caller's results arrived (who, per call: id,
	// is_error and size; never the content).
	EventToolResults = "tool_results"
)

// HandOverRecord is the run row's record of the current (or last)
// hand-over of client calls: enough for the API to show the calls and to
// check a submission without loading the state blob.
type HandOverRecord struct {
	// ID is the tool-results id a submission must name (the state's
	// suspension id).
	ID string `json:"id"`
	// Calls are the row's bounded summary of the handed-over calls, in
	// turn order (SummarizeHandOver).
	Calls    []ClientCallSummary `json:"calls"`
	At       time.Time           `json:"at"`
	Deadline time.Time           `json:"deadline"`
	// Results points at the blob of the submitted results; zero until
	// they arrive.
	Results     StateRef  `json:"results,omitzero"`
	SubmittedBy string    `json:"submitted_by,omitempty"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
}

// ClientCallSummary is the run row's copy of one handed-over
// loop.ClientCall. It is bounded like a held call's summary: a long final
// input is shortened here and marked, and the whole of it stays in the
// state blob (Store.HeldCall, GET /runs/{id}/calls/{call_id}?part=input).
type ClientCallSummary struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the call's final (possibly edited) JSON arguments; when
	// InputTruncated, a shortened copy (long strings cut, ending in "…")
	// or absent when even that is too large.
	Input json.RawMessage `json:"input,omitempty"`
	// InputSize is the length in bytes of the whole final input (0 on
	// rows written before inputs were summarized, which kept them whole).
	InputSize int `json:"input_size,omitempty"`
	// InputTruncated says Input is not the whole input.
	InputTruncated bool `json:"input_truncated,omitempty"`
	// Edited says an approver changed the input.
	Edited bool `json:"edited,omitempty"`
}

// ClientCall returns the loop's view of the summarized call: what
// loop.ValidateResults needs (its id and tool, never its input, which the
// row may have shortened).
func (c ClientCallSummary) ClientCall() loop.ClientCall {
	return loop.ClientCall{ID: c.ID, Name: c.Name, Input: cloneRaw(c.Input), Edited: c.Edited}
}

// ClientCalls returns the loop's view of the handed-over calls
// (ClientCallSummary.ClientCall).
func (h *HandOverRecord) ClientCalls() []loop.ClientCall {
	out := make([]loop.ClientCall, len(h.Calls))
	for i, c := range h.Calls {
		out[i] = c.ClientCall()
	}
	return out
}

func (h *HandOverRecord) clone() *HandOverRecord {
	if h == nil {
		return nil
	}
	c := *h
	if h.Calls != nil {
		c.Calls = make([]ClientCallSummary, len(h.Calls))
		for i, call := range h.Calls {
			call.Input = cloneRaw(call.Input)
			c.Calls[i] = call
		}
	}
	return &c
}

// HandOff is what HandOver records: the loop's state waiting for the
// results (state.HandOver set) and the deadline of the results.
type HandOff struct {
	State    *loop.SuspendedState
	Deadline time.Time
}

// HandOver moves owner's RUNNING run to WAITING_FOR_TOOL_RESULTS: the
// state blob is put first, then one write stores the row (the hand-over
// record with the bounded summary of the calls, the state ref, the
// counters; the lease released) and a handed_over event. A call's input
// may be as large as the state blob allows: the row keeps a shortened copy
// and the blob the whole. Codes: EInvalid, ETooLarge (the state is over
// MaxStateSize compressed; the message names the largest calls and their
// sizes), ENotFound, EConflict.
func (s *Store) HandOver(ctx context.Context, cur *Run, owner string, h HandOff) (*Run, error) {
	if err := s.guardLease(cur, owner); err != nil {
		return nil, err
	}
	now := s.now()
	st := h.State
	switch {
	case st == nil || st.HandOver == nil:
		return nil, Errorf(EInvalid, "a hand-over needs a state with client calls")
	case st.RunID != cur.ID:
		return nil, Errorf(EInvalid, "state is of run %q, not %s", st.RunID, cur.ID)
	case st.SuspensionID == "":
		return nil, Errorf(EInvalid, "tool-results id is required")
	case st.SuspensionID == cur.SuspensionID || (cur.HandOver != nil && st.SuspensionID == cur.HandOver.ID):
		return nil, Errorf(EInvalid, "tool-results id %q was already used by this run", st.SuspensionID)
	case len(st.HandOver.Calls) == 0:
		return nil, Errorf(EInvalid, "a hand-over needs at least one client call")
	case len(st.HandOver.Calls) > MaxPendingCalls:
		return nil, Errorf(EInvalid, "%d client calls, at most %d allowed", len(st.HandOver.Calls), MaxPendingCalls)
	case !h.Deadline.After(now):
		return nil, Errorf(EInvalid, "tool-results deadline %s is not in the future", h.Deadline.UTC().Format(time.RFC3339))
	}
	if cur.PendingEffect != "" {
		return nil, Errorf(EConflict, "run %s has pending effect %q; record its result before handing over", cur.ID, cur.PendingEffect)
	}
	seen := map[string]bool{}
	for _, c := range st.HandOver.Calls {
		if c.ID == "" || c.Name == "" {
			return nil, Errorf(EInvalid, "client calls need an id and a tool")
		}
		if seen[c.ID] {
			return nil, Errorf(EInvalid, "client call id %q appears twice", c.ID)
		}
		seen[c.ID] = true
		if len(c.Input) == 0 || !json.Valid(c.Input) {
			return nil, Errorf(EInvalid, "client call %s: input is not valid JSON", c.ID)
		}
	}
	rec := &HandOverRecord{ID: st.SuspensionID, At: now, Deadline: ms(h.Deadline), Calls: SummarizeHandOver(st.HandOver.Calls)}
	if b, _ := json.Marshal(rec.Calls); len(b) > MaxHandOverCallsSize {
		// Only ids far longer than loop.MaxCallIDBytes get here.
		return nil, Errorf(EInvalid, "the summary of the client calls is %d bytes as JSON, over the %d-byte limit", len(b), MaxHandOverCallsSize)
	}
	blob, err := st.Encode()
	if err != nil {
		return nil, Errorf(EInvalid, "state cannot be encoded: %v", err)
	}
	ref, err := s.states.PutState(ctx, cur.ID, blob)
	if ErrorCode(err) == ETooLarge {
		return nil, Errorf(ETooLarge, "%s; %s", ErrorMessage(err), largestParts(st))
	}
	if err != nil {
		return nil, fmt.Errorf("hand over run %s: put state: %w", cur.ID, err)
	}
	next := cur.Clone()
	next.Status = StatusWaitingForToolResults
	next.HandOver = rec
	next.State = ref
	next.Checkpoint = StateRef{} // the hand-over state is where the run goes on
	next.Counters = st.Counters
	next.LeaseOwner, next.LeaseUntil = "", time.Time{}
	next.Reclaims = 0 // the run got somewhere
	calls := handedOverCalls(st, rec)
	ev := Event{Type: EventHandedOver, Actor: owner, Data: mustJSON(struct {
		ToolResultsID string           `json:"tool_results_id"`
		Calls         []handedOverCall `json:"calls"`
		Deadline      time.Time        `json:"deadline"`
		StateSHA256   string           `json:"state_sha256"`
		StateSize     int64            `json:"state_size"`
	}{rec.ID, calls, rec.Deadline, ref.SHA256, ref.Size})}
	// A failed write leaves an orphan blob under the run's prefix; purge
	// deletes the prefix with the run.
	return s.commit(ctx, cur, next, Write{Events: []Event{ev}})
}

// ToolResults is a caller's submission of client-tool results.
type ToolResults struct {
	// ID is the tool-results id of the hand-over answered.
	ID string
	// Submitter is the authenticated caller (whether it may submit is the
	// caller's check: MaySubmitResults).
	Submitter string
	// GrantedBy is the run's ToolExecutors entry that let Submitter submit
	// (a principal or "group:<name>"), as MaySubmitResults returned it;
	// empty for the initiator. The tool_results event records it, so the
	// audit says why a submitter was let in after the directory changed.
	GrantedBy string
	// Results are exactly one per handed-over call.
	Results []loop.ClientResult
}

// check validates the submission's own shape and sizes.
func (tr ToolResults) check() error {
	switch {
	case tr.ID == "":
		return Errorf(EInvalid, "tool_results_id is required")
	case tr.Submitter == "":
		return Errorf(EInvalid, "submitter is required")
	case len(tr.Results) == 0:
		return Errorf(EInvalid, "results: at least one result is required")
	case len(tr.Results) > MaxPendingCalls:
		return Errorf(ETooLarge, "results: %d given, at most %d allowed", len(tr.Results), MaxPendingCalls)
	}
	total := 0
	for i, r := range tr.Results {
		if len(r.Content) > MaxToolResultSize {
			return Errorf(ETooLarge, "results[%d]: content is %d bytes, over the %d-byte limit", i, len(r.Content), MaxToolResultSize)
		}
		total += len(r.Content)
	}
	if total > MaxToolResultsSize {
		return Errorf(ETooLarge, "results: %d bytes of content together, over the %d-byte limit", total, MaxToolResultsSize)
	}
	return nil
}

// answers checks the submission against the run as stored: waiting for
// tool results, on the named hand-over, before its deadline, one result
// per handed-over call.
func (tr ToolResults) answers(cur *Run, now time.Time) error {
	switch {
	case cur.Status != StatusWaitingForToolResults:
		return Errorf(EConflict, "run %s is %s, not waiting for tool results", cur.ID, cur.Status)
	case cur.HandOver == nil || cur.HandOver.ID != tr.ID:
		return Errorf(EConflict, "run %s does not wait for tool results %q (reload the run)", cur.ID, tr.ID)
	case !now.Before(cur.HandOver.Deadline):
		return Errorf(EGone, "the tool results of run %s were due by %s", cur.ID, cur.HandOver.Deadline.UTC().Format(InstantLayout))
	}
	if err := loop.ValidateResults(cur.HandOver.ClientCalls(), tr.Results); err != nil {
		return FromLoop(err)
	}
	return nil
}

// SubmitToolResults moves a WAITING_FOR_TOOL_RESULTS run whose current
// hand-over is tr.ID to RESUMING: the results go into a blob first, then
// one conditional write points the row at it and appends a tool_results
// event. Of concurrent submissions exactly one wins; the others get
// EConflict. A wrong id (EConflict), a missing, extra or repeated call id
// (EInvalid), an oversized result (ETooLarge) or a closed window (EGone)
// changes nothing. Like Decide it retries when only the version moved.
// Codes: EInvalid, ETooLarge, ENotFound, EConflict, EGone.
func (s *Store) SubmitToolResults(ctx context.Context, cur *Run, tr ToolResults) (*Run, error) {
	if cur == nil {
		return nil, Errorf(EInvalid, "run is required")
	}
	if err := tr.check(); err != nil {
		return nil, err
	}
	if err := tr.answers(cur, s.now()); err != nil {
		return nil, err
	}
	blob, err := loop.MarshalJSON(tr.Results)
	if err != nil {
		return nil, Errorf(EInvalid, "results cannot be encoded: %v", err)
	}
	ref, err := s.states.PutState(ctx, cur.ID, blob)
	if err != nil {
		return nil, fmt.Errorf("submit tool results of run %s: put results: %w", cur.ID, err)
	}
	type resultRef struct {
		CallID  string `json:"call_id"`
		IsError bool   `json:"is_error,omitempty"`
		Bytes   int    `json:"bytes"`
	}
	refs := make([]resultRef, len(tr.Results))
	for i, r := range tr.Results {
		refs[i] = resultRef{r.CallID, r.IsError, len(r.Content)}
	}
	return s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if err := tr.answers(cur, now); err != nil {
			return nil, Write{}, err
		}
		next := cur.Clone()
		next.Status = StatusResuming
		next.HandOver.Results = ref
		next.HandOver.SubmittedBy, next.HandOver.SubmittedAt = tr.Submitter, now
		return next, Write{Events: []Event{{Type: EventToolResults, Actor: tr.Submitter, Data: mustJSON(struct {
			ToolResultsID string      `json:"tool_results_id"`
			Results       []resultRef `json:"results"`
			ResultsSHA256 string      `json:"results_sha256"`
			GrantedBy     string      `json:"granted_by,omitempty"`
		}{tr.ID, refs, ref.SHA256, tr.GrantedBy})}}}, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaitingForToolResults && fresh.HandOver != nil && fresh.HandOver.ID == tr.ID
	})
}

// LoadToolResults returns the results submitted for the run's current
// hand-over, verified against their SHA-256. Codes: ENotFound (none
// submitted), EGone (blob missing), EInternal (corrupted).
func (s *Store) LoadToolResults(ctx context.Context, r *Run) ([]loop.ClientResult, error) {
	if r.HandOver == nil || r.HandOver.Results.IsZero() {
		return nil, Errorf(ENotFound, "run %s has no submitted tool results", r.ID)
	}
	b, err := s.states.LoadState(ctx, r.HandOver.Results)
	if err != nil {
		return nil, fmt.Errorf("load tool results of run %s: %w", r.ID, err)
	}
	var out []loop.ClientResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, Errorf(EInternal, "tool results of run %s cannot be read", r.ID)
	}
	return out, nil
}

// expireToolResults ends a WAITING_FOR_TOOL_RESULTS run whose deadline has
// passed as EXPIRED (reason tool_results_expired).
func (s *Store) expireToolResults(ctx context.Context, cur *Run) (*Run, error) {
	if cur.HandOver == nil {
		return nil, Errorf(EConflict, "run %s has no hand-over", cur.ID)
	}
	id := cur.HandOver.ID
	var blobs []StateRef
	r, err := s.retry(ctx, cur, func(cur *Run, now time.Time) (*Run, Write, error) {
		if cur.Status != StatusWaitingForToolResults || cur.HandOver == nil || cur.HandOver.ID != id {
			return nil, Write{}, Errorf(EConflict, "run %s is %s, not waiting for tool results %s", cur.ID, cur.Status, id)
		}
		blobs = blobsOf(cur)
		if now.Before(cur.HandOver.Deadline) {
			return nil, Write{}, Errorf(EConflict, "the tool results of run %s are not due yet", cur.ID)
		}
		next := s.terminal(cur, StatusExpired, loop.ReasonToolResultsExpired, now)
		return next, Write{Events: []Event{{Type: EventExpired, Actor: "purge", Data: mustJSON(struct {
			ToolResultsID string `json:"tool_results_id"`
		}{id})}}}, nil
	}, func(fresh *Run) bool {
		return fresh.Status == StatusWaitingForToolResults && fresh.HandOver != nil && fresh.HandOver.ID == id
	})
	if err != nil {
		return nil, err
	}
	s.dropStates(ctx, r.ID, blobs)
	return r, nil
}

// modelInput is the input the model gave call id in the transcript's last
// assistant turn (the held turn).
func modelInput(t loop.Transcript, id string) (json.RawMessage, bool) {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		m := t.Messages[i]
		if m.Role != loop.RoleAssistant {
			continue
		}
		for _, b := range m.Content {
			if b.Type == loop.BlockToolUse && b.ID == id {
				return b.Input, true
			}
		}
		return nil, false
	}
	return nil, false
}

// handedOverCall is a call in the handed_over event. Edited calls keep the
// model's input beside the approver's (the decision event's), as
// tool_executed does for builtin and MCP calls: the state that holds it is
// deleted with the run.
type handedOverCall struct {
	ID                  string          `json:"id"`
	Tool                string          `json:"tool"`
	Edited              bool            `json:"edited,omitempty"`
	OriginalInput       json.RawMessage `json:"original_input,omitempty"`
	OriginalInputSHA256 string          `json:"original_input_sha256,omitempty"`
	OriginalInputSize   int             `json:"original_input_size,omitempty"`
}

// handedOverCalls lists the calls of the handed_over event: the originals
// of edited calls whole while they fit half of MaxEventDataSize together
// (as encoded: escapes count), each at most loop.MaxAuditInputBytes, the
// others by digest and size.
func handedOverCalls(st *loop.SuspendedState, rec *HandOverRecord) []handedOverCall {
	calls := make([]handedOverCall, len(rec.Calls))
	for i, c := range rec.Calls {
		calls[i] = handedOverCall{ID: c.ID, Tool: c.Name}
	}
	budget := MaxEventDataSize / 2
	for i, c := range st.HandOver.Calls {
		if !c.Edited || i >= len(calls) {
			continue
		}
		calls[i].Edited = true
		orig, ok := modelInput(st.Transcript, c.ID)
		if !ok {
			continue
		}
		enc, err := json.Marshal(orig)
		if err == nil && len(orig) <= loop.MaxAuditInputBytes && len(enc) <= budget {
			calls[i].OriginalInput = orig
			budget -= len(enc)
			continue
		}
		sum := sha256.Sum256(orig)
		calls[i].OriginalInputSHA256, calls[i].OriginalInputSize = hex.EncodeToString(sum[:]), len(orig)
	}
	return calls
}

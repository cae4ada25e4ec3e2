package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentgate/agentgate/client"
)

// RunRecord is what the soak knows about one run it started: its plan, the
// decisions it made, and the run as the API shows it at the end.
type RunRecord struct {
	N         int              `json:"n"`
	ID        string           `json:"id"`
	Mode      Mode             `json:"mode"`
	Cancel    cancelPhase      `json:"cancel,omitempty"`
	Started   time.Time        `json:"started"`
	Decisions []DecisionRecord `json:"decisions,omitempty"`
	CancelOK  bool             `json:"cancel_ok,omitempty"`
	// Found: GET /runs/{id} answered; NotFound: it answered 404.
	Found    bool `json:"found"`
	NotFound bool `json:"not_found,omitempty"`
	// ReadError is why the final read failed otherwise.
	ReadError string `json:"read_error,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
	// Suspension is the pending suspension of a waiting run.
	Suspension string `json:"suspension,omitempty"`
	// ToolResultsID is the handed-over calls' id of a run waiting for tool
	// results; Submissions are the results the soak submitted.
	ToolResultsID string             `json:"tool_results_id,omitempty"`
	Submissions   []SubmissionRecord `json:"submissions,omitempty"`
	// Events are read for runs the checks look at closely (NeedsEvents).
	Events []client.Event `json:"events,omitempty"`
}

// DecisionRecord is the decision the soak made on one suspension.
type DecisionRecord struct {
	Suspension string                     `json:"suspension"`
	Accepted   bool                       `json:"accepted"`
	Approved   map[string]json.RawMessage `json:"approved,omitempty"`
	Refused    string                     `json:"refused,omitempty"`
}

// SubmissionRecord is a submission of tool results by the soak.
type SubmissionRecord struct {
	ToolResultsID string `json:"tool_results_id"`
	// Accepted: answered 202; Refused: an unexpected refusal (not a 409).
	Accepted bool   `json:"accepted"`
	Refused  string `json:"refused,omitempty"`
}

// Observed is everything the soak saw: the input of Analyze.
type Observed struct {
	Runs []RunRecord
	// StartUnknown counts POST /runs that got no answer.
	StartUnknown int
	Executions   []Execution
	Kills        []Kill
	HTTP         HTTPSummary
	// Census lists every run in the store when it could be read directly
	// (nil: not read).
	Census []CensusRun
	// Document reads a document of the store (nil: documents are not checked).
	Document func(path string) (text string, ok bool)
}

// HTTPSummary counts the API's answers.
type HTTPSummary struct {
	Requests     int            `json:"requests"`
	Conn         int            `json:"connection_errors"`
	ByOutcome    map[string]int `json:"non_2xx,omitempty"`
	ServerErrors []string       `json:"server_errors,omitempty"`
}

// CensusRun is one run as the store holds it.
type CensusRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Indexed: the due index holds the run (every run with time-based
	// work left must be in it: the sweep finds runs only there).
	Indexed bool `json:"indexed"`
}

// Finding is one run (or write) that breaks, or needs, an explanation.
type Finding struct {
	RunID  string   `json:"run_id"`
	Mode   Mode     `json:"mode,omitempty"`
	Status string   `json:"status,omitempty"`
	Detail string   `json:"detail"`
	Events []string `json:"last_events,omitempty"`
}

// InterruptedSummary accounts for the runs that ended interrupted_write.
type InterruptedSummary struct {
	Total     int `json:"total"`
	Justified int `json:"justified"`
	// Classes count the justified ones by what the killed segment was doing
	// (see the Interrupted* constants).
	Classes map[string]int `json:"classes,omitempty"`
}

// What a killed segment of an interrupted_write run was doing: the first
// approved call of the resumed turn without a tool_executed event is the
// one in flight.
const (
	// InterruptedAppendRan: an append was in flight and the recorder had
	// executed it (the server could not know: a real unknown outcome).
	InterruptedAppendRan = "append_in_flight_executed"
	// InterruptedAppendNotSent: an append's fence was stamped but the call
	// never reached the recorder (nothing was written).
	InterruptedAppendNotSent = "append_in_flight_not_executed"
	// InterruptedDocument*: a write_document was in flight; for an edit-mode
	// run the store shows whether it was written, otherwise it cannot tell.
	InterruptedDocumentWritten    = "document_in_flight_written"
	InterruptedDocumentNotWritten = "document_in_flight_not_written"
	InterruptedDocumentUnknown    = "document_in_flight_unobservable"
	// InterruptedAfterWrites: every approved call of the turn had its result
	// recorded; the worker died later in the segment, after a write.
	InterruptedAfterWrites = "after_recorded_writes"
)

// Report is the soak's verdict.
type Report struct {
	Runs         int            `json:"runs"`
	StartUnknown int            `json:"start_unknown"`
	Kills        int            `json:"kills"`
	KillsByMode  map[string]int `json:"kills_by_mode"`
	Fallbacks    int            `json:"kill_trigger_timeouts"`
	// RestartMax is the longest time a restarted server took to answer.
	RestartMax time.Duration `json:"restart_max_ns"`
	// ByStatus counts final "STATUS/reason"; ByMode the same per mode.
	ByStatus map[string]int          `json:"by_status"`
	ByMode   map[Mode]map[string]int `json:"by_mode"`
	Waiting  int                     `json:"legitimately_waiting"`
	Undriven int                     `json:"waiting_undecided_by_soak"`
	Writes   WriteSummary            `json:"writes"`
	Interr   InterruptedSummary      `json:"interrupted_write"`
	Findings map[string][]Finding    `json:"findings,omitempty"`
	HTTP     HTTPSummary             `json:"http"`
	Census   *CensusSummary          `json:"census,omitempty"`
}

// WriteSummary counts the recorder's executions.
type WriteSummary struct {
	Executions int `json:"executions"`
	// Approved counts approved recorder calls of accepted decisions.
	Approved int `json:"approved"`
	// Documents counts edited document writes checked in the store.
	Documents int `json:"documents_checked"`
}

// CensusSummary is what the direct read of the store found.
type CensusSummary struct {
	Runs int `json:"runs"`
	// Orphans are runs the soak never got a 202 for (the answer died in a
	// kill), by status.
	Orphans map[string]int `json:"orphans_by_status"`
}

// The kinds of finding; each one is a failed invariant except "waiting".
const (
	FindStuck       = "stuck"
	FindLost        = "lost"
	FindDouble      = "double_write"
	FindUnapproved  = "unapproved_execution"
	FindEditIgnored = "approved_input_not_executed_as_approved"
	FindLostWrite   = "approved_write_missing"
	FindUnjustified = "unjustified_interrupted_write"
	FindUnexpected  = "unexpected_outcome"
	FindServerError = "server_error"
	FindRefused     = "decision_or_results_refused"
	FindUnread      = "unreadable"
	FindUnaudited   = "executed_write_missing_from_audit"
)

// Failed lists the invariants the report breaks (empty: the soak passed).
func (r *Report) Failed() []string {
	var out []string
	for k, v := range r.Findings {
		if len(v) > 0 {
			out = append(out, fmt.Sprintf("%s: %d", k, len(v)))
		}
	}
	sort.Strings(out)
	return out
}

func (r *Report) add(kind string, f Finding) {
	if r.Findings == nil {
		r.Findings = map[string][]Finding{}
	}
	r.Findings[kind] = append(r.Findings[kind], f)
}

// NeedsEvents reports whether the checks look at a run's events: it is not
// terminal, it did not end as its mode says, it ended interrupted_write,
// or it was cancelled (was a write in flight?).
func NeedsEvents(rec RunRecord) bool {
	return !client.Status(rec.Status).Terminal() || !expected(rec) || rec.Reason == "interrupted_write" || rec.Status == string(client.StatusCancelled)
}

// claimEvents start a worker's segment.
var claimEvents = map[string]bool{"claimed": true, "resumed": true, "reclaimed": true, "continued": true}

// segmentAfter are events after which the next segment begins: its job is
// dispatched once they are written. A segment whose worker died after its
// fence and before its next write has no claim event on record (the fence
// writes the row alone; the settled event names the worker, lease_owner),
// so the last of these bounds its start.
var segmentAfter = map[string]bool{"decision": true, "tool_results": true, "checkpointed": true}

// Analyze checks the invariants over what the soak observed.
func Analyze(o Observed) Report {
	r := Report{
		Runs: len(o.Runs), StartUnknown: o.StartUnknown, Kills: len(o.Kills), KillsByMode: map[string]int{},
		ByStatus: map[string]int{}, ByMode: map[Mode]map[string]int{}, HTTP: o.HTTP,
	}
	for _, k := range o.Kills {
		r.KillsByMode[string(k.Mode)]++
		if k.Fallback {
			r.Fallbacks++
		}
		r.RestartMax = max(r.RestartMax, k.Restart)
	}
	byID := map[string]*RunRecord{}
	for i := range o.Runs {
		byID[o.Runs[i].ID] = &o.Runs[i]
	}
	execs := map[string][]Execution{} // by run/call
	for _, e := range o.Executions {
		k := e.RunID() + "/" + e.CallID()
		execs[k] = append(execs[k], e)
	}
	r.Writes.Executions = len(o.Executions)

	for i := range o.Runs {
		rec := &o.Runs[i]
		key := rec.Status
		if rec.Reason != "" {
			key += "/" + rec.Reason
		}
		switch {
		case rec.NotFound:
			key = "NOT_FOUND"
			r.add(FindLost, Finding{RunID: rec.ID, Mode: rec.Mode, Detail: "POST /runs answered 202, GET /runs/{id} answers 404"})
		case !rec.Found:
			key = "UNREAD"
			r.add(FindUnread, Finding{RunID: rec.ID, Mode: rec.Mode, Detail: rec.ReadError})
		}
		r.ByStatus[key]++
		if r.ByMode[rec.Mode] == nil {
			r.ByMode[rec.Mode] = map[string]int{}
		}
		r.ByMode[rec.Mode][key]++
		if !rec.Found {
			continue
		}
		for _, d := range rec.Decisions {
			if d.Refused != "" {
				r.add(FindRefused, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: "suspension " + d.Suspension + ": " + d.Refused})
			}
		}
		for _, sub := range rec.Submissions {
			if sub.Refused != "" {
				r.add(FindRefused, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: "tool results " + sub.ToolResultsID + ": " + sub.Refused})
			}
		}
		checkLiveness(&r, rec)
		checkApprovedWrites(&r, rec, execs, o.Document)
		if rec.Reason == "interrupted_write" {
			checkInterrupted(&r, rec, o.Kills, o.Executions, o.Document)
		} else if rec.Status != "" && client.Status(rec.Status).Terminal() && !expected(*rec) {
			r.add(FindUnexpected, Finding{RunID: rec.ID, Mode: rec.Mode, Status: key, Detail: "the mode does not explain this outcome", Events: lastEvents(rec.Events, 8)})
		}
	}

	// Every execution: once per call, approved, with the approved input.
	for k, es := range execs {
		first := es[0]
		rec := byID[first.RunID()]
		if len(es) > 1 {
			var at []string
			for _, e := range es {
				at = append(at, fmt.Sprintf("#%d %s key %s", e.Seq, e.At.Format("15:04:05.000"), e.Key))
			}
			f := Finding{RunID: first.RunID(), Detail: fmt.Sprintf("call %s executed %d times: %s", first.CallID(), len(es), strings.Join(at, "; "))}
			if rec != nil {
				f.Mode, f.Status, f.Events = rec.Mode, rec.Status, lastEvents(rec.Events, 12)
			}
			r.add(FindDouble, f)
		}
		if rec == nil {
			r.add(FindUnapproved, Finding{RunID: first.RunID(), Detail: fmt.Sprintf("call %s of a run the soak never got a 202 for (never decided) executed", k)})
			continue
		}
		if !audited(rec, first.CallID()) {
			r.add(FindUnaudited, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status + "/" + rec.Reason,
				Detail: fmt.Sprintf("call %s executed (recorder #%d at %s), but no event of the run records it or says a write was in flight", first.CallID(), first.Seq, first.At.Format("15:04:05.000")),
				Events: lastEvents(rec.Events, 8)})
		}
		for _, e := range es {
			in, ok := approvedInput(rec, e.SuspensionID(), e.CallID())
			if !ok {
				r.add(FindUnapproved, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: fmt.Sprintf("call %s of suspension %s executed without an approval of the soak", e.CallID(), e.SuspensionID())})
				continue
			}
			if !sameJSON(in, e.Args) {
				r.add(FindEditIgnored, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: fmt.Sprintf("call %s executed with %s, approved %s", e.CallID(), e.Args, in)})
			}
		}
	}

	if o.Census != nil {
		c := &CensusSummary{Runs: len(o.Census), Orphans: map[string]int{}}
		for _, cr := range o.Census {
			if !cr.Indexed && !client.Status(cr.Status).Terminal() {
				r.add(FindStuck, Finding{RunID: cr.ID, Status: cr.Status, Detail: "non-terminal, and not in the due index: no sweep will ever look at it"})
			}
			if byID[cr.ID] != nil {
				continue
			}
			c.Orphans[cr.Status]++
			switch client.Status(cr.Status) {
			case client.StatusQueued, client.StatusRunning, client.StatusResuming:
				r.add(FindStuck, Finding{RunID: cr.ID, Status: cr.Status, Detail: "a run the soak never got a 202 for (found in the store) is left " + cr.Status})
			}
		}
		r.Census = c
	}
	if len(o.HTTP.ServerErrors) > 0 {
		for _, s := range o.HTTP.ServerErrors {
			r.add(FindServerError, Finding{Detail: s})
		}
	}
	return r
}

// checkLiveness flags runs left non-terminal that are not waiting for a
// human who has not decided yet.
func checkLiveness(r *Report, rec *RunRecord) {
	st := client.Status(rec.Status)
	switch {
	case st.Terminal():
	case st == client.StatusWaitingForToolResults:
		for _, sub := range rec.Submissions {
			if sub.ToolResultsID == rec.ToolResultsID && sub.Accepted {
				r.add(FindStuck, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status,
					Detail: "tool results " + sub.ToolResultsID + " were accepted (202), yet the run still waits for them", Events: lastEvents(rec.Events, 8)})
				return
			}
		}
		r.Waiting++
		if rec.Mode == ModeClient {
			r.Undriven++
		}
	case st == client.StatusWaiting:
		for _, d := range rec.Decisions {
			if d.Suspension == rec.Suspension && d.Accepted {
				r.add(FindStuck, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status,
					Detail: "a decision on suspension " + d.Suspension + " was accepted (202), yet the run still waits on it", Events: lastEvents(rec.Events, 8)})
				return
			}
		}
		r.Waiting++
		if rec.Mode != ModeAbandon && !(rec.Mode == ModeCancel && rec.Cancel == cancelWaiting) {
			r.Undriven++
		}
	default:
		r.add(FindStuck, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: "left " + rec.Status, Events: lastEvents(rec.Events, 8)})
	}
}

// checkApprovedWrites flags an approved write of a completed run that did
// not happen: a recorder call with no execution, an edited document not in
// the store.
func checkApprovedWrites(r *Report, rec *RunRecord, execs map[string][]Execution, doc func(string) (string, bool)) {
	for _, d := range rec.Decisions {
		if !d.Accepted {
			continue
		}
		for call, in := range d.Approved {
			if call == CallAppend1 || call == CallAppend2 {
				r.Writes.Approved++
				if rec.Status == string(client.StatusCompleted) && len(execs[rec.ID+"/"+call]) == 0 {
					r.add(FindLostWrite, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: fmt.Sprintf("approved call %s of suspension %s never reached the recorder, yet the run completed", call, d.Suspension)})
				}
				continue
			}
			if call != CallWrite2 || doc == nil || rec.Mode != ModeEdit || rec.Status != string(client.StatusCompleted) {
				continue
			}
			var w struct{ Path, Text string }
			if json.Unmarshal(in, &w) != nil {
				continue
			}
			r.Writes.Documents++
			if got, ok := doc(w.Path); !ok || got != w.Text {
				r.add(FindLostWrite, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status, Detail: fmt.Sprintf("edited write of %s approved and the run completed, but the document is %q (present %t)", w.Path, got, ok)})
			}
		}
	}
}

// checkInterrupted justifies an interrupted_write by a kill that landed in
// the run's last segment: after its last claim (or, when its claim event
// was lost with the segment, after the decision, tool results or
// checkpoint it went on from), before it was settled.
func checkInterrupted(r *Report, rec *RunRecord, kills []Kill, execs []Execution, doc func(string) (string, bool)) {
	r.Interr.Total++
	from, to := rec.Started, time.Time{}
	for _, ev := range rec.Events {
		if claimEvents[ev.Type] || segmentAfter[ev.Type] {
			from = ev.At
		}
		if ev.Type == "settled" {
			to = ev.At
		}
	}
	if to.IsZero() && len(rec.Events) > 0 {
		to = rec.Events[len(rec.Events)-1].At
	}
	var killed *Kill
	for i := range kills {
		k := &kills[i]
		if !k.At.Before(from) && (to.IsZero() || !k.At.After(to)) {
			killed = k
			break
		}
	}
	if killed == nil {
		r.add(FindUnjustified, Finding{RunID: rec.ID, Mode: rec.Mode, Status: rec.Status,
			Detail: fmt.Sprintf("no kill between its last claim (%s) and its end (%s)", from.Format("15:04:05.000"), to.Format("15:04:05.000")), Events: lastEvents(rec.Events, 12)})
		return
	}
	r.Interr.Justified++
	if r.Interr.Classes == nil {
		r.Interr.Classes = map[string]int{}
	}
	r.Interr.Classes[interruptedClass(rec, from, killed.At, execs, doc)]++
}

// scriptOrder is the order in which the script's writes execute.
var scriptOrder = []string{CallAppend1, CallWrite2, CallAppend2}

// interruptedClass says what the segment of rec that began at from was
// doing when the kill at killedAt ended it.
func interruptedClass(rec *RunRecord, from, killedAt time.Time, execs []Execution, doc func(string) (string, bool)) string {
	suspension := ""
	executed := map[string]bool{}
	for _, ev := range rec.Events {
		switch ev.Type {
		case "resumed", "decision": // the decision's, when the resumed event was lost with its segment
			var d struct {
				SuspensionID string `json:"suspension_id"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			suspension = d.SuspensionID
		case "tool_executed":
			var d struct {
				CallID string `json:"call_id"`
			}
			if !ev.At.Before(from) && json.Unmarshal(ev.Data, &d) == nil {
				executed[d.CallID] = true
			}
		}
	}
	approved, _ := decisionOn(rec, suspension)
	for _, call := range scriptOrder {
		in, ok := approved[call]
		if !ok || executed[call] {
			continue
		}
		if call == CallWrite2 {
			var w struct{ Path, Text string }
			if rec.Mode != ModeEdit || doc == nil || json.Unmarshal(in, &w) != nil {
				return InterruptedDocumentUnknown
			}
			if got, ok := doc(w.Path); ok && got == w.Text {
				return InterruptedDocumentWritten
			}
			return InterruptedDocumentNotWritten
		}
		for _, e := range execs {
			if e.RunID() == rec.ID && e.CallID() == call && !e.At.Before(from) && !e.At.After(killedAt) {
				return InterruptedAppendRan
			}
		}
		return InterruptedAppendNotSent
	}
	return InterruptedAfterWrites
}

// decisionOn returns what the soak approved on a suspension (the last
// accepted decision when suspension is empty).
func decisionOn(rec *RunRecord, suspension string) (map[string]json.RawMessage, bool) {
	for i := len(rec.Decisions) - 1; i >= 0; i-- {
		d := rec.Decisions[i]
		if d.Suspension == suspension || (suspension == "" && d.Accepted) {
			return d.Approved, true
		}
	}
	return nil, false
}

// expected reports whether a run's final status is what its mode leads to
// (interrupted_write is judged apart).
func expected(rec RunRecord) bool {
	st := client.Status(rec.Status)
	out := rec.Status + "/" + rec.Reason
	if !st.Terminal() {
		return true // judged by checkLiveness
	}
	switch rec.Mode {
	case ModeApprove, ModeEdit, ModeDeny, ModeMixed, ModeAuto, ModeClient:
		return out == "COMPLETED/completed"
	case ModeClientAbandon:
		return out == "EXPIRED/tool_results_expired"
	case ModeDenyEnds:
		return out == "FAILED/approval_denied"
	case ModeCancel:
		if rec.CancelOK {
			return out == "CANCELLED/cancelled"
		}
		return out == "CANCELLED/cancelled" || out == "COMPLETED/completed"
	case ModeAbandon:
		return out == "EXPIRED/approval_expired"
	}
	return false
}

// audited reports whether a run's events account for an executed call: a
// tool_executed step of it, an event naming it as the write in flight
// (pending_effect), or an end as interrupted_write (which says a write may
// have happened). Runs whose events were not read count as audited.
func audited(rec *RunRecord, call string) bool {
	if len(rec.Events) == 0 || rec.Reason == "interrupted_write" {
		return true
	}
	for _, ev := range rec.Events {
		var d struct {
			CallID        string `json:"call_id"`
			PendingEffect string `json:"pending_effect"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		if (ev.Type == "tool_executed" && d.CallID == call) || d.PendingEffect == call {
			return true
		}
	}
	return false
}

// approvedInput is the input the soak approved for a call of a suspension.
func approvedInput(rec *RunRecord, suspension, call string) (json.RawMessage, bool) {
	for _, d := range rec.Decisions {
		if d.Suspension == suspension {
			in, ok := d.Approved[call]
			return in, ok
		}
	}
	return nil, false
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}

// lastEvents renders a run's last n events.
func lastEvents(evs []client.Event, n int) []string {
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		s := fmt.Sprintf("#%d %s %s", ev.Seq, ev.At.Format("15:04:05.000"), ev.Type)
		if ev.Actor != "" {
			s += " by " + ev.Actor
		}
		if len(ev.Data) > 0 && len(ev.Data) <= 200 {
			s += " " + string(ev.Data)
		}
		out = append(out, s)
	}
	return out
}

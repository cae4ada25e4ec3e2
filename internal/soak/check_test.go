package soak

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/client"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ev(seq int64, typ string, s float64) client.Event {
	return client.Event{Seq: seq, Type: typ, At: at(s)}
}

// completedRun is an approve-mode run whose two appends were approved and
// executed once each.
func completedRun(id string) (RunRecord, []Execution) {
	rec := RunRecord{ID: id, Mode: ModeApprove, Started: at(0), Found: true, Status: "COMPLETED", Reason: "completed",
		Decisions: []DecisionRecord{
			{Suspension: "s1", Accepted: true, Approved: map[string]json.RawMessage{CallAppend1: json.RawMessage(`{"line":"first"}`)}},
			{Suspension: "s2", Accepted: true, Approved: map[string]json.RawMessage{CallAppend2: json.RawMessage(`{"line": "second"}`), CallWrite2: json.RawMessage(`{"path":"soak/page.md","text":"x"}`)}},
		}}
	execs := []Execution{
		{Seq: 1, At: at(1), Tool: AppendTool, Key: id + "/s1/" + CallAppend1, Args: json.RawMessage(`{"line":"first"}`)},
		{Seq: 2, At: at(2), Tool: AppendTool, Key: id + "/s2/" + CallAppend2, Args: json.RawMessage(`{"line":"second"}`)},
	}
	return rec, execs
}

func findings(r Report, kind string) int { return len(r.Findings[kind]) }

func TestAnalyzeCleanSoakPasses(t *testing.T) {
	a, ea := completedRun("run-a")
	b, eb := completedRun("run-b")
	abandoned := RunRecord{ID: "run-c", Mode: ModeAbandon, Found: true, Status: "WAITING_FOR_APPROVAL", Suspension: "s1"}
	// A client run waiting for results it was not given yet (tr2), after
	// its first were accepted (tr1); a client run that expired unanswered.
	handedOver := RunRecord{ID: "run-d", Mode: ModeClient, Found: true, Status: "WAITING_FOR_TOOL_RESULTS", ToolResultsID: "tr2",
		Submissions: []SubmissionRecord{{ToolResultsID: "tr1", Accepted: true}}}
	expired := RunRecord{ID: "run-e", Mode: ModeClientAbandon, Found: true, Status: "EXPIRED", Reason: "tool_results_expired"}
	r := Analyze(Observed{Runs: []RunRecord{a, b, abandoned, handedOver, expired}, Executions: append(ea, eb...),
		Census: []CensusRun{{ID: "run-a", Status: "COMPLETED", Indexed: true}, {ID: "run-b", Status: "COMPLETED", Indexed: true},
			{ID: "run-c", Status: "WAITING_FOR_APPROVAL", Indexed: true}, {ID: "orphan", Status: "WAITING_FOR_APPROVAL", Indexed: true}}})
	if got := r.Failed(); len(got) != 0 {
		t.Fatalf("Failed() = %v, want none; findings %+v", got, r.Findings)
	}
	if r.Waiting != 2 || r.Writes.Approved != 4 || r.Writes.Executions != 4 || r.Census.Orphans["WAITING_FOR_APPROVAL"] != 1 {
		t.Errorf("waiting %d approved %d executions %d orphans %v; want 2, 4, 4, one waiting", r.Waiting, r.Writes.Approved, r.Writes.Executions, r.Census.Orphans)
	}
}

func TestAnalyzeFindsEachBrokenInvariant(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *Observed)
		kind   string
	}{
		{"a call executed twice", func(o *Observed) {
			e := o.Executions[0]
			e.Seq, e.At = 9, at(5)
			o.Executions = append(o.Executions, e)
		}, FindDouble},
		{"a call executed twice under two suspension ids", func(o *Observed) {
			e := o.Executions[0]
			e.Key = "run-a/s9/" + CallAppend1
			o.Executions = append(o.Executions, e)
		}, FindDouble},
		{"a denied call executed", func(o *Observed) {
			delete(o.Runs[0].Decisions[1].Approved, CallAppend2)
		}, FindUnapproved},
		{"a call of a run never decided executed", func(o *Observed) {
			o.Executions = append(o.Executions, Execution{Key: "stranger/s1/" + CallAppend1, Args: json.RawMessage(`{}`)})
		}, FindUnapproved},
		{"an edit executed as the original", func(o *Observed) {
			o.Runs[0].Decisions[0].Approved[CallAppend1] = json.RawMessage(`{"line":"edited"}`)
		}, FindEditIgnored},
		{"an approved write of a completed run never executed", func(o *Observed) {
			o.Executions = o.Executions[1:]
		}, FindLostWrite},
		{"an edited document missing", func(o *Observed) {
			o.Runs[0].Mode = ModeEdit
			o.Runs[0].Decisions[1].Approved[CallWrite2] = json.RawMessage(`{"path":"soak/runs/run-a.md","text":"edited"}`)
			o.Document = func(string) (string, bool) { return "", false }
		}, FindLostWrite},
		{"a run left RESUMING", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason = "RESUMING", ""
		}, FindStuck},
		{"a run left QUEUED", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason = "QUEUED", ""
			o.Executions = nil
		}, FindStuck},
		{"a run waiting on a suspension whose decision was accepted", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason, o.Runs[0].Suspension = "WAITING_FOR_APPROVAL", "", "s2"
		}, FindStuck},
		{"a run the API accepted is gone", func(o *Observed) {
			o.Runs[0].Found, o.Runs[0].NotFound = false, true
		}, FindLost},
		{"a 5xx answer", func(o *Observed) {
			o.HTTP.ServerErrors = []string{"GET /runs/{id} 500 internal: internal error"}
		}, FindServerError},
		{"an orphan run left RUNNING", func(o *Observed) {
			o.Census = []CensusRun{{ID: "orphan", Status: "RUNNING", Indexed: true}}
		}, FindStuck},
		{"a non-terminal run missing from the due index", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason = "WAITING_FOR_APPROVAL", ""
			o.Runs[0].Suspension = "s3"
			o.Census = []CensusRun{{ID: "run-a", Status: "WAITING_FOR_APPROVAL"}}
		}, FindStuck},
		{"an approve-mode run failed for another reason", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason = "FAILED", "internal_error"
		}, FindUnexpected},
		{"a cancel answered 200 but the run completed", func(o *Observed) {
			o.Runs[0].Mode, o.Runs[0].CancelOK = ModeCancel, true
		}, FindUnexpected},
		{"an interrupted write with no kill in its last segment", func(o *Observed) {
			o.Runs[0].Status, o.Runs[0].Reason = "FAILED", "interrupted_write"
			o.Runs[0].Events = []client.Event{ev(1, "claimed", 0.5), ev(2, "resumed", 1.5), ev(3, "settled", 200)}
			o.Kills = []Kill{{N: 1, At: at(1)}} // before the last claim
		}, FindUnjustified},
		{"a run waiting for tool results that were accepted", func(o *Observed) {
			o.Runs[0].Mode, o.Runs[0].Status, o.Runs[0].Reason = ModeClient, "WAITING_FOR_TOOL_RESULTS", ""
			o.Runs[0].ToolResultsID = "tr1"
			o.Runs[0].Submissions = []SubmissionRecord{{ToolResultsID: "tr1", Accepted: true}}
		}, FindStuck},
		{"a client run that expired", func(o *Observed) {
			o.Runs[0].Mode, o.Runs[0].Status, o.Runs[0].Reason = ModeClient, "EXPIRED", "tool_results_expired"
		}, FindUnexpected},
		{"tool results refused", func(o *Observed) {
			o.Runs[0].Submissions = []SubmissionRecord{{ToolResultsID: "tr1", Refused: "422 unprocessable: bad"}}
		}, FindRefused},
		{"a cancelled run whose executed write no event records", func(o *Observed) {
			o.Runs[0].Mode, o.Runs[0].Status, o.Runs[0].Reason, o.Runs[0].CancelOK = ModeCancel, "CANCELLED", "cancelled", true
			o.Runs[0].Events = []client.Event{ev(1, "claimed", 0.5), ev(2, "resumed", 0.9),
				{Seq: 3, Type: "tool_executed", At: at(1.1), Data: json.RawMessage(`{"call_id":"` + CallAppend1 + `"}`)},
				ev(4, "cancelled", 2.5)}
		}, FindUnaudited},
		{"a decision refused", func(o *Observed) {
			o.Runs[0].Decisions[0].Refused = "422 unprocessable: bad"
		}, FindRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, execs := completedRun("run-a")
			o := Observed{Runs: []RunRecord{rec}, Executions: execs}
			tt.mutate(&o)
			r := Analyze(o)
			if findings(r, tt.kind) == 0 {
				t.Fatalf("no %s finding; findings %+v", tt.kind, r.Findings)
			}
			if len(r.Failed()) == 0 {
				t.Fatalf("Failed() is empty with a %s finding", tt.kind)
			}
		})
	}
}

func TestAnalyzeAcceptsAWriteInFlightNamedByTheCancel(t *testing.T) {
	rec, execs := completedRun("run-a")
	rec.Mode, rec.Status, rec.Reason, rec.CancelOK = ModeCancel, "CANCELLED", "cancelled", true
	rec.Events = []client.Event{ev(1, "claimed", 0.5), ev(2, "resumed", 0.9),
		{Seq: 3, Type: "tool_executed", At: at(1.1), Data: json.RawMessage(`{"call_id":"` + CallAppend1 + `"}`)},
		{Seq: 4, Type: "cancelled", At: at(2.5), Data: json.RawMessage(`{"pending_effect":"` + CallAppend2 + `"}`)}}
	if r := Analyze(Observed{Runs: []RunRecord{rec}, Executions: execs}); len(r.Failed()) != 0 {
		t.Fatalf("Failed() = %v, want none: %+v", r.Failed(), r.Findings)
	}
}

func TestAnalyzeJustifiesAndClassifiesInterruptedWrites(t *testing.T) {
	resumed := client.Event{Seq: 2, Type: "resumed", At: at(1.5), Data: json.RawMessage(`{"suspension_id":"s2"}`)}
	executed := func(call string, s float64) client.Event {
		return client.Event{Type: "tool_executed", At: at(s), Data: json.RawMessage(`{"call_id":"` + call + `"}`)}
	}
	tests := []struct {
		name   string
		mode   Mode
		events []client.Event
		execs  func(all []Execution) []Execution
		doc    func(string) (string, bool)
		want   string
	}{
		{"the append in flight had reached the recorder", ModeApprove, []client.Event{executed(CallWrite2, 1.6)},
			func(all []Execution) []Execution { return all }, nil, InterruptedAppendRan},
		{"the append's fence was stamped, the call never sent", ModeApprove, []client.Event{executed(CallWrite2, 1.6)},
			func(all []Execution) []Execution { return all[:1] }, nil, InterruptedAppendNotSent},
		{"every approved call recorded", ModeApprove, []client.Event{executed(CallWrite2, 1.6), executed(CallAppend2, 2.1)},
			func(all []Execution) []Execution { return all }, nil, InterruptedAfterWrites},
		{"a document write in flight, not observable", ModeApprove, nil,
			func(all []Execution) []Execution { return all[:1] }, nil, InterruptedDocumentUnknown},
		{"an edited document write in flight, written", ModeEdit, nil,
			func(all []Execution) []Execution { return all[:1] }, func(string) (string, bool) { return "x", true }, InterruptedDocumentWritten},
		{"an edited document write in flight, not written", ModeEdit, nil,
			func(all []Execution) []Execution { return all[:1] }, func(string) (string, bool) { return "", false }, InterruptedDocumentNotWritten},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, execs := completedRun("run-a")
			rec.Mode, rec.Status, rec.Reason = tt.mode, "FAILED", "interrupted_write"
			rec.Events = append([]client.Event{ev(1, "claimed", 0.5), resumed}, tt.events...)
			rec.Events = append(rec.Events, ev(9, "settled", 200))
			r := Analyze(Observed{Runs: []RunRecord{rec}, Executions: tt.execs(execs), Kills: []Kill{{N: 1, At: at(2.5)}}, Document: tt.doc})
			if got := r.Failed(); len(got) != 0 {
				t.Fatalf("Failed() = %v, want none: %+v", got, r.Findings)
			}
			if r.Interr.Total != 1 || r.Interr.Justified != 1 || r.Interr.Classes[tt.want] != 1 {
				t.Fatalf("interrupted %+v, want one justified %s", r.Interr, tt.want)
			}
		})
	}
}

// TestAnalyzeBoundsASegmentWithoutItsClaimEvent: a resume worker that died
// after its fence and before its next write left no resumed event (the
// fence writes the row alone); the segment it ran began after the
// decision, so only a kill after the decision justifies the
// interrupted_write.
func TestAnalyzeBoundsASegmentWithoutItsClaimEvent(t *testing.T) {
	for _, tt := range []struct {
		name      string
		kill      float64
		justified bool
	}{
		{"a kill after the decision", 2.5, true},
		{"a kill before the decision, in the first segment", 0.9, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, execs := completedRun("run-a")
			rec.Status, rec.Reason = "FAILED", "interrupted_write"
			rec.Decisions = rec.Decisions[:1]
			rec.Events = []client.Event{ev(1, "claimed", 0.5), ev(2, "suspended", 0.8),
				{Seq: 3, Type: "decision", At: at(1.2), Data: json.RawMessage(`{"suspension_id":"s1"}`)},
				{Seq: 4, Type: "settled", At: at(200), Data: json.RawMessage(`{"status":"FAILED","reason":"interrupted_write","lease_owner":"w/2","pending_effect":"` + CallAppend1 + `"}`)}}
			execs[0].At = at(2) // the append in flight reached the recorder
			r := Analyze(Observed{Runs: []RunRecord{rec}, Executions: execs[:1], Kills: []Kill{{N: 1, At: at(tt.kill)}}})
			if got := r.Interr.Justified == 1; got != tt.justified {
				t.Fatalf("justified %t, want %t: %+v %+v", got, tt.justified, r.Interr, r.Findings)
			}
			if tt.justified && r.Interr.Classes[InterruptedAppendRan] != 1 {
				t.Fatalf("classes %v, want %s", r.Interr.Classes, InterruptedAppendRan)
			}
		})
	}
}

func TestPlanKills(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 6, 7, 8, 24} {
		rng := rand.New(rand.NewPCG(uint64(n), 1)) //nolint:gosec // test
		at, modes := planKills(rng, time.Minute, n)
		if len(at) != n || len(modes) != n {
			t.Fatalf("n=%d: %d times, %d modes", n, len(at), len(modes))
		}
		if !slices.IsSorted(at) {
			t.Errorf("n=%d: times not in order: %v", n, at)
		}
		for i, m := range modes {
			if at[i] <= 0 || at[i] >= time.Minute {
				t.Errorf("n=%d: kill %d at %s, outside the duration", n, i, at[i])
			}
			if m == KillStartup && (i == 0 || modes[i-1] != KillTimer) {
				t.Errorf("n=%d: startup kill %d does not follow a timer kill: %v", n, i, modes)
			}
		}
		if n >= len(killModes)+1 {
			for _, m := range killModes {
				if !slices.Contains(modes, m) {
					t.Errorf("n=%d: no %s kill in %v", n, m, modes)
				}
			}
		}
	}
}

func TestDecisionForModes(t *testing.T) {
	turn2 := &client.Pending{SuspensionID: "s2", TurnDigest: "d", Calls: []client.PendingCall{
		{ID: CallWrite2, Tool: "write_document", NeedsApproval: true, Input: json.RawMessage(`{"path":"soak/page.md","text":"soak page\n"}`)},
		{ID: CallAppend2, Tool: AppendName, NeedsApproval: true, Input: json.RawMessage(`{"line":"second"}`)},
	}}
	d, approved := decisionFor(ModeEdit, "run-1", turn2)
	if d == nil || len(d.Calls) != 2 || d.Calls[0].Action != client.Edit || d.Calls[1].Action != client.Edit {
		t.Fatalf("edit decision %+v", d)
	}
	if !sameJSON(approved[CallWrite2], json.RawMessage(`{"path":"soak/runs/run-1.md","text":"edited by the soak for run-1\n"}`)) {
		t.Errorf("edited write %s", approved[CallWrite2])
	}
	d, approved = decisionFor(ModeMixed, "run-1", turn2)
	if d == nil || len(approved) != 1 || approved[CallWrite2] == nil {
		t.Fatalf("mixed decision %+v approves %v, want the write only", d, approved)
	}
	d, approved = decisionFor(ModeDeny, "run-1", turn2)
	if d == nil || d.Action != client.Deny || len(approved) != 0 {
		t.Fatalf("deny decision %+v approves %v", d, approved)
	}
	if d, _ := decisionFor(ModeAbandon, "run-1", turn2); d != nil {
		t.Fatalf("abandon decides: %+v", d)
	}
}

package webhook_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

var update = flag.Bool("update", false, "rewrite the golden payloads in testdata")

// sampleEvents has one event of every type, as the service will build them.
func sampleEvents() []webhook.Event {
	links := func(id string) map[string]string {
		return map[string]string{"self": "/runs/" + id, "events": "/runs/" + id + "/events"}
	}
	deadline := eventTime.Add(24 * time.Hour)
	return []webhook.Event{
		{Type: webhook.EventWaitingForApproval, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: runs.StatusWaiting, SuspensionID: "sus_1", Deadline: deadline, Links: links("run_1")}},
		{Type: webhook.EventWaitingForToolResults, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: "WAITING_FOR_TOOL_RESULTS", ToolResultsID: "tr_1", Deadline: deadline, Links: links("run_1")}},
		{Type: webhook.EventCompleted, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: runs.StatusCompleted, Reason: loop.ReasonCompleted, Links: links("run_1")}},
		{Type: webhook.EventFailed, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: runs.StatusFailed, Reason: "provider_failed", Links: links("run_1")}},
		{Type: webhook.EventCancelled, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: runs.StatusCancelled, Reason: loop.ReasonCancelled, Links: links("run_1")}},
		{Type: webhook.EventExpired, At: eventTime, Run: webhook.RunData{
			RunID: "run_1", Status: runs.StatusExpired, Reason: loop.ReasonApprovalExpired, Links: links("run_1")}},
	}
}

func TestRenderGolden(t *testing.T) {
	for _, e := range sampleEvents() {
		t.Run(string(e.Type), func(t *testing.T) {
			_, body, err := e.Render()
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", string(e.Type)+".json")
			if *update {
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update once)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("payload of %s:\n got %s\nwant %s", e.Type, pretty.Bytes(), want)
			}
		})
	}
}

// TestPayloadCarriesOnlyRunFacts pins the keys a payload may have: a new
// field has to be added here on purpose, which is the moment to ask whether
// it could carry a prompt, an argument or a token.
func TestPayloadCarriesOnlyRunFacts(t *testing.T) {
	allowedTop := []string{"data", "timestamp", "type"}
	allowedData := []string{"deadline", "links", "reason", "run_id", "status", "suspension_id", "tool_results_id"}
	for _, e := range sampleEvents() {
		_, body, err := e.Render()
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		for k := range top {
			if !slices.Contains(allowedTop, k) {
				t.Errorf("%s: unexpected top-level key %q", e.Type, k)
			}
		}
		var data map[string]json.RawMessage
		if err := json.Unmarshal(top["data"], &data); err != nil {
			t.Fatal(err)
		}
		for k := range data {
			if !slices.Contains(allowedData, k) {
				t.Errorf("%s: unexpected data key %q", e.Type, k)
			}
		}
	}
}

func TestRenderRefusesInconsistentEvents(t *testing.T) {
	ok := completedEvent("run_1")
	tests := []struct {
		name   string
		change func(*webhook.Event)
		want   string
	}{
		{"unknown type", func(e *webhook.Event) { e.Type = "run.started" }, "unknown"},
		{"no run id", func(e *webhook.Event) { e.Run.RunID = "" }, "no run id"},
		{"status does not match type", func(e *webhook.Event) { e.Run.Status = runs.StatusFailed }, "want COMPLETED"},
		{"no time", func(e *webhook.Event) { e.At = time.Time{} }, "no time"},
		{"waiting without suspension", func(e *webhook.Event) {
			e.Type, e.Run.Status = webhook.EventWaitingForApproval, runs.StatusWaiting
		}, "no suspension id"},
		{"tool results without id", func(e *webhook.Event) {
			e.Type, e.Run.Status = webhook.EventWaitingForToolResults, "WAITING_FOR_TOOL_RESULTS"
		}, "no tool-results id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok
			tt.change(&e)
			_, _, err := e.Render()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Render error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMessageIDIsStablePerOccurrence(t *testing.T) {
	a := webhook.MessageID("run_1", webhook.EventWaitingForApproval, "sus_1")
	if b := webhook.MessageID("run_1", webhook.EventWaitingForApproval, "sus_1"); a != b {
		t.Errorf("same occurrence: ids %q and %q differ", a, b)
	}
	others := []string{
		webhook.MessageID("run_1", webhook.EventWaitingForApproval, "sus_2"),
		webhook.MessageID("run_2", webhook.EventWaitingForApproval, "sus_1"),
		webhook.MessageID("run_1", webhook.EventWaitingForToolResults, "sus_1"),
		webhook.MessageID("run_1", webhook.EventCompleted, ""),
	}
	for _, o := range others {
		if o == a {
			t.Errorf("different occurrences share id %q", a)
		}
	}
	if !strings.HasPrefix(a, "msg_") || len(a) != 4+26 {
		t.Errorf("id %q: want msg_ and 26 characters", a)
	}
	id, _, err := sampleEvents()[0].Render()
	if err != nil {
		t.Fatal(err)
	}
	if want := webhook.MessageID("run_1", webhook.EventWaitingForApproval, "sus_1"); id != want {
		t.Errorf("Render id = %q, want MessageID %q", id, want)
	}
}

func TestParseEventTypes(t *testing.T) {
	got, err := webhook.ParseEventTypes([]string{"run.failed", "run.completed", "run.failed"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []webhook.EventType{webhook.EventCompleted, webhook.EventFailed}; !slices.Equal(got, want) {
		t.Errorf("ParseEventTypes = %v, want %v", got, want)
	}
	if got, err := webhook.ParseEventTypes(nil); err != nil || got != nil {
		t.Errorf("ParseEventTypes(nil) = %v, %v; want nil, nil (all)", got, err)
	}
	if _, err := webhook.ParseEventTypes([]string{"run.started"}); err == nil {
		t.Error("ParseEventTypes accepted run.started")
	}
	if !webhook.Subscribed(nil, webhook.EventExpired) || webhook.Subscribed(got, webhook.EventExpired) {
		t.Error("Subscribed: nil must mean all, an explicit list only its types")
	}
}

func TestEventTypeFor(t *testing.T) {
	for _, e := range sampleEvents() {
		if got, ok := webhook.EventTypeFor(e.Run.Status); !ok || got != e.Type {
			t.Errorf("EventTypeFor(%s) = %q, %v; want %q", e.Run.Status, got, ok, e.Type)
		}
	}
	for _, s := range []runs.Status{runs.StatusQueued, runs.StatusRunning, runs.StatusResuming} {
		if got, ok := webhook.EventTypeFor(s); ok {
			t.Errorf("EventTypeFor(%s) = %q; want no event", s, got)
		}
	}
}

package webhook

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// EventType is the "type" of a webhook payload.
type EventType string

// The event types a run's caller can subscribe to.
const (
	EventWaitingForApproval    EventType = "run.waiting_for_approval"
	EventWaitingForToolResults EventType = "run.waiting_for_tool_results"
	EventCompleted             EventType = "run.completed"
	EventFailed                EventType = "run.failed"
	EventCancelled             EventType = "run.cancelled"
	EventExpired               EventType = "run.expired"
)

// eventStatus maps each event type to the run status it reports.
var eventStatus = map[EventType]runs.Status{
	EventWaitingForApproval:    runs.StatusWaiting,
	EventWaitingForToolResults: runs.StatusWaitingForToolResults,
	EventCompleted:             runs.StatusCompleted,
	EventFailed:                runs.StatusFailed,
	EventCancelled:             runs.StatusCancelled,
	EventExpired:               runs.StatusExpired,
}

// AllEventTypes lists every event type, in life-cycle order.
func AllEventTypes() []EventType {
	return []EventType{
		EventWaitingForApproval, EventWaitingForToolResults,
		EventCompleted, EventFailed, EventCancelled, EventExpired,
	}
}

// Valid reports whether t is one of the event types.
func (t EventType) Valid() bool {
	_, ok := eventStatus[t]
	return ok
}

// EventTypeFor returns the event type that reports a run entering status s,
// and false for statuses callers are not told about (QUEUED, RUNNING,
// RESUMING).
func EventTypeFor(s runs.Status) (EventType, bool) {
	for t, st := range eventStatus {
		if st == s {
			return t, true
		}
	}
	return "", false
}

// ParseEventTypes checks the event types a run subscribes to and returns
// them sorted in life-cycle order without duplicates. An empty list
// subscribes to every type and is returned as nil.
func ParseEventTypes(names []string) ([]EventType, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var out []EventType
	for _, n := range names {
		t := EventType(n)
		if !t.Valid() {
			return nil, fmt.Errorf("unknown webhook event type %q (want one of %s)", n, joinTypes(AllEventTypes()))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	order := AllEventTypes()
	slices.SortFunc(out, func(a, b EventType) int { return slices.Index(order, a) - slices.Index(order, b) })
	return out, nil
}

// Subscribed reports whether a run subscribed to types (nil: all) wants t.
func Subscribed(types []EventType, t EventType) bool {
	return len(types) == 0 || slices.Contains(types, t)
}

func joinTypes(ts []EventType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// Payload is the JSON body of a delivery, in the envelope the Standard
// Webhooks specification recommends: type, timestamp (when the transition
// happened, the same for every attempt) and data.
type Payload struct {
	Type      EventType `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      RunData   `json:"data"`
}

// RunData is what a payload says about the run. It is thin on purpose:
// nothing the model or the caller wrote (prompts, tool arguments, results,
// outputs, metadata) and no approval token is ever part of it.
type RunData struct {
	RunID  string      `json:"run_id"`
	Status runs.Status `json:"status"`
	// Reason is the termination reason of a terminal run.
	Reason loop.TerminationReason `json:"reason,omitempty"`
	// SuspensionID names the suspension of a run.waiting_for_approval
	// event (a run may wait several times).
	SuspensionID string `json:"suspension_id,omitempty"`
	// ToolResultsID names the hand-over of a run.waiting_for_tool_results
	// event.
	ToolResultsID string `json:"tool_results_id,omitempty"`
	// Deadline is when a waiting run expires.
	Deadline time.Time `json:"deadline,omitzero"`
	// Links are the run's API links (self, events, decision, ...), as the
	// API's route table writes them.
	Links map[string]string `json:"links,omitempty"`
}

// Event is one run transition a caller is told about.
type Event struct {
	Type EventType
	// At is when the transition happened.
	At  time.Time
	Run RunData
}

// occurrence tells repeated events of one type in one run apart: each
// suspension and each tool hand-over is its own event; a terminal event
// happens once per run.
func (e Event) occurrence() string {
	switch e.Type {
	case EventWaitingForApproval:
		return e.Run.SuspensionID
	case EventWaitingForToolResults:
		return e.Run.ToolResultsID
	}
	return ""
}

func (e Event) validate() error {
	if !e.Type.Valid() {
		return fmt.Errorf("unknown webhook event type %q", e.Type)
	}
	if e.Run.RunID == "" {
		return fmt.Errorf("webhook event %s: no run id", e.Type)
	}
	if want := eventStatus[e.Type]; e.Run.Status != want {
		return fmt.Errorf("webhook event %s: run status %s, want %s", e.Type, e.Run.Status, want)
	}
	if e.At.IsZero() {
		return fmt.Errorf("webhook event %s: no time", e.Type)
	}
	switch e.Type {
	case EventWaitingForApproval:
		if e.Run.SuspensionID == "" {
			return fmt.Errorf("webhook event %s: no suspension id", e.Type)
		}
	case EventWaitingForToolResults:
		if e.Run.ToolResultsID == "" {
			return fmt.Errorf("webhook event %s: no tool-results id", e.Type)
		}
	}
	return nil
}

// MessageID returns the webhook-id of an event: "msg_" and 26 base32
// characters of SHA-256 over the run id, the event type and the occurrence
// (suspension id, tool-results id, or nothing for a terminal event). It is
// the same for every attempt and for a second scheduling of the same
// occurrence, so receivers can deduplicate on it.
func MessageID(runID string, t EventType, occurrence string) string {
	h := sha256.Sum256([]byte(runID + "\x00" + string(t) + "\x00" + occurrence))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:16]))
}

// MaxBody bounds a rendered payload; a thin payload is far below it.
const MaxBody = 8 << 10

// Render returns the webhook-id and the exact body of e.
func (e Event) Render() (id string, body []byte, err error) {
	if err := e.validate(); err != nil {
		return "", nil, err
	}
	p := Payload{Type: e.Type, Timestamp: e.At.UTC(), Data: e.Run}
	if !p.Data.Deadline.IsZero() {
		p.Data.Deadline = p.Data.Deadline.UTC()
	}
	body, err = json.Marshal(p)
	if err != nil {
		return "", nil, fmt.Errorf("encode webhook payload: %w", err)
	}
	if len(body) > MaxBody {
		return "", nil, fmt.Errorf("webhook payload of %d bytes exceeds %d", len(body), MaxBody)
	}
	return MessageID(e.Run.RunID, e.Type, e.occurrence()), body, nil
}

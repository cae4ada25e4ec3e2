package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Outbound returns the runs.OutboundFunc that turns a subscribed run's
// transition into its webhook delivery: an Event of the type the new status
// reports (if the run subscribed to it), rendered once into a Delivery due
// at once, stored as the outbox entry's data. links gives the run's API
// links (the route table's).
func Outbound(links func(runID string) map[string]string) runs.OutboundFunc {
	return func(next *runs.Run, at time.Time) ([]runs.OutboxEntry, error) {
		if next.Webhook == nil {
			return nil, nil
		}
		t, ok := EventTypeFor(next.Status)
		if !ok {
			return nil, nil
		}
		types, err := ParseEventTypes(next.Webhook.Events)
		if err != nil {
			return nil, err
		}
		if !Subscribed(types, t) {
			return nil, nil
		}
		data := RunData{RunID: next.ID, Status: next.Status}
		switch {
		case next.Status == runs.StatusWaiting:
			data.SuspensionID, data.Deadline = next.SuspensionID, next.ApprovalDeadline
		case next.Status == runs.StatusWaitingForToolResults && next.HandOver != nil:
			data.ToolResultsID, data.Deadline = next.HandOver.ID, next.HandOver.Deadline
		case next.Status.Terminal():
			data.Reason = next.Reason
		}
		if links != nil {
			data.Links = links(next.ID)
		}
		d, err := NewDelivery(Event{Type: t, At: at, Run: data}, next.Webhook.URL)
		if err != nil {
			return nil, err
		}
		return d.Entry()
	}
}

// Entry returns d as a run's outbox entry.
func (d *Delivery) Entry() ([]runs.OutboxEntry, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode webhook delivery %s: %w", d.ID, err)
	}
	return []runs.OutboxEntry{{ID: d.ID, Type: string(d.Type), DueAt: d.NextAttemptAt, Data: b}}, nil
}

// DeliveryOf decodes the delivery an outbox entry holds.
func DeliveryOf(e runs.OutboxEntry) (*Delivery, error) {
	var d Delivery
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return nil, fmt.Errorf("decode webhook delivery %s: %w", e.ID, err)
	}
	if d.ID != e.ID {
		return nil, fmt.Errorf("outbox entry %s holds delivery %q", e.ID, d.ID)
	}
	return &d, nil
}

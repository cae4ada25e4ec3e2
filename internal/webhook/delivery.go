package webhook

import (
	"encoding/json"
	"fmt"
	"time"
)

// DeliveryState is where a delivery stands.
type DeliveryState string

// The states of a delivery. Delivered and Failed are final.
const (
	DeliveryPending   DeliveryState = "pending"   // an attempt is due at NextAttemptAt
	DeliveryDelivered DeliveryState = "delivered" // the receiver answered 2xx
	DeliveryFailed    DeliveryState = "failed"    // given up: attempts or window used up, target refused, or 410 Gone
)

// Delivery is one event on its way to one URL: what is sent (the same id
// and body on every attempt) and how far it got. It is plain data, stored
// with the transition that caused it.
type Delivery struct {
	// ID is the webhook-id (see MessageID).
	ID    string    `json:"id"`
	Type  EventType `json:"type"`
	RunID string    `json:"run_id"`
	URL   string    `json:"url"`
	// Body is the exact JSON payload.
	Body      json.RawMessage `json:"body"`
	CreatedAt time.Time       `json:"created_at"`

	State    DeliveryState `json:"state"`
	Attempts int           `json:"attempts"`
	// NextAttemptAt is when the next attempt is due (zero once final).
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Last is the outcome of the latest attempt.
	Last *Attempt `json:"last,omitempty"`
}

// NewDelivery renders e for url, due at once (at e.At).
func NewDelivery(e Event, url string) (Delivery, error) {
	id, body, err := e.Render()
	if err != nil {
		return Delivery{}, err
	}
	if url == "" {
		return Delivery{}, fmt.Errorf("webhook %s: no URL", id)
	}
	return Delivery{
		ID: id, Type: e.Type, RunID: e.Run.RunID, URL: url, Body: body,
		CreatedAt: e.At, State: DeliveryPending, NextAttemptAt: e.At,
	}, nil
}

// Due reports whether an attempt of d is due at now.
func (d *Delivery) Due(now time.Time) bool {
	return d.State == DeliveryPending && !now.Before(d.NextAttemptAt)
}

// Record folds attempt a into d and, per s, schedules the next attempt or
// makes d final.
func (d *Delivery) Record(a Attempt, s Schedule) {
	d.Attempts++
	a.Number = d.Attempts
	d.Last = &a
	switch a.Outcome {
	case OutcomeDelivered:
		d.State, d.NextAttemptAt = DeliveryDelivered, time.Time{}
	case OutcomeFailed:
		if next, ok := s.Next(d.ID, d.CreatedAt, a.At, d.Attempts); ok {
			d.State, d.NextAttemptAt = DeliveryPending, next
			return
		}
		d.State, d.NextAttemptAt = DeliveryFailed, time.Time{}
	default: // refused, gone: retrying cannot help
		d.State, d.NextAttemptAt = DeliveryFailed, time.Time{}
	}
}

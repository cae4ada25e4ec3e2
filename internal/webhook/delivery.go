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
	// WaitingSince is when a process first found the delivery due and
	// could not make the attempt for want of a signing secret
	// (WaitForSecret), zero once an attempt is made again. Waited is the
	// time of earlier such stretches: the schedule's window is counted
	// without them.
	WaitingSince time.Time     `json:"waiting_since,omitzero"`
	Waited       time.Duration `json:"waited_ns,omitempty"`
}

// NoSecretRetry is how long a due delivery waits for its next try when the
// process that found it due has no signing secret: as long as a Lambda
// uses a secret it read before reading it again (SecretRefresh), so a
// delivery goes within NoSecretRetry (plus a sweep's interval) once a
// process with the secret runs, while a deployment without one rewrites
// each waiting delivery at most 12 times an hour.
const NoSecretRetry = 5 * time.Minute

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

// WaitForSecret folds in that the attempt of d due at now could not be
// made because this process has no signing secret. That is not an
// attempt: Attempts and Last stay as they are, and d is due again after
// NoSecretRetry. Once d has waited so, in all, for the schedule's whole
// Span, it is given up (DeliveryFailed): a deployment that never gets its
// secret back does not keep the delivery, and its run, forever. It
// reports whether d was given up.
func (d *Delivery) WaitForSecret(now time.Time, s Schedule) (givenUp bool) {
	if d.WaitingSince.IsZero() {
		d.WaitingSince = now
	}
	giveUpAt := d.WaitingSince.Add(s.Span() - d.Waited)
	if !now.Before(giveUpAt) {
		d.State, d.NextAttemptAt = DeliveryFailed, time.Time{}
		return true
	}
	d.NextAttemptAt = now.Add(NoSecretRetry)
	if d.NextAttemptAt.After(giveUpAt) {
		d.NextAttemptAt = giveUpAt
	}
	return false
}

// WaitedForSecret is how long d has waited, in all, for a process with a
// signing secret, up to now.
func (d *Delivery) WaitedForSecret(now time.Time) time.Duration {
	if d.WaitingSince.IsZero() {
		return d.Waited
	}
	return d.Waited + max(now.Sub(d.WaitingSince), 0)
}

// Record folds attempt a into d and, per s, schedules the next attempt or
// makes d final. Time d waited for a signing secret (WaitForSecret) does
// not count against the schedule's window.
func (d *Delivery) Record(a Attempt, s Schedule) {
	if !d.WaitingSince.IsZero() {
		d.Waited, d.WaitingSince = d.WaitedForSecret(a.At), time.Time{}
	}
	d.Attempts++
	a.Number = d.Attempts
	d.Last = &a
	switch a.Outcome {
	case OutcomeDelivered:
		d.State, d.NextAttemptAt = DeliveryDelivered, time.Time{}
	case OutcomeFailed:
		if next, ok := s.Next(d.ID, d.CreatedAt.Add(d.Waited), a.At, d.Attempts); ok {
			d.State, d.NextAttemptAt = DeliveryPending, next
			return
		}
		d.State, d.NextAttemptAt = DeliveryFailed, time.Time{}
	default: // refused, gone: retrying cannot help
		d.State, d.NextAttemptAt = DeliveryFailed, time.Time{}
	}
}

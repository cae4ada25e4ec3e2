package runs

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Subscription is where a run's caller wants to be told about the run: a
// webhook URL (checked against the deployment's policy when the run was
// submitted) and the event types wanted (empty: all).
type Subscription struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
}

// OutboxEntry is one message waiting on the run row to be sent (a webhook
// delivery). The Store keeps it opaque: it schedules entries in the same
// write as the transition that caused them, oldest first, keeps the run in
// the due index until the front entry's DueAt (Run.OutboxDue: the outbox
// is sent in order), and replaces or removes an entry when an attempt is
// recorded. Data is the sender's own record (webhook.Delivery).
type OutboxEntry struct {
	// ID is stable across attempts (the webhook-id).
	ID string `json:"id"`
	// Type is the event type, for the audit record.
	Type  string          `json:"type"`
	DueAt time.Time       `json:"due_at"`
	Data  json.RawMessage `json:"data"`
}

// OutboundFunc returns the entries a transition into next schedules (none
// when the run's caller is not told about it). The Store calls it, when
// configured, for every write that changes a subscribed run's status or
// suspension; an error is logged and schedules nothing, since telling the
// caller never fails the run.
type OutboundFunc func(next *Run, at time.Time) ([]OutboxEntry, error)

// MaxOutbox bounds the entries on a run row; when a new one would exceed
// it, the oldest is dropped (with a webhook_dropped event).
const MaxOutbox = 8

// Event types of the outbox.
const (
	EventWebhookScheduled = "webhook_scheduled"
	EventWebhookAttempt   = "webhook_attempt"
	EventWebhookDropped   = "webhook_dropped"
	// EventWebhookGivenUp records a delivery given up without an attempt
	// that ended it: it waited too long for a process able to send it.
	EventWebhookGivenUp = "webhook_given_up"
)

// schedule adds the outbox entries of the transition cur -> next to next,
// and the matching events to w; it reports whether it added any.
func (s *Store) schedule(cur, next *Run, w *Write, now time.Time) (added bool) {
	if s.opts.Outbound == nil || next.Webhook == nil {
		return false
	}
	if next.Status == cur.Status && next.SuspensionID == cur.SuspensionID {
		return false
	}
	entries, err := s.opts.Outbound(next, now)
	if err != nil {
		s.opts.Logger.Warn("webhook not scheduled", "run_id", next.ID, "status", next.Status, "err", err)
		return false
	}
	for _, e := range entries {
		if slices.ContainsFunc(next.Outbox, func(o OutboxEntry) bool { return o.ID == e.ID }) {
			continue
		}
		if len(next.Outbox) >= MaxOutbox {
			old := next.Outbox[0]
			next.Outbox = slices.Delete(next.Outbox, 0, 1)
			w.Events = append(w.Events, Event{Type: EventWebhookDropped, Actor: "agentgate", Data: mustJSON(outboxEventData{ID: old.ID, Type: old.Type})})
		}
		next.Outbox = append(next.Outbox, e)
		w.Events = append(w.Events, Event{Type: EventWebhookScheduled, Actor: "agentgate", Data: mustJSON(outboxEventData{ID: e.ID, Type: e.Type})})
		added = true
	}
	return added
}

// NotifyScheduled has fn told the id of every run on which a write of this
// Store scheduled outbox entries that may be sent at once (the run is
// waiting or has ended), after the write is durable, so that a process
// that sends deliveries can make their first attempt now rather than at
// its next sweep. fn runs on the writer's goroutine and must not block; a
// notice it drops costs only the wait for the next sweep. nil stops it.
func (s *Store) NotifyScheduled(fn func(runID string)) {
	if fn == nil {
		s.scheduled.Store(nil)
		return
	}
	s.scheduled.Store(&fn)
}

// notifyScheduled tells NotifyScheduled's function about r.
func (s *Store) notifyScheduled(r *Run) {
	if fn := s.scheduled.Load(); fn != nil && outboxSendable(r.Status) {
		(*fn)(r.ID)
	}
}

type outboxEventData struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// OutboxDue returns when r's outbox is due: the DueAt of its front (oldest)
// entry, zero when it is empty. A run's outbox is sent front to back, the
// oldest entry first: nothing is sent before the front entry is due, and
// then the entries behind it go too, in order, whatever their own DueAt,
// so that a later message never reaches the receiver ahead of an older
// one of the same run (a first attempt does not overtake an older entry's
// retry, nor does a retry whose delay came out shorter).
func (r *Run) OutboxDue() time.Time {
	if len(r.Outbox) == 0 {
		return time.Time{}
	}
	return r.Outbox[0].DueAt
}

// outboxSendable reports whether the sweep may send (and record) r's
// outbox now: not while a worker may hold the run or is about to claim it,
// so that recording an attempt never makes a worker's write conflict.
// Entries of a run that is executing wait for its next stop.
func outboxSendable(st Status) bool {
	return st == StatusWaiting || st == StatusWaitingForToolResults || st.Terminal()
}

// OutboxSendable reports whether the sweep may send r's outbox now.
func (r *Run) OutboxSendable() bool { return outboxSendable(r.Status) && len(r.Outbox) > 0 }

// RecordOutbox records one attempt at the outbox entry id of a waiting or
// terminal run, in one write: the entry is replaced by next (its new due
// time and data) or removed when next is nil (delivered or given up), and
// ev (type webhook_attempt when empty) is appended. It retries when only
// the version moved. Codes: EInvalid, ENotFound, EConflict (the entry is
// gone, or the run is executing).
func (s *Store) RecordOutbox(ctx context.Context, cur *Run, id string, next *OutboxEntry, ev Event) (*Run, error) {
	if ev.Type == "" {
		ev.Type = EventWebhookAttempt
	}
	if ev.Actor == "" {
		ev.Actor = "purge"
	}
	return s.replaceOutbox(ctx, cur, id, next, []Event{{Type: ev.Type, Actor: ev.Actor, Data: cloneRaw(ev.Data)}})
}

// PostponeOutbox replaces the outbox entry id of a waiting or terminal run
// with next (a later due time, the sender's data) without an event: for an
// entry whose attempt could not be made at all (no attempt to record), so
// that it leaves the front of the due index. Codes as RecordOutbox.
func (s *Store) PostponeOutbox(ctx context.Context, cur *Run, id string, next OutboxEntry) (*Run, error) {
	return s.replaceOutbox(ctx, cur, id, &next, nil)
}

// replaceOutbox replaces (next) or removes (nil) the outbox entry id and
// appends events, in one write.
func (s *Store) replaceOutbox(ctx context.Context, cur *Run, id string, next *OutboxEntry, events []Event) (*Run, error) {
	return s.retry(ctx, cur, func(cur *Run, _ time.Time) (*Run, Write, error) {
		if !outboxSendable(cur.Status) {
			return nil, Write{}, Errorf(EConflict, "run %s is %s; its outbox waits", cur.ID, cur.Status)
		}
		i := slices.IndexFunc(cur.Outbox, func(o OutboxEntry) bool { return o.ID == id })
		if i < 0 {
			return nil, Write{}, Errorf(EConflict, "run %s has no outbox entry %s", cur.ID, id)
		}
		n := cur.Clone()
		if next != nil {
			e := *next
			e.DueAt = ms(e.DueAt)
			e.Data = cloneRaw(e.Data)
			n.Outbox[i] = e
		} else {
			n.Outbox = slices.Delete(n.Outbox, i, i+1)
		}
		return n, Write{Events: slices.Clone(events)}, nil
	}, func(fresh *Run) bool {
		return outboxSendable(fresh.Status) && slices.ContainsFunc(fresh.Outbox, func(o OutboxEntry) bool { return o.ID == id })
	})
}

func cloneOutbox(in []OutboxEntry) []OutboxEntry {
	if in == nil {
		return nil
	}
	out := make([]OutboxEntry, len(in))
	for i, e := range in {
		e.Data = cloneRaw(e.Data)
		out[i] = e
	}
	return out
}

func cloneSubscription(s *Subscription) *Subscription {
	if s == nil {
		return nil
	}
	c := *s
	c.Events = slices.Clone(s.Events)
	return &c
}

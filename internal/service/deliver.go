package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// WebhookSender makes one delivery attempt; *webhook.Sender is one. An
// error means no attempt was made, because the signing secret cannot be
// had now (a *webhook.SecretUnavailableError): the delivery waits for it
// without using up an attempt (see waitForSecret). Ready says so without
// sending: nil, or the error Send would return now. Both are called from
// several goroutines at once.
type WebhookSender interface {
	Send(ctx context.Context, d *webhook.Delivery) (webhook.Attempt, error)
	Ready(ctx context.Context) error
}

// DefaultDeliveryBudget is the time one sweep may spend on webhook
// attempts, well within the purge function's 5-minute timeout: a healthy
// receiver answers in milliseconds, so a sweep makes thousands of attempts;
// receivers that answer slowly (each attempt up to webhook.DefaultTimeout)
// leave the rest due on the next tick.
const DefaultDeliveryBudget = 2 * time.Minute

// DefaultDeliveryConcurrency is how many runs' webhook deliveries a sweep
// makes at the same time: receivers that take their whole
// webhook.DefaultTimeout hold up only their own runs' deliveries, and
// eight of them at once still leave a sweep's budget for 64 such attempts.
const DefaultDeliveryConcurrency = 8

// The errors of a delivery given up without an attempt that ended it: the
// processes that found it due could not make one, for as long as its
// schedule's attempts would have taken, because the last of them had no
// webhook sender (no signing secret configured: not_configured) or could
// not read its configured secret (secret_unavailable).
const (
	errClassNotConfigured     = "not_configured"
	errClassSecretUnavailable = "secret_unavailable"
)

// webhookAttemptData is the data of a webhook_attempt event.
type webhookAttemptData struct {
	ID      string                `json:"id"`
	Type    webhook.EventType     `json:"type"`
	State   webhook.DeliveryState `json:"state"`
	Next    time.Time             `json:"next_attempt_at,omitzero"`
	Attempt webhook.Attempt       `json:"attempt"`
}

// webhookGivenUpData is the data of a webhook_given_up event: the delivery,
// its final state, why, the attempts made before (none, or ones that
// failed) and how long it waited for a process able to send it.
type webhookGivenUpData struct {
	ID       string                `json:"id"`
	Type     webhook.EventType     `json:"type"`
	State    webhook.DeliveryState `json:"state"`
	Error    string                `json:"error"`
	Attempts int                   `json:"attempts"`
	WaitedMS int64                 `json:"waited_ms"`
}

// DeliverRun makes the due webhook attempts of one run now: the first
// attempt of a delivery its last write scheduled (runs.Store.NotifyScheduled
// names the run), instead of at the next sweep, or its retries (a sweep
// gave the run to Sweeper.QueueDeliveries). A run that is executing, or
// is gone, is left to the sweep. It may run at the same time as other
// DeliverRuns and Sweeps of s: a run another of them has is left to it
// at once (counted Skipped), and given to QueueDeliveries when it is let
// go, since that pass may have read the run before this call's delivery
// was scheduled. Once ctx ends no further attempt starts; the one under
// way is finished and recorded (see deliver).
func (s *Sweeper) DeliverRun(ctx context.Context, runID string) (SweepSummary, error) {
	var sum SweepSummary
	if !s.claims.take(runID, true) {
		sum.Skipped++
		return sum, nil
	}
	defer s.letGo(runID)
	at := s.now()
	r, err := s.Store.Get(ctx, runID)
	switch {
	case runs.ErrorCode(err) == runs.ENotFound:
		return sum, nil
	case err != nil:
		s.logger().WarnContext(ctx, "webhook: run not read for its first attempts; the sweep makes them", "run_id", runID, "err", err)
		return sum, fmt.Errorf("deliver run %s: %w", runID, err)
	}
	if r.OutboxSendable() {
		round := s.newRound(at)
		_, sum = s.deliver(ctx, r, at, round, s.logger())
		sum.secretErr = round.secretError()
		warnWaitingForSecret(ctx, s.logger(), sum)
	}
	return sum, nil
}

// deliver makes one attempt at each outbox entry of r once its front
// entry is due (runs.Run.OutboxDue), in the outbox's order, one after
// another, and records each in its own write, within the bounds of round,
// which the runs delivered to at the same time share. The entries behind
// the front go with it whatever their own due time: a run's deliveries
// reach the receiver oldest first, and a delivery waiting behind an older
// one keeps that one's pace (its first attempt waits for the older one's
// retry; its retries go right after the older one's). A write that fails
// ends the pass, so nothing later is sent ahead of what was not recorded.
// Once ctx ends (the process stops) no further attempt starts, but the
// attempt under way is not cut short: it ends as the receiver answers
// (within webhook.DefaultTimeout) and is recorded so, rather than as a
// failure of the receiver's. It returns the run as last written (r when
// nothing was) and what it did (Deliveries, WaitingForSecret, GivenUp,
// More). Failures are logged: a delivery never fails the run or the sweep.
func (s *Sweeper) deliver(ctx context.Context, r *runs.Run, now time.Time, round *deliveryRound, log *slog.Logger) (*runs.Run, SweepSummary) {
	var sum SweepSummary
	sched := s.Schedule
	if sched.Attempts == 0 {
		sched = webhook.DefaultSchedule
	}
	if due := r.OutboxDue(); due.IsZero() || now.Before(due) {
		return r, sum
	}
	stopping := ctx
	ctx = context.WithoutCancel(ctx)
	for _, e := range append([]runs.OutboxEntry(nil), r.Outbox...) {
		if stopping.Err() != nil || !round.begin() {
			sum.More = true
			return r, sum
		}
		d, err := webhook.DeliveryOf(e)
		var a webhook.Attempt
		sent := false
		switch {
		case err != nil:
			// Unreadable: give it up rather than retry forever.
			log.ErrorContext(ctx, "sweep: outbox entry unreadable", "run_id", r.ID, "webhook_id", e.ID, "err", err)
			d = &webhook.Delivery{ID: e.ID, Type: webhook.EventType(e.Type), State: webhook.DeliveryFailed}
			a = webhook.Attempt{At: now, Outcome: webhook.OutcomeRefused, Error: webhook.ErrClassInternal}
			d.Attempts++
			a.Number = d.Attempts
		default:
			if made, ok := s.unrecorded.take(e.ID); ok {
				a = made // made before; its record was refused (see below)
			} else if a, sent = s.send(ctx, d, round); !sent {
				round.release() // no attempt
				var written bool
				if r, written = s.waitForSecret(ctx, r, d, now, sched, &sum, log); !written {
					return r, sum
				}
				continue
			}
			d.Record(a, sched)
		}
		sum.Deliveries++
		if d.Last != nil {
			a = *d.Last
		}
		var next *runs.OutboxEntry
		if d.State == webhook.DeliveryPending {
			entries, err := d.Entry()
			if err != nil {
				log.ErrorContext(ctx, "sweep: re-encode delivery", "run_id", r.ID, "webhook_id", e.ID, "err", err)
				return r, sum
			}
			next = &entries[0]
		}
		data, _ := json.Marshal(webhookAttemptData{ID: d.ID, Type: d.Type, State: d.State, Next: d.NextAttemptAt, Attempt: a})
		fresh, err := s.Store.RecordOutbox(ctx, r, e.ID, next, runs.Event{Type: runs.EventWebhookAttempt, Actor: "purge", Data: data})
		if err != nil {
			// The attempt stays unrecorded and is made again (same
			// webhook-id): at least once. One that ended the delivery
			// (the receiver took it, or said 410) is remembered by this
			// process instead: when the run moved on meanwhile (a
			// decision taken as soon as the receiver was told), the
			// entry comes up again once the run stops, and is then
			// recorded as it was rather than sent again.
			if sent && d.State != webhook.DeliveryPending && runs.ErrorCode(err) == runs.EConflict {
				s.unrecorded.keep(e.ID, a)
			}
			log.WarnContext(ctx, "sweep: webhook attempt not recorded", "run_id", r.ID, "webhook_id", e.ID, "err", err)
			return r, sum
		}
		log.InfoContext(ctx, "webhook attempt", "run_id", r.ID, "webhook_id", d.ID, "type", d.Type,
			"outcome", a.Outcome, "status_code", a.StatusCode, "latency_ms", a.LatencyMS, "state", d.State)
		r = fresh
	}
	return r, sum
}

// send makes an attempt at d, unless this process cannot sign one: it has
// no webhook sender (no secret configured), or its secret could not be
// read, now or earlier in this round (round.secretReady: the round's other
// due deliveries wait without asking Secrets Manager again). It reports
// whether the attempt was made.
func (s *Sweeper) send(ctx context.Context, d *webhook.Delivery, round *deliveryRound) (webhook.Attempt, bool) {
	if s.Webhooks == nil || round.secretReady(ctx, s.Webhooks) != nil {
		return webhook.Attempt{}, false
	}
	a, err := s.Webhooks.Send(ctx, d)
	if err != nil {
		round.secretLost(err)
		return webhook.Attempt{}, false
	}
	return a, true
}

// deliveryRound is what the deliveries of one sweep (or one DeliverRun)
// share across the runs they are made for at the same time: the time
// budget and MaxDeliveries, the attempts begun against them, and whether
// the webhook secret could be read.
type deliveryRound struct {
	now     func() time.Time
	started time.Time
	budget  time.Duration
	max     int

	mu sync.Mutex
	// begun counts the attempts made or under way (MaxDeliveries bounds
	// it).
	begun int
	// secretErr is why the sender could not sign this round's deliveries
	// (a *webhook.SecretUnavailableError); nil while it could.
	secretErr error
	// secretChecked asks the sender once, before the round's first attempt.
	secretChecked sync.Once
}

// newRound starts the deliveries of a sweep (or a DeliverRun) begun at
// started.
func (s *Sweeper) newRound(started time.Time) *deliveryRound {
	budget := s.DeliveryBudget
	if budget <= 0 {
		budget = DefaultDeliveryBudget
	}
	return &deliveryRound{now: s.now, started: started, budget: budget, max: s.MaxDeliveries}
}

// begin reserves the next attempt, and reports false instead when it
// would exceed the round's bounds: MaxDeliveries attempts made or under
// way, or a budget that one more attempt, at its longest
// (webhook.DefaultTimeout), would overrun. Attempts under way finish. A
// reservation that turns out no attempt (the secret cannot be had) is
// given back with release; a run refused while it was held waits for the
// next sweep, as one refused at the bound does.
func (d *deliveryRound) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if (d.max > 0 && d.begun >= d.max) || d.now().Sub(d.started)+webhook.DefaultTimeout > d.budget {
		return false
	}
	d.begun++
	return true
}

// release gives back a reservation of begin that made no attempt.
func (d *deliveryRound) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.begun--
}

// secretReady is nil when w can sign the round's attempts: it asks w once
// a round, the first time an attempt is to be made (the round's other
// goroutines wait for its answer, so a secret that cannot be read is asked
// for once, not once per run delivered to at the same time), and
// afterwards says what it, or a later Send (secretLost), found.
func (d *deliveryRound) secretReady(ctx context.Context, w WebhookSender) error {
	d.secretChecked.Do(func() {
		if err := w.Ready(ctx); err != nil {
			d.secretLost(err)
		}
	})
	return d.secretError()
}

// secretLost records that the secret could not be had (err): the round's
// remaining deliveries wait for it. Attempts already under way, on other
// goroutines, may still find so themselves.
func (d *deliveryRound) secretLost(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.secretErr == nil {
		d.secretErr = err
	}
}

// secretError is why the round's deliveries could not be signed (nil:
// they could).
func (d *deliveryRound) secretError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.secretErr
}

// waitForSecret handles the due delivery d of r when this process has no
// webhook sender (no signing secret configured) or cannot read its
// configured secret now (deliveryRound.secretReady): no attempt can be
// made, and none is counted. The entry is postponed by webhook.NoSecretRetry, in a write
// without an event (an event per sweep would only repeat that the secret
// is missing; Sweep logs that once), until it has waited for the
// schedule's whole span: then it is given up, with one webhook_given_up
// event (error not_configured, or secret_unavailable). It returns the run
// as last written and false when a write failed (the run is left to the
// next sweep).
func (s *Sweeper) waitForSecret(ctx context.Context, r *runs.Run, d *webhook.Delivery, now time.Time, sched webhook.Schedule, sum *SweepSummary, log *slog.Logger) (*runs.Run, bool) {
	sum.WaitingForSecret++
	if !d.WaitForSecret(now, sched) {
		entries, err := d.Entry()
		if err != nil {
			log.ErrorContext(ctx, "sweep: re-encode delivery", "run_id", r.ID, "webhook_id", d.ID, "err", err)
			return r, true
		}
		fresh, err := s.Store.PostponeOutbox(ctx, r, d.ID, entries[0])
		if err != nil {
			log.WarnContext(ctx, "sweep: webhook delivery not postponed", "run_id", r.ID, "webhook_id", d.ID, "err", err)
			return r, false
		}
		return fresh, true
	}
	sum.GivenUp++
	cause, why := errClassNotConfigured, "no webhook secret configured"
	if s.Webhooks != nil {
		cause, why = errClassSecretUnavailable, "the webhook secret could not be read"
	}
	data, _ := json.Marshal(webhookGivenUpData{ID: d.ID, Type: d.Type, State: webhook.DeliveryFailed, Error: cause,
		Attempts: d.Attempts, WaitedMS: d.WaitedForSecret(now).Milliseconds()})
	fresh, err := s.Store.RecordOutbox(ctx, r, d.ID, nil, runs.Event{Type: runs.EventWebhookGivenUp, Actor: "purge", Data: data})
	if err != nil {
		log.WarnContext(ctx, "sweep: webhook delivery given up but not recorded", "run_id", r.ID, "webhook_id", d.ID, "err", err)
		return r, false
	}
	log.WarnContext(ctx, "webhook delivery given up: "+why, "run_id", r.ID, "webhook_id", d.ID, "type", d.Type,
		"attempts", d.Attempts, "waited", d.WaitedForSecret(now).String())
	return fresh, true
}

// maxUnrecorded bounds the attempts a process remembers as made but not
// recorded (the oldest is forgotten first: such an attempt is made again,
// at least once).
const maxUnrecorded = 1024

// unrecordedAttempts are attempts that ended their delivery but whose
// record was refused, by webhook-id, oldest first.
type unrecordedAttempts struct {
	mu    sync.Mutex
	made  map[string]webhook.Attempt
	order []string
}

func (u *unrecordedAttempts) keep(id string, a webhook.Attempt) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.made == nil {
		u.made = map[string]webhook.Attempt{}
	}
	if _, ok := u.made[id]; !ok {
		u.order = append(u.order, id)
	}
	u.made[id] = a
	for len(u.order) > maxUnrecorded {
		delete(u.made, u.order[0])
		u.order = u.order[1:]
	}
}

func (u *unrecordedAttempts) take(id string) (webhook.Attempt, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a, ok := u.made[id]
	if ok {
		delete(u.made, id)
		u.order = slices.DeleteFunc(u.order, func(o string) bool { return o == id })
	}
	return a, ok
}

package webhook_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/webhook"
)

func TestDefaultScheduleFitsTheWindow(t *testing.T) {
	s := webhook.DefaultSchedule
	if s.Attempts != webhook.MaxAttempts {
		t.Fatalf("DefaultSchedule.Attempts = %d, MaxAttempts = %d", s.Attempts, webhook.MaxAttempts)
	}
	nominal := []time.Duration{time.Minute, 4 * time.Minute, 16 * time.Minute, 64 * time.Minute,
		256 * time.Minute, 6 * time.Hour, 6 * time.Hour, 6 * time.Hour}
	for i := range 500 {
		id := fmt.Sprintf("msg_%d", i)
		var total time.Duration
		for n := 1; ; n++ {
			d, ok := s.Delay(id, n)
			if !ok {
				if n != webhook.MaxAttempts {
					t.Fatalf("%s: no delay after attempt %d, want attempts up to %d", id, n, webhook.MaxAttempts)
				}
				break
			}
			want := nominal[n-1]
			if d > want || d < want-want/10 {
				t.Fatalf("%s: delay after attempt %d = %v, want within 10%% below %v", id, n, d, want)
			}
			total += d
		}
		if total >= s.Window {
			t.Fatalf("%s: last attempt %v after the first, want < %v", id, total, s.Window)
		}
	}
}

func TestScheduleIsDeterministicAndSpread(t *testing.T) {
	s := webhook.DefaultSchedule
	a, _ := s.Delay("msg_a", 3)
	if again, _ := s.Delay("msg_a", 3); again != a {
		t.Errorf("Delay not deterministic: %v then %v", a, again)
	}
	distinct := map[time.Duration]bool{}
	for i := range 20 {
		d, _ := s.Delay(fmt.Sprintf("msg_%d", i), 3)
		distinct[d] = true
	}
	if len(distinct) < 10 {
		t.Errorf("20 deliveries share only %d distinct delays: no jitter", len(distinct))
	}
}

func TestScheduleStopsAtTheWindow(t *testing.T) {
	s := webhook.Schedule{Base: time.Hour, Factor: 2, Cap: 10 * time.Hour, Attempts: 100, Window: 5 * time.Hour}
	created := eventTime
	last, n := created, 1
	for {
		next, ok := s.Next("msg", created, last, n)
		if !ok {
			break
		}
		if next.After(created.Add(s.Window)) {
			t.Fatalf("attempt %d due %v after the event, past the window", n+1, next.Sub(created))
		}
		last, n = next, n+1
	}
	if n != 3 { // at 0, 1 h, 3 h; the next (7 h) is past the window
		t.Errorf("%d attempts fit, want 3", n)
	}
}

func TestDeliveryRecord(t *testing.T) {
	s := webhook.DefaultSchedule
	fail := func(at time.Time) webhook.Attempt {
		return webhook.Attempt{At: at, Outcome: webhook.OutcomeFailed, StatusCode: 500, Error: webhook.ErrClassStatus}
	}
	t.Run("retried until delivered", func(t *testing.T) {
		d := newDelivery(t, completedEvent("run_1"), "https://hooks.example.com/a")
		if !d.Due(eventTime) || d.State != webhook.DeliveryPending {
			t.Fatalf("new delivery: state %s, due %v", d.State, d.Due(eventTime))
		}
		d.Record(fail(eventTime), s)
		wait, _ := s.Delay(d.ID, 1)
		if d.State != webhook.DeliveryPending || !d.NextAttemptAt.Equal(eventTime.Add(wait)) {
			t.Fatalf("after one failure: state %s, next %v, want pending at +%v", d.State, d.NextAttemptAt, wait)
		}
		if d.Due(d.NextAttemptAt.Add(-time.Nanosecond)) || !d.Due(d.NextAttemptAt) {
			t.Error("Due is wrong around NextAttemptAt")
		}
		d.Record(webhook.Attempt{At: d.NextAttemptAt, Outcome: webhook.OutcomeDelivered, StatusCode: 204}, s)
		if d.State != webhook.DeliveryDelivered || !d.NextAttemptAt.IsZero() || d.Attempts != 2 || d.Last.Number != 2 {
			t.Errorf("after delivery: %+v", d)
		}
	})
	t.Run("given up after MaxAttempts", func(t *testing.T) {
		d := newDelivery(t, completedEvent("run_1"), "https://hooks.example.com/a")
		for d.State == webhook.DeliveryPending {
			d.Record(fail(d.NextAttemptAt), s)
		}
		if d.State != webhook.DeliveryFailed || d.Attempts != webhook.MaxAttempts {
			t.Errorf("state %s after %d attempts, want failed after %d", d.State, d.Attempts, webhook.MaxAttempts)
		}
		if d.Last.At.Sub(d.CreatedAt) >= 24*time.Hour {
			t.Errorf("last attempt %v after the event, want < 24h", d.Last.At.Sub(d.CreatedAt))
		}
	})
	for _, o := range []webhook.Outcome{webhook.OutcomeRefused, webhook.OutcomeGone} {
		t.Run(string(o)+" is final", func(t *testing.T) {
			d := newDelivery(t, completedEvent("run_1"), "https://hooks.example.com/a")
			d.Record(webhook.Attempt{At: eventTime, Outcome: o}, s)
			if d.State != webhook.DeliveryFailed || !d.NextAttemptAt.IsZero() {
				t.Errorf("after %s: state %s, next %v", o, d.State, d.NextAttemptAt)
			}
		})
	}
}

func TestScheduleSpan(t *testing.T) {
	tests := []struct {
		name string
		s    webhook.Schedule
		want time.Duration
	}{
		{"default: the nominal delays", webhook.DefaultSchedule, 23*time.Hour + 41*time.Minute},
		{"bounded by the window", webhook.Schedule{Base: time.Hour, Factor: 2, Cap: 10 * time.Hour, Attempts: 100, Window: 5 * time.Hour}, 5 * time.Hour},
		{"one attempt: none to wait for", webhook.Schedule{Base: time.Hour, Factor: 2, Cap: time.Hour, Attempts: 1, Window: 5 * time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Span(); got != tt.want {
				t.Errorf("Span() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWaitingForASecretIsNotAnAttempt: WaitForSecret postpones a due
// delivery by NoSecretRetry without counting an attempt, gives it up once
// it waited the schedule's span, and the time waited does not count
// against the window of the attempts made later.
func TestWaitingForASecretIsNotAnAttempt(t *testing.T) {
	s := webhook.DefaultSchedule
	d := webhook.Delivery{ID: "msg_wait", CreatedAt: eventTime, State: webhook.DeliveryPending, NextAttemptAt: eventTime}
	now := eventTime
	for now.Before(eventTime.Add(20 * time.Hour)) {
		if d.WaitForSecret(now, s) {
			t.Fatalf("given up after %v, want after %v", now.Sub(eventTime), s.Span())
		}
		if want := now.Add(webhook.NoSecretRetry); !d.NextAttemptAt.Equal(want) {
			t.Fatalf("next = %v, want %v", d.NextAttemptAt, want)
		}
		now = d.NextAttemptAt
	}
	if d.Attempts != 0 || d.Last != nil || d.State != webhook.DeliveryPending {
		t.Fatalf("after waiting: attempts %d, last %v, state %s; want 0, nil, pending", d.Attempts, d.Last, d.State)
	}

	// A process with the secret: attempts fail, and are retried past the
	// event's 24 h window by the 20 h waited.
	for range 5 {
		d.Record(webhook.Attempt{At: now, Outcome: webhook.OutcomeFailed}, s)
		now = d.NextAttemptAt
	}
	if d.Attempts != 5 || d.State != webhook.DeliveryPending || !d.NextAttemptAt.After(eventTime.Add(s.Window)) {
		t.Fatalf("attempts %d, state %s, next %v after the event; want 5, pending, later than the window",
			d.Attempts, d.State, d.NextAttemptAt.Sub(eventTime))
	}
	if d.Waited != 20*time.Hour || !d.WaitingSince.IsZero() {
		t.Fatalf("waited %v since %v, want 20h and no longer waiting", d.Waited, d.WaitingSince)
	}

	// Without a secret again: given up once the waits add up to the span.
	for !d.WaitForSecret(now, s) {
		now = d.NextAttemptAt
	}
	if got := d.WaitedForSecret(now); got != s.Span() {
		t.Errorf("given up after waiting %v, want %v", got, s.Span())
	}
	if d.State != webhook.DeliveryFailed || d.Attempts != 5 {
		t.Errorf("state %s, attempts %d; want failed, 5", d.State, d.Attempts)
	}
}

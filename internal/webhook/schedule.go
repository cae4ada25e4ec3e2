package webhook

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"
)

// Schedule says when a failed delivery is tried again: after attempt n
// fails, wait min(Base·Factor^(n-1), Cap), shortened by up to Jitter (a
// fraction, fixed per webhook-id and attempt so that deliveries spread out
// but a schedule can be recomputed), for at most Attempts attempts, none
// starting later than Window after the event.
type Schedule struct {
	Base     time.Duration
	Factor   int
	Cap      time.Duration
	Attempts int
	Window   time.Duration
	Jitter   float64
}

// MaxAttempts is the number of attempts of DefaultSchedule.
const MaxAttempts = 9

// DefaultSchedule tries a delivery at once and then after 1 min, 4 min,
// 16 min, 1 h 4 min, 4 h 16 min, 6 h, 6 h and 6 h: MaxAttempts = 9
// attempts, the last about 23 h 41 min after the first (less with jitter).
var DefaultSchedule = Schedule{
	Base:     time.Minute,
	Factor:   4,
	Cap:      6 * time.Hour,
	Attempts: MaxAttempts,
	Window:   24 * time.Hour,
	Jitter:   0.1,
}

// Delay returns how long to wait after the failed attempt number attempt
// (1 for the first) of the delivery id, and false when no attempt is left.
func (s Schedule) Delay(id string, attempt int) (time.Duration, bool) {
	if attempt < 1 || attempt >= s.Attempts {
		return 0, false
	}
	d := s.Base
	for i := 1; i < attempt && d < s.Cap; i++ {
		d *= time.Duration(s.Factor)
	}
	d = min(d, s.Cap)
	if s.Jitter > 0 {
		h := sha256.Sum256([]byte(id + "/" + strconv.Itoa(attempt)))
		frac := float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53) // [0, 1)
		d -= time.Duration(float64(d) * s.Jitter * frac)
	}
	return d, true
}

// Span is the longest time a delivery's attempts take: the delays between
// them without jitter, at most Window. A delivery that waited this long
// without any attempt being possible (Delivery.WaitForSecret) is given up.
func (s Schedule) Span() time.Duration {
	var span time.Duration
	d := s.Base
	for n := 1; n < s.Attempts && span < s.Window; n++ {
		span += min(d, s.Cap)
		if d < s.Cap {
			d *= time.Duration(s.Factor)
		}
	}
	return min(span, s.Window)
}

// Next returns when attempt number attempt+1 of a delivery created at
// created is due, given that attempt number attempt started at last and
// failed; false when the delivery is to be given up.
func (s Schedule) Next(id string, created, last time.Time, attempt int) (time.Time, bool) {
	d, ok := s.Delay(id, attempt)
	if !ok {
		return time.Time{}, false
	}
	at := last.Add(d)
	if at.After(created.Add(s.Window)) {
		return time.Time{}, false
	}
	return at, true
}

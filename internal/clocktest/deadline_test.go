package clocktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentgate/agentgate/internal/clocktest"
)

// TestDeadline: the deadline passes when the test says so, through a
// context derived from it, and not before.
func TestDeadline(t *testing.T) {
	d := clocktest.NewDeadline()
	derived, cancel := context.WithCancel(d)
	defer cancel()
	if d.Err() != nil || derived.Err() != nil {
		t.Fatalf("passed before Pass: %v, %v", d.Err(), derived.Err())
	}
	clocktest.PassDeadline(derived)
	<-derived.Done()
	if !errors.Is(d.Err(), context.DeadlineExceeded) || !errors.Is(derived.Err(), context.DeadlineExceeded) {
		t.Fatalf("after Pass: %v, %v; want the deadline", d.Err(), derived.Err())
	}
	d.Pass() // again: nothing
}

package clocktest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(t0)
	first := c.Now()
	if !first.Equal(t0) || !c.Now().Equal(first) {
		t.Fatalf("Now %s, want %s: the clock must stand still", c.Now(), t0)
	}
	c.Advance(time.Minute)
	if want := t0.Add(time.Minute); !c.Now().Equal(want) {
		t.Errorf("after Advance: %s, want %s", c.Now(), want)
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Errorf("after Set: %s, want %s", c.Now(), t0)
	}
}

package clocktest

import (
	"context"
	"sync"
)

// Deadline is a context whose deadline passes when the test says so
// (Pass), not after some milliseconds: what runs before that point takes as
// long as it takes on a loaded machine, and the code under test sees
// context.DeadlineExceeded from there on. Contexts derived from it are done
// with it, and PassDeadline finds it through them.
type Deadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

type deadlineKey struct{}

// NewDeadline returns a Deadline that has not passed.
func NewDeadline() *Deadline {
	return &Deadline{Context: context.Background(), done: make(chan struct{})}
}

// Done is closed once the deadline has passed.
func (d *Deadline) Done() <-chan struct{} { return d.done }

// Err is context.DeadlineExceeded once the deadline has passed, else nil.
func (d *Deadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Value makes d findable from the contexts derived from it.
func (d *Deadline) Value(key any) any {
	if key == (deadlineKey{}) {
		return d
	}
	return d.Context.Value(key)
}

// Pass makes the deadline pass; passing it again does nothing.
func (d *Deadline) Pass() { d.once.Do(func() { close(d.done) }) }

// PassDeadline makes the deadline of the Deadline ctx is, or derives from,
// pass; it panics when there is none.
func PassDeadline(ctx context.Context) {
	d, ok := ctx.Value(deadlineKey{}).(*Deadline)
	if !ok {
		panic("clocktest.PassDeadline: ctx has no clocktest.Deadline")
	}
	d.Pass()
}

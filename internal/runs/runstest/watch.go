package runstest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// testGetAfter: a write through the Store wakes the run's watchers before
// it returns, and GetAfter answers with the run once its version is above
// the caller's, once it has ended, or as it was when the wait ends. The
// waits that must end otherwise than by their time are an hour long: if
// they did not end, the test would hang until go test's timeout.
func testGetAfter(t *testing.T, e *Env) {
	r := e.Queued(t)

	got, err := e.Store.GetAfter(e.ctx, r.ID, r.Version-1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, r.Version, got.Version, "a run already past the caller's version is answered at once")

	changed, release := e.Store.Watch(r.ID)
	defer release()
	other, releaseOther := e.Store.Watch(e.Queued(t).ID)
	defer releaseOther()
	select {
	case <-changed:
		t.Fatal("the watch of a run nobody wrote is closed")
	default:
	}
	claimed, err := e.Store.Claim(e.ctx, r.ID, "w1")
	require.NoError(t, err)
	select {
	case <-changed:
	default:
		t.Fatal("a write through the store returned without waking the run's watchers")
	}
	select {
	case <-other:
		t.Fatal("a write of one run woke the watchers of another")
	default:
	}

	// A waiter on the claimed version gets the cancelled run (woken by the
	// write, or finding it when it starts after it).
	done := make(chan *runs.Run, 1)
	go func() {
		g, err := e.Store.GetAfter(e.ctx, r.ID, claimed.Version, runs.MaxWait)
		if err != nil {
			t.Errorf("GetAfter: %v", err)
		}
		done <- g
	}()
	cancelled, err := e.Store.Cancel(e.ctx, claimed, "alice")
	require.NoError(t, err)
	require.Equal(t, cancelled.Version, (<-done).Version)

	got, err = e.Store.GetAfter(e.ctx, r.ID, cancelled.Version+5, time.Hour)
	require.NoError(t, err)
	require.Equal(t, runs.StatusCancelled, got.Status, "an ended run is answered at once: nothing more will happen to it")

	// A write by another process (another Store over the same tables)
	// wakes nobody here: the waiter finds it when it reads the row again
	// (runs.WaitPoll), well before its wait ends.
	elsewhere := runs.NewStore(e.H.Rows, e.H.States, runs.Options{Now: e.Clock.Now, LeaseTTL: LeaseTTL, DispatchGrace: DispatchGrace, Retention: Retention})
	q := e.Queued(t)
	go func() {
		g, err := e.Store.GetAfter(e.ctx, q.ID, q.Version, runs.MaxWait)
		if err != nil {
			t.Errorf("GetAfter: %v", err)
		}
		done <- g
	}()
	claimedElsewhere, err := elsewhere.Claim(e.ctx, q.ID, "w2")
	require.NoError(t, err)
	require.Equal(t, claimedElsewhere.Version, (<-done).Version, "a write made through another Store is found by the waiter's re-read")

	// The wake-up alone: a Store that reads again only hourly, a waiter
	// known to be waiting before the write.
	hourly := runs.NewStore(e.H.Rows, e.H.States, runs.Options{Now: e.Clock.Now, LeaseTTL: LeaseTTL, DispatchGrace: DispatchGrace, Retention: Retention, WaitPoll: time.Hour})
	w := e.Queued(t)
	go func() {
		g, err := hourly.GetAfter(e.ctx, w.ID, w.Version, time.Hour)
		if err != nil {
			t.Errorf("GetAfter: %v", err)
		}
		done <- g
	}()
	for hourly.Waiters(w.ID) == 0 {
		runtime.Gosched()
	}
	claimedNow, err := hourly.Claim(e.ctx, w.ID, "w3")
	require.NoError(t, err)
	require.Equal(t, claimedNow.Version, (<-done).Version, "the write woke the waiter (it reads again only hourly, and waits an hour)")
	require.Zero(t, hourly.Waiters(w.ID), "a woken waiter is released")

	idle := e.Queued(t)
	got, err = e.Store.GetAfter(e.ctx, idle.ID, idle.Version, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, idle.Version, got.Version, "a wait that ends first answers with the run as it is")
	require.Zero(t, e.Store.Waiters(idle.ID), "a wait that ended is released")

	gone, cancel := context.WithCancel(e.ctx)
	go func() {
		for e.Store.Waiters(idle.ID) == 0 {
			runtime.Gosched()
		}
		cancel()
	}()
	got, err = e.Store.GetAfter(gone, idle.ID, idle.Version, time.Hour)
	if err == nil {
		require.Equal(t, idle.Version, got.Version, "a caller that leaves while it waits gets the run as last read")
	} else {
		// It left during the first read (the waiter counts from just
		// before it): nothing was read to answer with.
		require.ErrorIs(t, err, context.Canceled)
	}
	require.Zero(t, e.Store.Waiters(idle.ID), "the wait of a caller that left is released")

	// StopWaits (a server shutting down) ends the waits, now and later.
	go func() {
		for hourly.Waiters(idle.ID) == 0 {
			runtime.Gosched()
		}
		hourly.StopWaits()
	}()
	got, err = hourly.GetAfter(e.ctx, idle.ID, idle.Version, time.Hour)
	require.NoError(t, err)
	require.Equal(t, idle.Version, got.Version)
	got, err = hourly.GetAfter(e.ctx, idle.ID, idle.Version, time.Hour)
	require.NoError(t, err)
	require.Equal(t, idle.Version, got.Version, "a wait after StopWaits answers at once")
	require.Zero(t, hourly.Waiters(idle.ID))

	_, err = e.Store.GetAfter(e.ctx, "run-0-missing", 0, time.Hour)
	AssertCode(t, runs.ENotFound, err)
}

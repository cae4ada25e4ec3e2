package runstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// testGetAfter: a write through the Store wakes the run's watchers before
// it returns, and GetAfter answers with the run once its version is above
// the caller's, once it has ended, or as it was when the wait ends.
func testGetAfter(t *testing.T, e *Env) {
	r := e.Queued(t)

	got, err := e.Store.GetAfter(e.ctx, r.ID, r.Version-1, runs.MaxWait)
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

	got, err = e.Store.GetAfter(e.ctx, r.ID, cancelled.Version+5, runs.MaxWait)
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

	idle := e.Queued(t)
	got, err = e.Store.GetAfter(e.ctx, idle.ID, idle.Version, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, idle.Version, got.Version, "a wait that ends first answers with the run as it is")

	_, err = e.Store.GetAfter(e.ctx, "run-0-missing", 0, runs.MaxWait)
	AssertCode(t, runs.ENotFound, err)
}

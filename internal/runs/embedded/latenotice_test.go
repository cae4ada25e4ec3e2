package embedded_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// conflictOnce answers the next PutEvent EConflict with nothing stored, as
// an adapter whose write was refused for another reason than the number
// being taken would.
type conflictOnce struct {
	runs.RowStore
	fail bool
}

func (r *conflictOnce) PutEvent(ctx context.Context, ev runs.Event) error {
	if r.fail {
		r.fail = false
		return runs.Errorf(runs.EConflict, "transaction cancelled: TransactionConflict,None")
	}
	return r.RowStore.PutEvent(ctx, ev)
}

// TestALateNoticeSaidStoredIsReadBack: a late notice (bob decided while
// the mail went out) whose event-only write answers EConflict is recorded
// only when the event is there: RecordNotification reads it back, and
// fails rather than report a notice the trail does not hold; tried again,
// it is recorded (review helper-65).
func TestALateNoticeSaidStoredIsReadBack(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "a.db"))
	require.NoError(t, err)
	defer db.Close()
	rows := &conflictOnce{RowStore: db}
	e := runstest.NewEnv(t, runstest.Harness{Rows: rows, States: db})
	ctx := t.Context()
	r := e.Running(t)
	sp, _ := e.Suspension(r, "s1")
	sp.Notify = true
	s1, err := e.Store.Suspend(ctx, r, "w1", sp)
	require.NoError(t, err)
	_, err = e.Store.Decide(ctx, s1, runs.NewDecision{SuspensionID: "s1", Decider: "bob", Via: runs.ViaAPI, Decision: runstest.Approve})
	require.NoError(t, err)
	notice := runs.Notice{SuspensionID: "s1", State: runs.NotificationSent, Data: json.RawMessage(`{"sent":1}`)}
	notified := func() int {
		evs, err := e.Store.Events(ctx, s1.ID, 0, 100)
		require.NoError(t, err)
		n := 0
		for _, ev := range evs {
			if ev.Type == runs.EventNotified {
				n++
			}
		}
		return n
	}

	rows.fail = true
	_, err = e.Store.RecordNotification(ctx, s1, notice)
	require.Error(t, err, "a notice refused and not stored is not on record")
	require.Equal(t, 0, notified())

	_, err = e.Store.RecordNotification(ctx, s1, notice)
	require.NoError(t, err)
	require.Equal(t, 1, notified())
	_, err = e.Store.RecordNotification(ctx, s1, notice)
	require.NoError(t, err, "once stored, a retry is a no-op")
	require.Equal(t, 1, notified())
}

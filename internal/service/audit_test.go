package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// cancellingRows cancels the run (as a concurrent POST /runs/{id}/cancel
// would) right before the at-th row write that follows the write tool's
// execution, so the worker's own write then conflicts.
type cancellingRows struct {
	runs.RowStore
	store    func() *runs.Store
	executed func() bool
	at       int
	seen     int
	done     bool
}

func (c *cancellingRows) Write(ctx context.Context, w runs.Write) error {
	if !c.done && c.executed() {
		c.seen++
		if c.seen == c.at {
			c.done = true
			cur, err := c.store().Get(ctx, w.Run.ID)
			if err != nil {
				return err
			}
			if _, err := c.store().Cancel(ctx, cur, "alice"); err != nil {
				return err
			}
		}
	}
	return c.RowStore.Write(ctx, w)
}

// TestACancelAfterAWriteStillAuditsIt: whenever a cancel lands after an
// approved write took effect, the run's events account for that write,
// either by its tool_executed step or by the cancelled event naming it as
// the write in flight (pending_effect). The worker used to lift the fence
// in a write of its own before recording the step, so a cancel landing
// between the two ended the run with an executed write no event named
// (found by make soak: executed_write_missing_from_audit).
func TestACancelAfterAWriteStillAuditsIt(t *testing.T) {
	for at := 1; at <= 3; at++ {
		t.Run(fmt.Sprintf("cancel before write %d after the tool ran", at), func(t *testing.T) {
			e := newEnv(t)
			db, err := embedded.Open(filepath.Join(t.TempDir(), "c.db"))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			rows := &cancellingRows{RowStore: db, at: at, store: func() *runs.Store { return e.store }, executed: func() bool { return e.writes > 0 }}
			e.store = runs.NewStore(rows, db, runs.Options{Now: e.clock.Now, Retention: 48 * time.Hour})
			e.worker.Store = e.store
			ctx := context.Background()

			r := e.start(t)
			require.NoError(t, e.worker.Handle(ctx, service.Job{Kind: service.JobRun, RunID: r.ID}))
			w := e.get(t, r.ID)
			require.Equal(t, runs.StatusWaiting, w.Status)
			_, err = e.store.Decide(ctx, w, runs.NewDecision{SuspensionID: w.SuspensionID, Decider: "bob", Via: runs.ViaAPI,
				Decision: loop.Decision{TurnDigest: w.TurnDigest, Action: loop.ActionApprove}})
			require.NoError(t, err)
			_ = e.worker.Handle(ctx, service.Job{Kind: service.JobResume, RunID: r.ID}) // loses the run to the cancel
			require.Equal(t, 1, e.writes)
			if !rows.done {
				// The worker records the write's step with its next
				// write, the settle: there is no later write to cancel
				// before.
				require.Greater(t, at, 1, "the worker writes at least once after the tool ran")
				return
			}

			got := e.get(t, r.ID)
			require.Equal(t, runs.StatusCancelled, got.Status, "the cancel landed")
			evs, err := e.store.Events(ctx, r.ID, 0, 100)
			require.NoError(t, err)
			audited := false
			for _, ev := range evs {
				var d struct {
					CallID        string `json:"call_id"`
					PendingEffect string `json:"pending_effect"`
				}
				require.NoError(t, json.Unmarshal(append([]byte(nil), orEmpty(ev.Data)...), &d))
				if (ev.Type == string(loop.StepToolExecuted) && d.CallID == "w1") || d.PendingEffect == "w1" {
					audited = true
				}
			}
			var types []string
			for _, ev := range evs {
				types = append(types, ev.Type+" "+string(ev.Data))
			}
			assert.True(t, audited, "no event records the executed write w1 or names it in flight: %v", types)
		})
	}
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

package apitest_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// holdAfterSuspending holds the worker that suspends a run in the store
// call that wrote its suspension (the write is stored), until release: as
// a worker whose process is frozen or killed between the hold and the
// approval mail.
type holdAfterSuspending struct {
	runs.RowStore
	held     chan struct{}
	released chan struct{}
	once     *sync.Once
	done     *sync.Once
}

func newHoldAfterSuspending(rows runs.RowStore) holdAfterSuspending {
	return holdAfterSuspending{RowStore: rows, held: make(chan struct{}), released: make(chan struct{}), once: &sync.Once{}, done: &sync.Once{}}
}

func (h holdAfterSuspending) Write(ctx context.Context, w runs.Write) error {
	err := h.RowStore.Write(ctx, w)
	if err != nil || w.Run.Status != runs.StatusWaiting {
		return err
	}
	for _, ev := range w.Events {
		if ev.Type == runs.EventSuspended {
			h.once.Do(func() {
				close(h.held)
				<-h.released
			})
		}
	}
	return err
}

// PrimeRow passes the adapter's priming on (runs.RowPrimer).
func (h holdAfterSuspending) PrimeRow(r *runs.Run) {
	if p, ok := h.RowStore.(runs.RowPrimer); ok {
		p.PrimeRow(r)
	}
}

func (h holdAfterSuspending) release() { h.done.Do(func() { close(h.released) }) }

// TestAFirstMailItsWorkerNeverSentIsSentByTheSweep (outside tester
// helper-113 P1, through the local server): the worker that held the turn
// stops right after the suspension's write, before its approval mail.
// Before, nobody was mailed until the 80% reminder. Now the sweep mails
// both approvers runs.FirstNoticeGrace after the hold, with links that
// decide; the worker, when it comes back, mails nobody and records
// nothing: one mail each, one notified event.
func TestAFirstMailItsWorkerNeverSentIsSentByTheSweep(t *testing.T) {
	runFirstMailRecovered(t)
}

func runFirstMailRecovered(t *testing.T, opts ...func(*apitest.Options)) {
	clock := clocktest.New(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	o := apitest.Options{Now: clock.Now}
	for _, f := range opts {
		f(&o)
	}
	if o.Rows == nil {
		db, err := embedded.Open(filepath.Join(t.TempDir(), "rows.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		o.Rows, o.States = db, db
	}
	hold := newHoldAfterSuspending(o.Rows)
	o.Rows = hold
	s := start(t, o)
	t.Cleanup(hold.release) // before the server stops (cleanups run last first)
	c := s.Client(t)
	boxes := []string{"ann@example.com", "carol@example.com"}

	_, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"update pricing","approvers":["ann@example.com","carol@example.com"]}`)
	id := run["id"].(string)
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never suspended the run")
	}
	run = waitAs(t, s, c, "alice", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	for _, box := range boxes {
		require.Empty(t, s.Links(box), "nobody is mailed yet")
	}

	clock.Advance(runs.FirstNoticeGrace)
	sum, err := s.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, sum.MailRecovered, "%+v", sum)
	for _, box := range boxes {
		assert.Len(t, s.Links(box), 1, "the sweep mails %s", box)
	}

	// The worker comes back: its time to mail is over, and the mail is on
	// record already.
	hold.release()
	s.App.Dispatcher.Wait()
	for _, box := range boxes {
		assert.Len(t, s.Links(box), 1, "one mail to %s", box)
	}
	var notified []map[string]any
	for _, e := range eventsOf(t, s, c, "alice", id) {
		if e["type"] == runs.EventNotified {
			notified = append(notified, e)
		}
	}
	require.Len(t, notified, 1, "one notified event")
	assert.Equal(t, "purge", notified[0]["actor"])
	data, err := json.Marshal(notified[0]["data"])
	require.NoError(t, err)
	assert.JSONEq(t, `{"suspension_id":"`+run["pending"].(map[string]any)["suspension_id"].(string)+`","channel":"email","recovered":true,"links":2}`, string(data))

	// carol's link decides; the run completes.
	link := s.Links("carol@example.com")[0]
	status, _, _ := call(t, s, c, "POST", linkPath(t, link), "", formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, 200, status)
	waitAs(t, s, c, "alice", id, "COMPLETED")
}

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldMailOut is the outbox's printer (serve's mail output), which the
// outbox mailer writes to after the mail's file and before the worker
// records the mail: each write waits for a release (at most 10 s), so a
// decision can be made between the mail and its record every time.
type heldMailOut struct {
	release chan struct{}
	buf     syncBuffer
}

func (h *heldMailOut) Write(p []byte) (int, error) {
	select {
	case <-h.release:
	case <-time.After(10 * time.Second):
	}
	return h.buf.Write(p)
}

// TestServeRecordsTheApprovalMailOfARunApprovedAtOnce is the outside
// tester's repro through `serve`: a run with approvers bob and
// ops@example.com (who is mailed a link) waits, and bob approves at once,
// before the worker has recorded the mail it sent (8 runs in 15 for the
// tester; here every time). The trail records the mail once, for its
// suspension, and the run completes.
func TestServeRecordsTheApprovalMailOfARunApprovedAtOnce(t *testing.T) {
	dir := t.TempDir()
	out := &heldMailOut{release: make(chan struct{})}
	logs := &syncBuffer{}
	s, err := startLocal(context.Background(), serveOptions{
		addr: "127.0.0.1:0", dir: dir, tokens: linkTokens, mailOut: out, logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		close(out.release)
		assert.NoError(t, s.Close())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	alice := &apiClient{t: t, base: s.URL, token: linkAliceToken}
	bob := &apiClient{t: t, base: s.URL, token: linkBobToken}
	for range 3 {
		var run runJSON
		alice.do(http.MethodPost, "/runs", map[string]any{"prompt": "Update the pricing page.", "approvers": []string{"bob", linkApprover}}, http.StatusAccepted, &run)
		run = alice.waitStatus(run.ID, "WAITING_FOR_APPROVAL")
		require.NotNil(t, run.Pending)
		bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
		out.release <- struct{}{} // the mail's write returns; the worker records it
		alice.waitStatus(run.ID, "COMPLETED")
		alice.waitEvent(run.ID, "notified")
		notified := eventsOf(alice.events(run.ID), "notified")
		require.Len(t, notified, 1, "the mail is on record once")
		var d struct {
			SuspensionID string `json:"suspension_id"`
			Sent         int    `json:"sent"`
		}
		require.NoError(t, json.Unmarshal(notified[0].Data, &d))
		assert.Equal(t, run.Pending.SuspensionID, d.SuspensionID)
		assert.Equal(t, 1, d.Sent)
		mails, err := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
		require.NoError(t, err)
		assert.NotEmpty(t, mails, "the mail went out")
	}
	assert.NotContains(t, logs.String(), "record notification", "no notification went unrecorded")
}

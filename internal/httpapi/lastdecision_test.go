package httpapi_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestARetriedDecisionIsToldWhoDecided: a decider whose 202 was lost and
// who sends the decision again gets 409; its message said only that
// nothing waits for a decision, and now says who decided the run's last
// turn, how and when (tester helper-112 P3), to whoever may read the run.
func TestARetriedDecisionIsToldWhoDecided(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	body := `{"turn_digest":"` + r.TurnDigest + `","action":"approve"}`
	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, body))
	require.Equal(t, 202, status, out)
	decided := f.run(r.ID)
	want := "(its last turn was decided by " + bob + " via api at " + decided.DecidedAt.UTC().Format(runs.InstantLayout) + ")"

	// Sent again before the worker went on (RESUMING), and after the run ended.
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", bob, body))
	assert.Equal(t, 409, status, out)
	msg, _ := out["error"].(map[string]any)["message"].(string)
	assert.Equal(t, "run "+r.ID+" is RESUMING, not waiting for approval "+want, msg)
	f.drain()
	require.Equal(t, runs.StatusCompleted, f.run(r.ID).Status)
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", bob, body))
	assert.Equal(t, 409, status, out)
	assert.Equal(t, "conflict", out["error"].(map[string]any)["code"], "the error code stays")
	msg, _ = out["error"].(map[string]any)["message"].(string)
	assert.Equal(t, "run "+r.ID+" is COMPLETED; nothing waits for a decision "+want, msg)

	// Someone who may not read the run learns nothing of it.
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", carol, body))
	assert.Equal(t, 403, status, out)
	assert.NotContains(t, out["error"].(map[string]any)["message"], bob)
}

// TestARetriedVoteIsToldWhoseVoteDecided: under a quorum the message names
// the vote that completed the turn.
func TestARetriedVoteIsToldWhoseVoteDecided(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"update pricing","approvers":["`+bob+`","`+carol+`"],"required_approvals":2}`))
	require.Equal(t, 202, status, out)
	f.drain()
	r := f.run(out["id"].(string))
	require.Equal(t, runs.StatusWaiting, r.Status)
	body := `{"turn_digest":"` + r.TurnDigest + `","action":"approve"}`
	for _, who := range []string{bob, carol} {
		status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", who, body))
		require.Equal(t, 202, status, out)
	}
	f.drain()
	done := f.run(r.ID)
	require.Equal(t, runs.StatusCompleted, done.Status)
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", bob, body))
	assert.Equal(t, 409, status, out)
	msg, _ := out["error"].(map[string]any)["message"].(string)
	assert.True(t, strings.HasSuffix(msg, "nothing waits for a decision (its last turn was decided by votes, the last cast by "+carol+" via api at "+
		done.DecidedAt.UTC().Format(runs.InstantLayout)+")"), msg)
}

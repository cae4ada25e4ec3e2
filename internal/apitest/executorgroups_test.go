package apitest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
)

// executorDirectory is the directory of the group tool-executor tests
// (alice, who starts the runs, is not in it):
// the ops group (bob, carol) executes the client tools; dave is no member;
// ci-bot is a service account (never a member of a group).
const executorDirectory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]}
 ],
 "groups": [
  {"name": "ops",     "members": ["bob", "carol"], "tools": ["read_*"]},
  {"name": "finance", "members": ["ann"]}
 ],
 "service_accounts": [{"id": "ci", "aliases": ["ci-bot"]}]
}`

// lookupOnce calls the client read lookup_stock (handed over at once, no
// approval), then ends.
const lookupOnce = `{"turns":[
 {"content":[{"type":"tool_use","id":"c1","name":"lookup_stock","input":{"sku":"X-1"}}]},
 {"content":[{"type":"text","text":"done"}]}]}`

var executorPrincipals = []string{"alice", "ann", "bob", "bob@example.com", "carol", "dave", "ci-bot"}

// TestClientToolsGroupExecutors: a run naming "group:ops" in
// tool_executors lets any member of the group submit its results (by any
// alias), read it and see the group on the tool_results event; a
// non-member, a service account and an approver get 403 and change
// nothing; an unknown group, one named twice, or one person named twice
// by two aliases (as for approvers) is 422 at start.
func TestClientToolsGroupExecutors(t *testing.T) { runClientToolsGroupExecutors(t, nil) }

func runClientToolsGroupExecutors(t *testing.T, store func(*apitest.Options)) {
	s := startOn(t, store, apitest.Options{Script: lookupOnce, Validator: validator, Principals: executorPrincipals,
		Governance: governance(t, executorDirectory, "")})
	start := func(executors string) (int, map[string]any) {
		return ctCall(t, s, "POST", "/runs", "alice",
			`{"prompt":"look","approvers":["group:finance"],"tool_executors":`+executors+`,"client_tools":`+clientTools+`}`)
	}

	for _, tt := range []struct{ name, executors, msg string }{
		{"an unknown group", `["carol","group:nope"]`, `tool_executors[1] "group:nope": no such group in the directory`},
		{"one person twice, by two aliases", `["dave","dave@example.com"]`, `tool_executors[1] "dave@example.com": the same person as tool_executors[0]`},
		{"a group twice", `["group:ops","group:ops"]`, `tool_executors[1]: "group:ops" is listed twice`},
		{"an empty group name", `["group:"]`, `tool_executors[0]: "group:" names no group`},
	} {
		t.Run("refused at start/"+tt.name, func(t *testing.T) {
			status, out := start(tt.executors)
			assert.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
			assert.Contains(t, errMessage(out), tt.msg)
		})
	}

	status, run := start(`["group:ops"]`)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	id := run["id"].(string)
	run = settle(t, s, id)
	require.Equal(t, "WAITING_FOR_TOOL_RESULTS", run["status"], "%v", run)
	trID := run["tool_results"].(map[string]any)["tool_results_id"].(string)
	good := submission(trID, result("c1", "5 in stock"))

	// Who may read: the members; not a stranger, not a service account.
	for who, want := range map[string]int{"bob": 200, "carol": 200, "dave": 403, "ci-bot": 403} {
		status, out := ctCall(t, s, "GET", "/runs/"+id, who, "")
		assert.Equal(t, want, status, "GET as %s: %v", who, out)
	}

	before := getRun(t, s, id)
	evBefore := eventCount(t, s, id)
	for _, who := range []string{"dave", "ci-bot"} {
		t.Run("refused submission/"+who, func(t *testing.T) {
			status, out := ctCall(t, s, "POST", "/runs/"+id+"/tool-results", who, good)
			assert.Equal(t, http.StatusForbidden, status, "%v", out)
			assert.Contains(t, errMessage(out), "is neither the initiator nor a tool executor of run "+id+", nor now a member of a group it names as tool executors")
			after := getRun(t, s, id)
			assert.Equal(t, before["version"], after["version"], "the row version is unchanged")
			assert.Equal(t, evBefore, eventCount(t, s, id), "no event was written")
		})
	}

	// bob, a member, by another alias than the one his token carries.
	status, out := ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "bob@example.com", good)
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	run = settle(t, s, id)
	assert.Equal(t, "COMPLETED", run["status"], "%v", run)
	ev := toolResultsEvent(t, s, id)
	assert.Equal(t, "bob@example.com", ev.Actor, "the submitter as authenticated")
	var data struct {
		GrantedBy string `json:"granted_by"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	assert.Equal(t, "group:ops", data.GrantedBy, "the entry that let the submitter in")

	evs, err := s.App.Store.Events(t.Context(), id, 0, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, runs.EventRunStarted, evs[0].Type)
	var started struct {
		ToolExecutors []string `json:"tool_executors"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Data, &started))
	assert.Equal(t, []string{"group:ops"}, started.ToolExecutors, "the trail says who was entitled to submit")
}

// TestClientToolsGroupExecutorsMembershipAtSubmission: a group's members
// are read when results are submitted: after a restart with a directory
// from which carol was removed and into which dave was added, carol gets
// 403 and dave may submit, for a run started before.
func TestClientToolsGroupExecutorsMembershipAtSubmission(t *testing.T) {
	runClientToolsGroupExecutorsMembershipAtSubmission(t, nil)
}

func runClientToolsGroupExecutorsMembershipAtSubmission(t *testing.T, store func(*apitest.Options)) {
	first := startOn(t, store, apitest.Options{Script: lookupOnce, Validator: validator, Principals: executorPrincipals,
		Governance: governance(t, executorDirectory, "")})
	status, run := ctCall(t, first, "POST", "/runs", "alice",
		`{"prompt":"look","approvers":["group:finance"],"tool_executors":["group:ops"],"client_tools":`+clientTools+`}`)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	id := run["id"].(string)
	run = settle(t, first, id)
	require.Equal(t, "WAITING_FOR_TOOL_RESULTS", run["status"], "%v", run)
	trID := run["tool_results"].(map[string]any)["tool_results_id"].(string)
	status, _ = ctCall(t, first, "GET", "/runs/"+id, "carol", "")
	require.Equal(t, http.StatusOK, status, "carol is a member at start")
	first.Stop()

	moved := strings.Replace(executorDirectory, `"members": ["bob", "carol"]`, `"members": ["bob", "dave"]`, 1)
	require.NotEqual(t, executorDirectory, moved)
	s := startOn(t, store, apitest.Options{Script: lookupOnce, Validator: validator, Principals: executorPrincipals,
		Governance: governance(t, moved, ""), Dir: first.Dir})
	good := submission(trID, result("c1", "5 in stock"))
	status, out := ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "carol", good)
	assert.Equal(t, http.StatusForbidden, status, "%v", out)
	assert.Contains(t, errMessage(out), "nor now a member of a group it names as tool executors")
	assert.Equal(t, "WAITING_FOR_TOOL_RESULTS", getRun(t, s, id)["status"])

	status, out = ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "dave", good)
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	assert.Equal(t, "COMPLETED", settle(t, s, id)["status"])
	assert.Equal(t, "dave", toolResultsEvent(t, s, id).Actor)
}

func toolResultsEvent(t *testing.T, s *apitest.Server, id string) runs.Event {
	t.Helper()
	evs, err := s.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	for _, e := range evs {
		if e.Type == runs.EventToolResults {
			return e
		}
	}
	t.Fatalf("run %s has no %s event", id, runs.EventToolResults)
	return runs.Event{}
}

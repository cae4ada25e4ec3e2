package apitest_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
)

// splitDirectoryWith is splitDirectory with the deleters given (person ids).
func splitDirectoryWith(deleters ...string) string {
	return strings.Replace(splitDirectory, `{"name": "deleters", "members": ["carol", "dave"]}`,
		`{"name": "deleters", "members": ["`+strings.Join(deleters, `", "`)+`"]}`, 1)
}

// TestSwitchToVotesWhileWaiting: a turn holding a write (the writers'
// call: ann, bob) and a delete (the deleters'), held when ann was a
// deleter too: ann may decide both, so one decision decides the turn and
// only she is asked. The server restarts with ann no longer a deleter
// (carol is): nobody may decide the whole turn now, while each call still
// has deciders of its own. The quorum check switches the turn to per-call
// votes, as a hold under this directory would have held it, records why
// in a deciders_changed event, and asks carol and bob (inbox entries and
// approval mail with their links). Carol's new link decides the delete,
// ann's old link the write: the run completes, each call run once and
// decided by whom the run says. Before the fix the run waited until its
// window closed.
func TestSwitchToVotesWhileWaiting(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	runSwitchToVotesWhileWaiting(t, func(o *apitest.Options) { o.Rows, o.States = db, db })
}

func runSwitchToVotesWhileWaiting(t *testing.T, store func(*apitest.Options)) {
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	server := func(dir, directory string) *apitest.Server {
		o := apitest.Options{Now: clock.Now, Validator: validator, Script: writeAndDelete, Dir: dir,
			Principals: []string{"frank", "ann", "bob", "carol", "dave"}, Governance: governance(t, directory, splitPolicy)}
		store(&o)
		return apitest.Start(t, o)
	}
	first := server("", splitDirectoryWith("ann", "carol"))
	c := first.Client(t)
	_, run, _ := call(t, first, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"write a, delete pricing","approvers":["group:writers"]}`)
	id := run["id"].(string)
	waitAs(t, first, c, "frank", id, "WAITING_FOR_APPROVAL")
	annLink := linkPath(t, first.WaitLinks(t, "ann@example.com", 1)[0])
	run = notified(t, first, c, "frank", id)
	require.NotEqual(t, true, run["voting"], "ann may decide both calls: one decision decides the turn")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	assert.Empty(t, first.Links("carol@example.com"), "only those who may decide every call are asked")
	first.Stop()

	second := server(first.Dir, splitDirectoryWith("carol"))
	c = second.Client(t)
	inbox := func(who string) int {
		t.Helper()
		_, out, _ := call(t, second, c, "GET", "/approvals", who, "", "")
		list, _ := out["approvals"].([]any)
		return len(list)
	}
	status, out, _ := call(t, second, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`)
	require.Equal(t, http.StatusForbidden, status, "ann may no longer decide the delete, so not the turn: %v", out)
	assert.Zero(t, inbox("carol"), "not asked yet")

	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err := second.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	run = waitAs(t, second, c, "frank", id, "WAITING_FOR_APPROVAL")
	assert.Equal(t, true, run["voting"], "decided call by call now")
	var changed map[string]any
	for _, e := range eventsOf(t, second, c, "frank", id) {
		if e["type"] == runs.EventDecidersChanged {
			changed = e
		}
	}
	require.NotNil(t, changed, "a deciders_changed event")
	assert.Equal(t, "purge", changed["actor"])
	data := changed["data"].(map[string]any)
	assert.Equal(t, true, data["per_call_votes"])
	assert.Contains(t, data["reason"], "nobody may decide every held call under the directory in force")
	assert.Equal(t, "[person:carol person:bob]", fmt.Sprint(data["asked"]))
	assert.Equal(t, float64(2), data["links"])
	for who, want := range map[string]int{"ann": 1, "bob": 1, "carol": 1, "dave": 0} {
		assert.Equal(t, want, inbox(who), "%s's inbox", who)
	}

	carolLink := linkPath(t, second.WaitLinks(t, "carol@example.com", 1)[0])
	second.WaitLinks(t, "bob@example.com", 1)
	mail := strings.NewReplacer("=\r\n", "", "=\n", "").Replace(second.Mail())
	assert.Contains(t, mail, "each call is decided by its own approvers, one approval each")
	_, page := get(t, second, c, "GET", second.URL+carolLink, "")
	assert.Contains(t, page, "<form")
	assert.Contains(t, page, "other approvers decide it")
	browser := &apitest.Caller{URL: second.URL, HTTP: c}
	voted := browser.Call(t, "POST", carolLink, formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, http.StatusOK, voted.Status, "carol's approval by her new link:\n%s", voted.Body)
	waitAs(t, second, c, "frank", id, "WAITING_FOR_APPROVAL")
	assert.Zero(t, inbox("carol"), "carol voted")

	voted = browser.Call(t, "POST", annLink, formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, http.StatusOK, voted.Status, "ann's approval of the write by the link of the hold:\n%s", voted.Body)
	done := waitAs(t, second, c, "frank", id, "COMPLETED")
	byCall := map[string]string{}
	for _, dc := range done["decision"].(map[string]any)["decided_calls"].([]any) {
		dc := dc.(map[string]any)
		byCall[dc["call_id"].(string)] = fmt.Sprint(dc["action"], dc["by"])
	}
	// Named by person (runs.Vote.Name), whichever alias the link carried.
	assert.Equal(t, map[string]string{"toolu_a": "approve[ann]", "toolu_b": "approve[carol]"}, byCall)
	ran := map[string]int{}
	for _, e := range eventsOf(t, second, c, "frank", id) {
		if d, _ := e["data"].(map[string]any); e["type"] == runs.EventToolExecuted {
			ran[d["call_id"].(string)]++
		}
	}
	assert.Equal(t, map[string]int{"toolu_a": 1, "toolu_b": 1}, ran, "each call ran once")
	_, err = os.Stat(filepath.Join(second.Dir, "content", "pages", "pricing.md"))
	assert.True(t, os.IsNotExist(err), "pages/pricing.md deleted: %v", err)
	for _, who := range []string{"ann", "bob", "carol"} {
		assert.Zero(t, inbox(who), "the run left %s's inbox", who)
	}
}

// TestInboxFollowsTheDirectory: an approver the directory no longer lets
// decide any held call (dave may approve reads only now) no longer finds
// the run in GET /approvals after the next quorum check; once the
// directory is fixed, the check after lists it again and dave's link shows
// the form again.
func TestInboxFollowsTheDirectory(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	server := func(dir, daveTools string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Validator: validator, Principals: []string{"ann", "bob", "carol", "dave"},
			Dir: dir, Rows: db, States: db,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}`)),
			Governance: governance(t, financeDirectory(daveTools, "bob", "carol", "dave"), twoOfFinance)})
	}
	first := server("", "")
	code, run := whCall(t, first, "POST", "/runs", "ann", `{"prompt":"Raise the Team plan to 12 EUR","approvers":["group:finance"]}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	daveLink := linkPath(t, first.WaitLinks(t, "dave@example.com", 1)[0])
	first.Stop()

	listed := func(s *apitest.Server, who string) bool {
		t.Helper()
		code, out := whCall(t, s, "GET", "/approvals", who, "")
		require.Equal(t, http.StatusOK, code, "%v", out)
		for _, e := range out["approvals"].([]any) {
			if e.(map[string]any)["run_id"] == id {
				return true
			}
		}
		return false
	}
	check := func(s *apitest.Server) {
		t.Helper()
		clock.Advance(service.DefaultQuorumCheckEvery)
		sum, err := s.App.Sweeper.Sweep(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, sum.DecidersRevised, "%+v", sum)
	}

	gated := server(first.Dir, "read_*")
	require.True(t, listed(gated, "dave"), "listed until the check")
	check(gated)
	assert.False(t, listed(gated, "dave"), "dave may decide nothing: not listed")
	assert.True(t, listed(gated, "bob"))
	assert.True(t, listed(gated, "carol"))
	gated.Stop()

	fixed := server(first.Dir, "")
	check(fixed)
	assert.True(t, listed(fixed, "dave"), "listed again")
	page := fixed.As(t, "").Call(t, "GET", daveLink, "", "")
	assert.Equal(t, http.StatusOK, page.Status)
	assert.Contains(t, string(page.Body), "<form", "dave's link of the hold works again")
	assert.Empty(t, fixed.Links("dave@example.com"), "not mailed again")
}

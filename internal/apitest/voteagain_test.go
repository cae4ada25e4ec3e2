package apitest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
)

// annOptionalDirectory is a directory of bob, carol and frank and, with ann, of
// ann too (aliases ann and ann@example.com).
func annOptionalDirectory(withAnn bool) string {
	ann := ""
	if withAnn {
		ann = `{"id": "ann", "aliases": ["ann@example.com", "ann"]},`
	}
	return `{"version": 1, "persons": [` + ann + `
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
}

// TestOnePersonVotesOnceAcrossADirectoryChange: a run needs 2 of ann, bob
// and carol. ann votes while the directory has no entry for her (her vote
// is counted under her bare principal's key). The server restarts with a
// directory that lists ann as a person; ann, with the very same identity,
// votes again: her key is now person:ann, which no vote was cast under,
// yet she voted: 409, and the run still waits for a second person
// (reviewer helper-91 F1, P0; failed before: 202 and the run completed).
func TestOnePersonVotesOnceAcrossADirectoryChange(t *testing.T) {
	servers, _ := voterServers(t, []string{"frank", "ann", "bob", "carol"})
	server := func(dir string, withAnn bool) *apitest.Server { return servers(dir, annOptionalDirectory(withAnn)) }
	first := server("", false)
	code, run := whCall(t, first, "POST", "/runs", "frank", `{"prompt":"Raise the Team plan","approvers":["ann","bob","carol"],"required_approvals":2}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	c := first.Client(t)
	run = waitAs(t, first, c, "frank", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann", `{"turn_digest":"`+digest+`","action":"approve"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "WAITING_FOR_APPROVAL", out["status"], "one of two")
	first.Stop()

	second := server(first.Dir, true)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann", `{"turn_digest":"`+digest+`","action":"approve"}`)
	assert.Equal(t, http.StatusConflict, code, "ann already voted; a second vote by the same person must not count: %v", out)
	second.App.Dispatcher.Wait()
	c = second.Client(t)
	_, got, _ := call(t, second, c, "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one person's approvals met a quorum of two: %v", got["decision"])
}

// TestQuorumCheckDoesNotAskAVoterAgain: as above, but nobody votes again
// by hand: the sweep's quorum check must not take ann, who voted under her
// bare key, for "person:ann" who may decide and has not voted, and mail
// her a fresh link with the form (reviewer helper-91 F1; failed before).
func TestQuorumCheckDoesNotAskAVoterAgain(t *testing.T) {
	servers, clock := voterServers(t, []string{"frank", "ann", "bob", "carol"})
	server := func(dir string, withAnn bool) *apitest.Server { return servers(dir, annOptionalDirectory(withAnn)) }
	first := server("", false)
	code, run := whCall(t, first, "POST", "/runs", "frank", `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob","carol"],"required_approvals":2}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	c := first.Client(t)
	run = waitAs(t, first, c, "frank", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	annLink := first.WaitLinks(t, "ann@example.com", 1)[0]
	_ = annLink
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann", `{"turn_digest":"`+digest+`","action":"approve"}`)
	// ann authenticates as "ann", which the first directory does not tie
	// to ann@example.com: she is no approver there. Vote by the link instead.
	if code != http.StatusAccepted {
		browser := &apitest.Caller{URL: first.URL, HTTP: c}
		voted := browser.Call(t, "POST", linkPath(t, annLink), formCT, form("digest", digest, "action", "approve"))
		require.Equal(t, http.StatusOK, voted.Status, "%s", voted.Body)
	} else {
		require.Equal(t, "WAITING_FOR_APPROVAL", out["status"])
	}
	first.Stop()

	second := server(first.Dir, true)
	clock.Advance(time.Hour)
	sum, err := second.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	t.Logf("sweep: %+v", sum)
	links := second.Links("ann@example.com")
	assert.Empty(t, links, "ann voted already: the quorum check must not ask her again")
	if len(links) > 0 {
		page := second.As(t, "").Call(t, "GET", linkPath(t, links[0]), "", "")
		assert.NotContains(t, string(page.Body), "<form", "a second vote is offered to ann")
	}
}

// TestApproversThatBecameOnePerson: a run needs 2 of ann@example.com,
// annie and bob, two of whom the directory then makes one person (ann,
// aliases ann@example.com and annie). The stored list names the same
// persons it did: ann once. ann, who voted as ann@example.com, may not vote
// again as annie (409), and bob's vote completes the quorum (outside
// tester helper-94 F1: before, every decision was refused 403, "the run's
// approvers no longer resolve", until the deadline).
func TestApproversThatBecameOnePerson(t *testing.T) {
	servers, _ := voterServers(t, []string{"frank", "ann@example.com", "annie", "bob"})
	server := func(dir string, withAnn bool) *apitest.Server {
		return servers(dir, strings.Replace(annOptionalDirectory(withAnn), `"ann@example.com", "ann"`, `"ann@example.com", "annie"`, 1))
	}
	first := server("", false)
	code, run := whCall(t, first, "POST", "/runs", "frank", `{"prompt":"Raise the Team plan","approvers":["ann@example.com","annie","bob"],"required_approvals":2}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	c := first.Client(t)
	run = waitAs(t, first, c, "frank", id, "WAITING_FOR_APPROVAL")
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	approve := `{"turn_digest":"` + digest + `","action":"approve"}`
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, true)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "annie", approve)
	assert.Equal(t, http.StatusConflict, code, "ann voted already, as ann@example.com: %v", out)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "bob may still decide: %v", out)
	second.App.Dispatcher.Wait()
	c = second.Client(t)
	waitAs(t, second, c, "frank", id, "COMPLETED")
}

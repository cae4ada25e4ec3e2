package apitest_test

// Reviewer helper-116's cases of former_ids (persons[].former_ids).

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/service"
)

// TestARecordedRenameKeepsTheInitiatorsRun: former_ids make "votes, runs
// and approval links recorded under an old id stay theirs" (README). alice starts a run
// (approvers bob and carol) as alice@old.example.com; her entry is then
// renamed alice.smith with every alias replaced and former_ids ["alice"].
// Her run stays hers to read and cancel, as it does for four-eyes (it
// was hers for four-eyes alone: helper-116's F1).
func TestARecordedRenameKeepsTheInitiatorsRun(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "alice", "aliases": ["alice@old.example.com"]},` + renameRest + `}`
	after := `{"version": 1, "persons": [
  {"id": "alice.smith", "aliases": ["alice.smith@example.com"], "former_ids": ["alice"]},` + renameRest + `}`
	server, _ := voterServers(t, []string{"frank", "alice@old.example.com", "alice.smith@example.com", "bob", "carol"})
	first := server("", before)
	id, _ := heldForVotesBy(t, first, "alice@old.example.com", `{"prompt":"Raise the Team plan","approvers":["bob","carol"],"required_approvals":2}`)
	first.Stop()

	second := server(first.Dir, after)
	c := second.Client(t)
	status, out, _ := call(t, second, c, "GET", "/runs/"+id, "alice.smith@example.com", "", "")
	assert.Equal(t, http.StatusOK, status, "the run alice started is alice.smith's (README: runs recorded under an old id stay theirs): %v", out)
	status, out, _ = call(t, second, c, "POST", "/runs/"+id+"/cancel", "alice.smith@example.com", jsonCT, `{}`)
	assert.Equal(t, http.StatusOK, status, "and she may cancel it: %v", out)
}

// TestAMergedLinkOfTheInitiatorDoesNotDecide: two entries of one human, alice (who starts a four-eyes
// run) and asmith (who is mailed a link to it). They are merged into
// alice.smith, former_ids ["alice", "asmith"], keeping asmith's address.
// asmith's link now passes the link check (it is alice.smith's), but it
// must neither show the form nor decide: alice.smith started the run.
func TestAMergedLinkOfTheInitiatorDoesNotDecide(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "alice",  "aliases": ["alice@old.example.com"]},
  {"id": "asmith", "aliases": ["asmith@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["alice", "asmith", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "alice.smith", "aliases": ["asmith@example.com"], "former_ids": ["alice", "asmith"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["alice.smith", "bob", "carol"]}]}`
	server, clock := voterServers(t, []string{"frank", "alice@old.example.com", "asmith@example.com", "bob", "carol"})
	first := server("", before)
	id, approve := heldForVotesBy(t, first, "alice@old.example.com", `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2,"four_eyes":true}`)
	link := linkPath(t, first.WaitLinks(t, "asmith@example.com", 1)[0])
	first.Stop()

	second := server(first.Dir, after)
	c := second.Client(t)
	p := second.As(t, "").Call(t, "GET", link, "", "")
	assert.Equal(t, http.StatusForbidden, p.Status, "%s", p.Body)
	assert.NotContains(t, string(p.Body), "<form")
	digest := strings.TrimSuffix(strings.TrimPrefix(approve, `{"turn_digest":"`), `","action":"approve"}`)
	status, _, _ := call(t, second, c, "POST", link, "", formCT, form("digest", digest, "action", "approve"))
	assert.Equal(t, http.StatusForbidden, status, "the initiator's merged link decides")
	code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	clock.Advance(service.DefaultQuorumCheckEvery)
	sweep(t, second)
	_, got, _ := call(t, second, c, "GET", "/runs/"+id, "bob", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "%v", got["decision"])
	assert.Empty(t, second.Links("asmith@example.com"), "the initiator is not asked")
}

// TestWhoeverHoldsTheInitiatorsIdNowDoesNotGetTheirRun: access follows a
// rename the directory records (former_ids), never the id itself: after
// alice's entry is dropped and a new person is given the id alice, the
// run the first alice started is not the new alice's to read or cancel
// (four-eyes, which refuses, takes the other side: Run.initiatorCovers).
func TestWhoeverHoldsTheInitiatorsIdNowDoesNotGetTheirRun(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "alice", "aliases": ["alice@old.example.com"]},` + renameRest + `}`
	after := `{"version": 1, "persons": [
  {"id": "alice", "aliases": ["alice.other@example.com"]},` + renameRest + `}`
	server, _ := voterServers(t, []string{"frank", "alice@old.example.com", "alice.other@example.com", "bob", "carol"})
	first := server("", before)
	id, _ := heldForVotesBy(t, first, "alice@old.example.com", `{"prompt":"Raise the Team plan","approvers":["bob","carol"],"required_approvals":2}`)
	first.Stop()

	second := server(first.Dir, after)
	c := second.Client(t)
	status, out, _ := call(t, second, c, "GET", "/runs/"+id, "alice.other@example.com", "", "")
	assert.Equal(t, http.StatusForbidden, status, "%v", out)
	status, out, _ = call(t, second, c, "POST", "/runs/"+id+"/cancel", "alice.other@example.com", jsonCT, `{}`)
	assert.Equal(t, http.StatusForbidden, status, "%v", out)
}

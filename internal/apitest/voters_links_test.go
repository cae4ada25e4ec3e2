package apitest_test

// Reviewer helper-99's repros (review of 202e206 and 68ffa16): votes and
// four-eyes across directory changes that keep a link to the person (an
// id, or an alias a vote or the run kept). Each failed on c753fc7.

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
)

// heldForVotesBy is heldForVotes with the run started by who.
func heldForVotesBy(t *testing.T, s *apitest.Server, who, body string) (id, approve string) {
	t.Helper()
	code, run := whCall(t, s, "POST", "/runs", who, body)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id = run["id"].(string)
	s.App.Dispatcher.Wait()
	run = waitAs(t, s, s.Client(t), who, id, "WAITING_FOR_APPROVAL")
	return id, `{"turn_digest":"` + run["pending"].(map[string]any)["turn_digest"].(string) + `","action":"approve"}`
}

const renameRest = `
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]`

// R1 (P0, a regression of 202e206): ann keeps her id and her group, and the
// company moves her to a new mail domain (her entry's aliases replaced:
// ann@old.example.com -> ann@new.example.com). Her entry no longer holds
// the alias her vote kept, so 202e206's Vote.personHeld was false and the vote was
// "whoever ann@old.example.com is now" (nobody): ann votes again as
// ann@new.example.com, and one human meets a quorum of two. On f5fd354
// (before 202e206) the second vote is 409.
func TestAPersonWhoseAliasesAllChangedVotesOnce(t *testing.T) {
	dir := func(annAlias string) string {
		return `{"version": 1, "persons": [
  {"id": "ann", "aliases": ["` + annAlias + `"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["ann", "bob", "carol"]}]}`
	}
	server, _ := voterServers(t, []string{"frank", "ann@old.example.com", "ann@new.example.com", "bob", "carol"})
	first := server("", dir("ann@old.example.com"))
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann@old.example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, dir("ann@new.example.com"))
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@new.example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "person ann (same id, same group) voted already: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: deciders %v", got["deciders"])
}

// R2 (P0, regression of 202e206): ann (ann@example.com, ann-ci) votes as
// ann-ci. The directory then renames her entry asmith and retires ann-ci
// (a CI credential rotated). No person holds ann-ci; the vote stands for
// bare ann-ci only (former aliases held by a person are left out since
// 202e206), so asmith votes again. On f5fd354 (keys included
// KeyOf(every kept alias)) the second vote is 409.
func TestARenamedPersonWhoseVotedAliasWasRetiredVotesOnce(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "ann", "aliases": ["ann@example.com", "ann-ci"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["ann", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "asmith", "aliases": ["ann@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["asmith", "bob", "carol"]}]}`
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann-ci", "bob", "carol"})
	first := server("", before)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, after)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann (now asmith) voted already as ann-ci: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: deciders %v", got["deciders"])
}

// R3 (P0, four-eyes bypass; not a regression): frank (frank@example.com,
// frank-ci) starts a four-eyes run as frank-ci, needing 2 of group eng
// (frank, bob, carol). The directory then moves frank-ci to a service
// account (where a CI role belongs). The run keeps no trace of the
// initiator's person (a vote keeps its voter's keys; the run does not
// keep the initiator's), so under the directory in force the initiator is
// service:ci and frank approves his own run: frank + bob meet the quorum.
func TestFourEyesFollowsTheInitiatorWhenTheirAliasMovesAway(t *testing.T) {
	dir := func(frankAliases, services string) string {
		return fmt.Sprintf(`{"version": 1, "persons": [
  {"id": "frank", "aliases": [%s]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}],
  "groups": [{"name": "eng", "members": ["frank", "bob", "carol"]}]%s}`, frankAliases, services)
	}
	server, _ := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	first := server("", dir(`"frank@example.com", "frank", "frank-ci"`, ""))
	id, approve := heldForVotesBy(t, first, "frank-ci", `{"prompt":"Raise the Team plan","approvers":["group:eng"],"required_approvals":2,"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank", approve)
	require.Equal(t, http.StatusForbidden, code, "four-eyes holds under the first directory: %v", out)
	first.Stop()

	second := server(first.Dir, dir(`"frank@example.com", "frank"`, `, "service_accounts": [{"id": "ci", "aliases": ["frank-ci"]}]`))
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "frank", approve)
	assert.Equal(t, http.StatusForbidden, code, "frank started this run (as frank-ci, then his alias): %v", out)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "bob", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "the initiator's own approval met a four-eyes quorum: deciders %v", got["deciders"])
}

// R3b: the same bypass for a run one decision decides (no votes at all):
// frank-ci taken out of frank's entry (dropped, not moved), and frank
// alone approves his own four-eyes run.
func TestFourEyesFollowsTheInitiatorWhenTheirAliasIsDropped(t *testing.T) {
	dir := func(frankAliases string) string {
		return `{"version": 1, "persons": [
  {"id": "frank", "aliases": [` + frankAliases + `]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]}],
  "groups": [{"name": "eng", "members": ["frank", "bob"]}]}`
	}
	server, _ := voterServers(t, []string{"frank", "frank-ci", "bob"})
	first := server("", dir(`"frank@example.com", "frank", "frank-ci"`))
	id, approve := heldForVotesBy(t, first, "frank-ci", `{"prompt":"Raise the Team plan","approvers":["group:eng"],"four_eyes":true}`)
	first.Stop()

	second := server(first.Dir, dir(`"frank@example.com", "frank"`))
	code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "frank", approve)
	assert.Equal(t, http.StatusForbidden, code, "frank started this four-eyes run: %v", out)
}

// R4 (documented rule, N3; shown because it is one human counting twice):
// ann (ann@example.com, ann-ci) votes as ann-ci on a run needing 2 of
// ann@example.com, bob, carol. The directory takes ann@example.com out of
// her entry (it stays a direct approver entry, now a bare principal). The
// vote stays person:ann's (her entry still holds ann-ci), and the mailbox
// ann@example.com, read by the same human, votes again: 2 of 2.
func TestAnAliasTakenOutOfAnEntryStillCarriesTheVote(t *testing.T) {
	dir := func(annAliases string) string {
		return `{"version": 1, "persons": [
  {"id": "ann", "aliases": [` + annAliases + `]},` + renameRest + `}`
	}
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann-ci", "bob", "carol"})
	first := server("", dir(`"ann@example.com", "ann-ci"`))
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob","carol"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, dir(`"ann-ci"`))
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann@example.com was ann's when she voted, and is no one else's now: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one credential-holder met a quorum of two: deciders %v", got["deciders"])
}

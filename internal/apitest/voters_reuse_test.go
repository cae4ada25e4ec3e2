package apitest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestARenamedPersonsIDGivenToAnotherCarriesNoVote (reviewer helper-98 M1): ann
// (ann@example.com, ann-ci) votes as ann-ci on a run needing 2 of
// ann@example.com, bob, carol. The directory then renames her entry to
// asmith (same aliases) and gives the freed id "ann" to a new hire
// (annlee@example.com). The entry "ann" holds none of the vote's aliases,
// so the vote is asmith's: her second vote, as ann@example.com, is 409,
// and the new "ann" may vote (failed before: 202, and one human met a
// quorum of two).
func TestARenamedPersonsIDGivenToAnotherCarriesNoVote(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann-ci"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "asmith", "aliases": ["ann@example.com", "ann-ci"]},
  {"id": "ann",    "aliases": ["annlee@example.com"]},
  {"id": "bob",    "aliases": ["bob@example.com", "bob"]},
  {"id": "carol",  "aliases": ["carol@example.com", "carol"]},
  {"id": "frank",  "aliases": ["frank@example.com", "frank"]}]}`
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann-ci", "annlee@example.com", "bob", "carol"})
	first := server("", before)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob","carol"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, after)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann (now asmith) voted already as ann-ci: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: %v", got["decision"])
}

// TestADepartedPersonsAliasPassedOnCarriesTheVote: ann (ann@example.com,
// oncall) approves, as ann@example.com, a run needing 2 of ann@example.com
// and bob@example.com. ann's entry is then dropped and the on-call alias
// passes to bob. What the vote kept cannot tell this from ann renamed bob
// (TestARenamedPersonWhoseVotedAliasWasRetiredVotesOnce): the rule takes
// the safe side, and bob counts as having voted (409); the run waits for
// another approver. Had ann's entry stayed, bob could vote
// (TestAnAliasPassedOnDoesNotCarryAVote).
func TestADepartedPersonsAliasPassedOnCarriesTheVote(t *testing.T) {
	annOncall := `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "oncall"]},
  {"id": "bob",   "aliases": ["bob@example.com"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	annGone := `{"version": 1, "persons": [
  {"id": "bob",   "aliases": ["bob@example.com", "oncall"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "oncall", "bob@example.com"})
	first := server("", annOncall)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob@example.com"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, annGone)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "bob holds an alias ann's vote kept, and ann's entry is gone: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"])
}

// TestFourEyesCountsUnderTheDirectoryInForce: a four-eyes run of frank's
// needs 2 of frank-ci, bob and carol. frank-ci, which no entry names, votes;
// the directory then makes frank-ci one of frank's aliases. Under four-eyes
// the initiator's person decides nothing, so that vote approves nothing
// now: bob's approval is one of two, and carol's completes the quorum
// (reviewer helper-98 M3; failed before: bob's completed it).
func TestFourEyesCountsUnderTheDirectoryInForce(t *testing.T) {
	dir := func(frankAliases string) string {
		return `{"version": 1, "persons": [
  {"id": "frank", "aliases": [` + frankAliases + `]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}]}`
	}
	server, _ := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	first := server("", dir(`"frank@example.com", "frank"`))
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["frank-ci","bob","carol"],"required_approvals":2,"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "frank-ci is no alias of frank's yet: %v", out)
	first.Stop()

	second := server(first.Dir, dir(`"frank@example.com", "frank", "frank-ci"`))
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "bob", "", "")
	require.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "the initiator's own approval met a four-eyes quorum: %v", got["decision"])
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "carol", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.App.Dispatcher.Wait()
	waitAs(t, second, second.Client(t), "bob", id, "COMPLETED")
}

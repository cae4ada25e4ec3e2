package apitest_test

// Reviewer helper-103's repros (review of 510a07b): a rename and an id
// and alias handed to someone new at once. Each failed on 510a07b.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The story: ann (Ann Smith) has the id "ann" and two aliases, the short
// ann@example.com and ann.smith@example.com. A new hire, Ann Lee, is
// given the id "ann" and the short mail; Ann Smith is renamed asmith and
// keeps ann.smith@example.com.
const (
	annBefore = `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann.smith@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["ann", "bob", "carol"]}]}`
	annAfter = `{"version": 1, "persons": [
  {"id": "asmith", "aliases": ["ann.smith@example.com"]},
  {"id": "ann",    "aliases": ["ann@example.com", "ann.lee@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["asmith", "ann", "bob", "carol"]}]}`
)

// P0-A: Ann Smith votes as ann.smith@example.com; after the change she
// votes again with the very same credential. On 510a07b Vote.keys took
// its personHeld branch for her first vote (the entry "ann" still holds
// ann@example.com, an alias the vote kept), so it stands for person:ann
// (Ann Lee) only, not for asmith, whom the principal it was cast as is
// now: one credential meets a quorum of two.
func TestOneCredentialVotesOnceAfterARenameAndAnIDReuse(t *testing.T) {
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann.smith@example.com", "ann.lee@example.com", "bob", "carol"})
	first := server("", annBefore)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann.smith@example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, annAfter)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann.smith@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann.smith@example.com voted already: %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one credential met a quorum of two: deciders %v", got["deciders"])
}

// P0-B: four-eyes. Ann Smith starts a four-eyes run as ann@example.com
// (one decision decides it). After the change she approves it herself as
// ann.smith@example.com: identity.MayDecide compares her with the
// principal ann@example.com (now Ann Lee), and on 510a07b
// Run.initiatorCovers, in its personHeld branch, stood for person:ann only.
func TestFourEyesHoldsAfterARenameAndAnIDReuse(t *testing.T) {
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann.smith@example.com", "ann.lee@example.com", "bob", "carol"})
	first := server("", annBefore)
	id, approve := heldForVotesBy(t, first, "ann@example.com", `{"prompt":"Raise the Team plan","approvers":["group:finance"],"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann.smith@example.com", approve)
	require.Equal(t, http.StatusForbidden, code, "four-eyes holds under the first directory: %v", out)
	first.Stop()

	second := server(first.Dir, annAfter)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann.smith@example.com", approve)
	assert.Equal(t, http.StatusForbidden, code, "Ann Smith started this four-eyes run: %v", out)
}

// P1-C: the tally's four-eyes (TallyIn: sameVoter with Run.initiatorVote)
// is narrower than the decision's (identity.MayDecide also compares with
// the principal the run was started as). ann starts a four-eyes run as
// ann@example.com needing 2 of finance; xavier votes. The directory then
// moves ann@example.com to xavier's entry (ann keeps ann.smith@example.com).
// Under it xavier is refused as the initiator (403), yet his vote still
// counts toward the four-eyes quorum: bob's vote resumes the run.
func TestFourEyesVoidsTheVoteOfOneNowHoldingTheInitiatorsPrincipal(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "ann",    "aliases": ["ann@example.com", "ann.smith@example.com"]},
  {"id": "xavier", "aliases": ["x@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["ann", "xavier", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "ann",    "aliases": ["ann.smith@example.com"]},
  {"id": "xavier", "aliases": ["x@example.com", "ann@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["ann", "xavier", "bob", "carol"]}]}`
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann.smith@example.com", "x@example.com", "bob", "carol"})
	first := server("", before)
	id, approve := heldForVotesBy(t, first, "ann@example.com", `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2,"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "x@example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, after)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "x@example.com", approve)
	assert.Equal(t, http.StatusForbidden, code, "xavier now holds the principal ann started the run as: %v", out)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	assert.Equal(t, "WAITING_FOR_APPROVAL", out["status"], "a vote the API now refuses as the initiator's counted toward four-eyes: %v", out["decision"])
}

// P0-A': as P0-A, but Ann Smith's first vote is cast as the short
// ann@example.com (since handed to Ann Lee with the id) and her second as
// ann.smith@example.com, an alias the first vote kept. Adding the
// principal voted as to a held vote's keys would not close this one: the
// held branch of Vote.keys leaves out every kept alias another person
// holds now.
func TestAKeptAliasVotesOnceAfterARenameAndAnIDReuse(t *testing.T) {
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann.smith@example.com", "ann.lee@example.com", "bob", "carol"})
	first := server("", annBefore)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, annAfter)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann.smith@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann.smith@example.com is an alias the vote kept: %v", out["status"])
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two")
}

// TestReportsNameAVoterAsTheyVoted (tester helper-107 P2-1, reviewer
// helper-110 F1): bob approves a run needing 3 of finance; the directory
// then drops bob's entry, adds robert, and gives the alias bob to carol.
// carol counts as having voted (409: the safe side), and both the 409 and
// her link (her address is still hers) say the vote is bob's, not that
// she voted; robert and dave complete the quorum, and the decision names
// the voters as they voted: bob, robert, dave (before: carol, who was
// refused, was named for bob's vote).
func TestReportsNameAVoterAsTheyVoted(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}],
  "groups": [{"name": "finance", "members": ["bob", "carol", "dave"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "robert", "aliases": ["robert@example.com", "robert"]},
  {"id": "carol",  "aliases": ["carol@example.com", "carol", "bob"]},
  {"id": "dave",   "aliases": ["dave@example.com", "dave"]},
  {"id": "frank",  "aliases": ["frank@example.com", "frank"]}],
  "groups": [{"name": "finance", "members": ["robert", "carol", "dave"]}]}`
	server, _ := voterServers(t, []string{"frank", "bob", "carol", "dave", "robert"})
	first := server("", before)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":3}`)
	carolLink := first.WaitLinks(t, "carol@example.com", 1)[0]
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, after)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "carol", approve)
	require.Equal(t, http.StatusConflict, code, "carol now holds the alias bob voted as: %v", out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "the vote bob cast as bob is linked to them", "the 409 says whose vote")
	p := second.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	assert.Equal(t, http.StatusConflict, p.Status)
	assert.NotContains(t, string(p.Body), "You already voted", "carol never voted: the vote is bob's")
	assert.Contains(t, string(p.Body), "cast by bob stands for you")
	for _, who := range []string{"robert", "dave"} {
		code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", who, approve)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	decision := out["decision"].(map[string]any)
	assert.Equal(t, []any{"bob", "robert", "dave"}, decision["deciders"])
}

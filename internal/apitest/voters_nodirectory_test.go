package apitest_test

// Votes and four-eyes when a deployment drops its directory file: the
// aliases a vote or the run kept still link their principals (reviewer
// helper-106 N1, N2; each failed on 7593ece).

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const annFrankDirectory = `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann-ci"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`

// N1 (reviewer helper-106): the deployment drops its directory file
// (every principal only itself). ann voted as ann-ci (person:ann, keys
// ann@example.com and ann-ci); under no directory her vote stands for
// those principals, so her vote as ann@example.com is 409 (on 7593ece it
// stood for person:ann alone, and one human met a quorum of two).
func TestWithNoDirectoryOnePersonStillVotesOnce(t *testing.T) {
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann-ci", "bob", "carol"})
	first := server("", annFrankDirectory)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob","carol"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, "") // no directory file
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann voted already (as ann-ci, an alias her vote kept): %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: deciders %v", got["deciders"])
}

// N2 (reviewer helper-106): four-eyes under the same change. frank starts
// a four-eyes run as "frank" (his entry also holds frank@example.com, kept
// in InitiatorKeys). With the directory file dropped, frank@example.com is
// still the initiator's (on 7593ece he approved his own run: the kept
// keys were ignored with no directory, and TallyIn skipped four-eyes).
func TestWithNoDirectoryFourEyesStillHolds(t *testing.T) {
	server, _ := voterServers(t, []string{"frank", "frank@example.com", "bob", "carol"})
	first := server("", annFrankDirectory)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["frank@example.com","bob","carol"],"required_approvals":2,"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank@example.com", approve)
	require.Equal(t, http.StatusForbidden, code, "four-eyes holds under the directory: %v", out)
	first.Stop()

	second := server(first.Dir, "") // no directory file
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "frank@example.com", approve)
	assert.Equal(t, http.StatusForbidden, code, "frank@example.com is an alias frank had when he started this four-eyes run: %v", out)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "bob", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "the initiator's own approval met a four-eyes quorum: deciders %v", got["deciders"])
}

package apitest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPersonsMergedCountOnce: ann and annie are two directory entries
// (two persons to the directory of the day) and both approve a run needing
// 3 of ann@example.com, annie, bob, carol. The directory then makes them
// one person (annie's alias moved into ann's entry, annie's entry dropped).
// annie's vote counts for ann now (Vote.current: her entry is gone), so
// bob's approval makes two persons of a quorum of three (reviewer
// helper-97 N1, P0; failed before: the run completed).
func TestPersonsMergedCountOnce(t *testing.T) {
	two := `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com"]},
  {"id": "annie", "aliases": ["annie"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	one := `{"version": 1, "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "annie"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "annie", "bob", "carol"})
	first := server("", two)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","annie","bob","carol"],"required_approvals":3}`)
	for _, who := range []string{"ann@example.com", "annie"} {
		code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", who, approve)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	first.Stop()

	second := server(first.Dir, one)
	code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	t.Logf("bob: %d %v", code, out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "two persons (ann, bob) met a quorum of three: deciders %v", got["deciders"])
}

// TestARenamedPersonVotesOnce: ann (aliases ann@example.com, ann-ci)
// votes as ann-ci on a run needing 2 of ann@example.com, bob, carol. The
// directory then renames her entry (id ann -> asmith, same aliases). Her
// vote counts for asmith now (the directory has no ann), so her second,
// as ann@example.com, is 409 (reviewer helper-97 N2, P0; failed before:
// 202, and one human met a quorum of two).
func TestARenamedPersonVotesOnce(t *testing.T) {
	dir := func(annID string) string {
		return `{"version": 1, "persons": [
  {"id": "` + annID + `", "aliases": ["ann@example.com", "ann-ci"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	}
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "ann-ci", "bob", "carol"})
	first := server("", dir("ann"))
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","bob","carol"],"required_approvals":2}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "ann-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()

	second := server(first.Dir, dir("asmith"))
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "ann@example.com", approve)
	assert.Equal(t, http.StatusConflict, code, "ann voted already (as ann-ci): %v", out)
	second.App.Dispatcher.Wait()
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: deciders %v", got["deciders"])
}

// TestDecidersAfterAMergeArePersons: as TestVotersMadeOnePersonCountOnce (bare
// ann@example.com and annie vote, then are made one person; bob, then carol
// complete a quorum of 3). The decision's deciders are counted as the
// store counted them (DecidedCallsIn under the directory in force): ann
// once, and carol, whose approval completed the quorum (reviewer helper-97
// N4; failed before).
func TestDecidersAfterAMergeArePersons(t *testing.T) {
	base := `{"version": 1, "persons": [%s
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}]}`
	with := func(ann string) string { return strings.Replace(base, "%s", ann, 1) }
	server, _ := voterServers(t, []string{"frank", "ann@example.com", "annie", "bob", "carol"})
	first := server("", with(""))
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["ann@example.com","annie","bob","carol"],"required_approvals":3}`)
	for _, who := range []string{"ann@example.com", "annie"} {
		code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", who, approve)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	first.Stop()
	second := server(first.Dir, with(`{"id": "ann", "aliases": ["ann@example.com", "annie"]},`))
	for _, who := range []string{"bob", "carol"} {
		code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", who, approve)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	second.App.Dispatcher.Wait()
	got := waitAs(t, second, second.Client(t), "frank", id, "COMPLETED")
	dec, _ := got["decision"].(map[string]any)
	t.Logf("deciders %v decided_calls %v", dec["deciders"], dec["decided_calls"])
	assert.Contains(t, dec["deciders"], "carol", "carol's approval completed the quorum")
}

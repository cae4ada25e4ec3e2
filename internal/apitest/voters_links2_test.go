package apitest_test

// Reviewer helper-105's repros (review of 510a07b and 8ba803e): links
// whose address changed hands, and the audit and link page of a vote that
// only resumes a turn the votes decide. Each failed on 8ba803e.

import (
	"net/http"
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
)

// F1 (P0): hana is mailed a link at hana@example.com. The directory then
// gives hana a new address (same id, same group) and hands
// hana@example.com to a new hire, gil. On 8ba803e hana's link, still in
// her mail, voted as gil (the token kept only the address), and her API
// vote as herself then counted apart: one human met a quorum of two. A
// link now keeps who it was sent to, and decides only while its address
// is still theirs.
func TestALinkWhoseAddressChangedHandsNoLongerDecides(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "hana", "aliases": ["hana@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "hana", "aliases": ["hana.new@example.com"]},
  {"id": "gil",  "aliases": ["gil@example.com", "hana@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana", "gil", "bob", "carol"]}]}`
	server, _ := voterServers(t, []string{"frank", "hana@example.com", "hana.new@example.com", "gil@example.com", "bob", "carol"})
	first := server("", before)
	id, _ := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	hanaLink := first.WaitLinks(t, "hana@example.com", 1)[0]
	first.Stop()

	second := server(first.Dir, after)
	c := second.Client(t)
	_, got, _ := call(t, second, c, "GET", "/runs/"+id, "frank", "", "")
	digest := got["pending"].(map[string]any)["turn_digest"].(string)
	status, _, _ := call(t, second, c, "POST", linkPath(t, hanaLink), "", formCT, form("digest", digest, "action", "approve"))
	require.Equal(t, http.StatusForbidden, status, "hana@example.com is gil's now: the link sent to hana no longer decides")
	p := second.As(t, "").Call(t, "GET", linkPath(t, hanaLink), "", "")
	assert.Equal(t, http.StatusForbidden, p.Status, "nor shows the form")
	code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "hana.new@example.com", `{"turn_digest":"`+digest+`","action":"approve"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.App.Dispatcher.Wait()
	_, got, _ = call(t, second, c, "GET", "/runs/"+id, "frank", "", "")
	assert.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "hana alone met a quorum of two: %v", got["votes"])
}

// F2: the audit of a vote that only resumes a turn (R5). As
// TestAVoteThatOnlyResumesATurnIsNotItsDecision: carol's deny only
// resumes the turn the votes approve. The run says decided_by bob, but the
// decision event's actor is carol, and her vote event says action deny.
func TestTheAuditOfAVoteThatOnlyResumesATurn(t *testing.T) {
	dir := func(frankAliases string) string {
		return `{"version": 1, "persons": [
  {"id": "frank", "aliases": [` + frankAliases + `]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}]}`
	}
	without, with := dir(`"frank@example.com", "frank"`), dir(`"frank@example.com", "frank", "frank-ci"`)
	server, _ := voterServers(t, []string{"frank", "frank-ci", "bob", "carol"})
	first := server("", without)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["frank-ci","bob","carol"],"required_approvals":2,"four_eyes":true}`)
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()
	second := server(first.Dir, with)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	second.Stop()

	third := server(first.Dir, without)
	deny := strings.Replace(approve, `"approve"`, `"deny","message":"no"`, 1)
	code, out = whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", deny)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "bob", out["decision"].(map[string]any)["by"])
	evs, err := third.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	for _, e := range evs {
		switch e.Type {
		case runs.EventDecision:
			assert.Equal(t, "bob", e.Actor, "the decision event's actor, as decided_by")
		case runs.EventVote:
			if e.Actor == "carol" {
				assert.NotContains(t, string(e.Data), `"action":"deny"`, "carol's vote chose nothing: %s", e.Data)
			}
		}
	}
}

// F3: the link page of a turn of two calls that the votes decide (R5)
// offers carol per-call choices on both calls (cp.Decidable = mine), but
// the form's POST parses them against r.OpenCalls (none): "Submit
// per-call decisions" is refused 403 "not yours to decide".
func TestAPerCallLinkVoteResumesATurnTheVotesDecide(t *testing.T) {
	dir := func(frankAliases string) string {
		return `{"version": 1, "persons": [
  {"id": "frank", "aliases": [` + frankAliases + `]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]}]}`
	}
	without, with := dir(`"frank@example.com", "frank"`), dir(`"frank@example.com", "frank", "frank-ci"`)
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	server := func(d, directory string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Validator: validator, Principals: []string{"frank", "frank-ci", "bob", "carol"},
			Dir: d, Rows: db, States: db,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/a.md","text":"a"}`), toolUse("w2", "write_document", `{"path":"pages/b.md","text":"b"}`)),
			Governance: governance(t, directory, "")})
	}
	first := server("", without)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["frank-ci","bob","carol"],"required_approvals":2,"four_eyes":true}`)
	carolLink := first.WaitLinks(t, "carol@example.com", 1)[0]
	code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "frank-ci", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	first.Stop()
	second := server(first.Dir, with)
	code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "WAITING_FOR_APPROVAL", out["status"])
	second.Stop()

	third := server(first.Dir, without)
	c := third.Client(t)
	p := third.As(t, "").Call(t, "GET", linkPath(t, carolLink), "", "")
	require.Equal(t, http.StatusOK, p.Status, string(p.Body))
	require.Contains(t, string(p.Body), "call.w2", "the page offers per-call choices")
	_, got, _ := call(t, third, c, "GET", "/runs/"+id, "bob", "", "")
	digest := got["pending"].(map[string]any)["turn_digest"].(string)
	status, body, _ := call(t, third, c, "POST", linkPath(t, carolLink), "", formCT, form("digest", digest, "action", "per_call", "call.w1", "approve", "call.w2", "approve"))
	assert.Equal(t, http.StatusOK, status, "%v", body)
}

package apitest_test

// Reviewer helper-105's repro (review of 510a07b and 8ba803e): a link
// whose address changed hands. It failed on 8ba803e.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestALinkOfARenamedPersonNoLongerDecides (reviewer helper-106 N4): hana
// is mailed a link; the directory then renames her entry hana.b (same
// address, same group). The link is strict: the directory no longer gives
// its address to the subject it was sent to, and a rename looks the same
// to it as the hand-over above, so it answers 403 saying so; hana decides
// through the API.
func TestALinkOfARenamedPersonNoLongerDecides(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "hana", "aliases": ["hana@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "hana.b", "aliases": ["hana@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana.b", "bob", "carol"]}]}`
	server, _ := voterServers(t, []string{"frank", "hana@example.com", "bob", "carol"})
	first := server("", before)
	id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	hanaLink := first.WaitLinks(t, "hana@example.com", 1)[0]
	first.Stop()

	second := server(first.Dir, after)
	p := second.As(t, "").Call(t, "GET", linkPath(t, hanaLink), "", "")
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, string(p.Body), "renamed")
	code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "hana@example.com", approve)
	assert.Equal(t, http.StatusAccepted, code, "%v", out)
}

// TestTheReminderMailsANewLinkToAChangedAddress: hana's address changes
// (same id, same group) while a run waits; her first link no longer
// decides, and the 80% reminder mails a link to her new address, which
// does (README: the reminder mails one to the address the directory gives
// them now).
func TestTheReminderMailsANewLinkToAChangedAddress(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "hana", "aliases": ["hana@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana", "bob", "carol"]}]}`
	after := `{"version": 1, "persons": [
  {"id": "hana", "aliases": ["hana@new.example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["hana", "bob", "carol"]}]}`
	server, clock := voterServers(t, []string{"frank", "hana@example.com", "hana@new.example.com", "bob", "carol"})
	first := server("", before)
	id, _ := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
	oldLink := first.WaitLinks(t, "hana@example.com", 1)[0]
	first.Stop()

	second := server(first.Dir, after)
	p := second.As(t, "").Call(t, "GET", linkPath(t, oldLink), "", "")
	require.Equal(t, http.StatusForbidden, p.Status)
	_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
	deadline, err := time.Parse(time.RFC3339Nano, got["pending"].(map[string]any)["deadline"].(string))
	require.NoError(t, err)
	clock.Advance(deadline.Sub(clock.Now()) - time.Minute) // past the 80% reminder, before the deadline
	sweep(t, second)
	newLink := second.WaitLinks(t, "hana@new.example.com", 1)[0]
	p = second.As(t, "").Call(t, "GET", linkPath(t, newLink), "", "")
	assert.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	assert.Contains(t, string(p.Body), "<form")
}

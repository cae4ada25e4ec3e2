package apitest_test

// A rename the directory records (persons[].former_ids): what was recorded
// under the former id (a vote, a run's initiator, an approval link) is the
// renamed person's, as if it had been recorded under their id now. Without
// the record the safe side's price stays (README, "Votes across a
// directory change").

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/service"
)

// aliceDirectory is the directory of alice (her entry given as JSON),
// bob, carol and frank, with the group finance of alice's id, bob and
// carol.
func aliceDirectory(alice, aliceID string) string {
	return `{"version": 1, "persons": [
  ` + alice + `,` + renameRest + `,
  "groups": [{"name": "finance", "members": ["` + aliceID + `", "bob", "carol"]}]}`
}

// pendingApprovals returns the approvals the run's first held call has so
// far (its approval's progress).
func pendingApprovals(t *testing.T, run map[string]any) any {
	t.Helper()
	pending, _ := run["pending"].(map[string]any)
	calls, _ := pending["calls"].([]any)
	require.NotEmpty(t, calls, "%v", run)
	approval, _ := calls[0].(map[string]any)["approval"].(map[string]any)
	return approval["approvals"]
}

// (a) alice votes as alice@old.example.com on a run needing 2 of finance.
// The directory then renames her alice.smith and every alias she had is
// replaced (alice.smith@example.com). With former_ids: ["alice"] she voted
// already (409) and the quorum counts one vote; bob's vote completes it,
// and the decision names the votes by the id they were cast under. Without
// the record she is, to the directory, someone new, and votes again.
func TestARecordedRenameVotesOnce(t *testing.T) {
	before := aliceDirectory(`{"id": "alice", "aliases": ["alice@old.example.com"]}`, "alice")
	for _, tt := range []struct {
		name     string
		formerID string
		want     int
	}{
		{"renamed with former_ids", `, "former_ids": ["alice"]`, http.StatusConflict},
		{"renamed without (someone new: the documented price)", ``, http.StatusAccepted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			after := aliceDirectory(`{"id": "alice.smith", "aliases": ["alice.smith@example.com"]`+tt.formerID+`}`, "alice.smith")
			server, _ := voterServers(t, []string{"frank", "alice@old.example.com", "alice.smith@example.com", "bob", "carol"})
			first := server("", before)
			id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
			code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "alice@old.example.com", approve)
			require.Equal(t, http.StatusAccepted, code, "%v", out)
			first.Stop()

			second := server(first.Dir, after)
			code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "alice.smith@example.com", approve)
			require.Equal(t, tt.want, code, "%v", out)
			if tt.want != http.StatusConflict {
				return
			}
			assert.Contains(t, out["error"].(map[string]any)["message"], "counts as having voted")
			second.App.Dispatcher.Wait()
			_, got, _ := call(t, second, second.Client(t), "GET", "/runs/"+id, "frank", "", "")
			require.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "one human met a quorum of two: %v", got["votes"])
			assert.Equal(t, float64(1), pendingApprovals(t, got), "one vote counted")
			assert.Equal(t, float64(1), got["votes_needed"])

			code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
			require.Equal(t, http.StatusAccepted, code, "%v", out)
			assert.Equal(t, []any{"alice", "bob"}, out["decision"].(map[string]any)["deciders"], "votes are named by the id they were cast under")
		})
	}
}

// (b) Four-eyes. alice starts a four-eyes run as alice@old.example.com,
// needing 2 of finance. The directory then renames her alice.smith and
// replaces every alias she had (alice.smith@example.com). With
// former_ids: ["alice"] she started the run: she may not decide it (403)
// and the quorum check neither asks her (no link) nor lists the run in her
// inbox. Without the record she is, to the directory, someone new: asked,
// listed, and she decides her own run.
func TestARecordedRenameKeepsFourEyes(t *testing.T) {
	before := aliceDirectory(`{"id": "alice", "aliases": ["alice@old.example.com"]}`, "alice")
	for _, tt := range []struct {
		name     string
		formerID string
		recorded bool
	}{
		{"renamed with former_ids", `, "former_ids": ["alice"]`, true},
		{"renamed without (someone new: the documented price)", ``, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			after := aliceDirectory(`{"id": "alice.smith", "aliases": ["alice.smith@example.com"]`+tt.formerID+`}`, "alice.smith")
			server, clock := voterServers(t, []string{"frank", "alice@old.example.com", "alice.smith@example.com", "bob", "carol"})
			first := server("", before)
			id, approve := heldForVotesBy(t, first, "alice@old.example.com", `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2,"four_eyes":true}`)
			first.Stop()

			second := server(first.Dir, after)
			c := second.Client(t)
			// The quorum check asks whoever may decide and was not asked.
			clock.Advance(service.DefaultQuorumCheckEvery)
			sweep(t, second)
			_, inbox, _ := call(t, second, c, "GET", "/approvals", "alice.smith@example.com", "", "")
			listed, _ := inbox["approvals"].([]any)
			mailed := second.Links("alice.smith@example.com")
			code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "alice.smith@example.com", approve)
			if !tt.recorded {
				assert.NotEmpty(t, mailed, "to the directory, someone new: asked")
				assert.NotEmpty(t, listed, "and listed")
				assert.Equal(t, http.StatusAccepted, code, "and she decides: %v", out)
				return
			}
			assert.Empty(t, mailed, "the quorum check does not ask the initiator")
			assert.Empty(t, listed, "the initiator's inbox does not list her own four-eyes run")
			require.Equal(t, http.StatusForbidden, code, "alice.smith started this four-eyes run: %v", out)
			assert.Contains(t, out["error"].(map[string]any)["message"], "four-eyes")
		})
	}
}

// (b') Four-eyes voids a vote. alice starts a four-eyes run as
// alice@old.example.com, needing 2 of finance. The directory of the day
// also has a second entry for her, asmith (asmith@example.com), which
// four-eyes cannot tell from someone else, and asmith votes. The
// directory is then put right: one entry alice.smith
// (alice.smith@example.com) with former_ids ["alice", "asmith"]. asmith's
// vote is the initiator's and approves nothing: bob's is one of two, and
// carol's completes the run (alice.smith's own is 403). Without the record asmith's vote and bob's complete the run.
func TestARecordedRenameVoidsTheInitiatorsVote(t *testing.T) {
	before := `{"version": 1, "persons": [
  {"id": "alice",  "aliases": ["alice@old.example.com"]},
  {"id": "asmith", "aliases": ["asmith@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["alice", "asmith", "bob", "carol"]}]}`
	for _, tt := range []struct {
		name      string
		formerIDs string
		recorded  bool
	}{
		{"merged with former_ids", `, "former_ids": ["alice", "asmith"]`, true},
		{"merged without (someone new: the documented price)", ``, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			after := aliceDirectory(`{"id": "alice.smith", "aliases": ["alice.smith@example.com"]`+tt.formerIDs+`}`, "alice.smith")
			server, _ := voterServers(t, []string{"frank", "alice@old.example.com", "asmith@example.com", "alice.smith@example.com", "bob", "carol"})
			first := server("", before)
			id, approve := heldForVotesBy(t, first, "alice@old.example.com", `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2,"four_eyes":true}`)
			code, out := whCall(t, first, "POST", "/runs/"+id+"/decision", "asmith@example.com", approve)
			require.Equal(t, http.StatusAccepted, code, "asmith is another person to this directory: %v", out)
			first.Stop()

			second := server(first.Dir, after)
			c := second.Client(t)
			code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
			require.Equal(t, http.StatusAccepted, code, "%v", out)
			second.App.Dispatcher.Wait()
			if !tt.recorded {
				waitAs(t, second, c, "bob", id, "COMPLETED")
				return
			}
			_, got, _ := call(t, second, c, "GET", "/runs/"+id, "bob", "", "")
			require.Equal(t, "WAITING_FOR_APPROVAL", got["status"], "the initiator's own vote (as asmith) met a four-eyes quorum: %v", got["decision"])
			assert.Equal(t, float64(1), pendingApprovals(t, got), "bob's alone counts")
			code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "alice.smith@example.com", approve)
			assert.Equal(t, http.StatusForbidden, code, "%v", out)
			code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "carol", approve)
			require.Equal(t, http.StatusAccepted, code, "%v", out)
			second.App.Dispatcher.Wait()
			waitAs(t, second, c, "bob", id, "COMPLETED")
		})
	}
}

// (c) A link mailed to alice@example.com before her entry was renamed
// alice.smith (same address) still decides, and counts as hers, when the
// entry lists alice among its former ids: she then voted (409 through the
// API; the quorum check lists the run in her inbox under her new id and
// mails her a link, as it asks anyone it did not ask before). Without the
// record it is refused
// (TestALinkOfARenamedPersonNoLongerDecides). A link whose address now
// belongs to someone else stays refused, the rename record or not.
func TestALinkOfARecordedRenameDecides(t *testing.T) {
	before := aliceDirectory(`{"id": "alice", "aliases": ["alice@example.com"]}`, "alice")
	t.Run("the address is still hers", func(t *testing.T) {
		after := aliceDirectory(`{"id": "alice.smith", "aliases": ["alice@example.com"], "former_ids": ["alice"]}`, "alice.smith")
		server, clock := voterServers(t, []string{"frank", "alice@example.com", "bob", "carol"})
		first := server("", before)
		id, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
		link := linkPath(t, first.WaitLinks(t, "alice@example.com", 1)[0])
		first.Stop()

		second := server(first.Dir, after)
		c := second.Client(t)
		// The inbox is indexed by the id of the day: the quorum check
		// lists the run for her under her new id, and mails her a link.
		clock.Advance(service.DefaultQuorumCheckEvery)
		sweep(t, second)
		_, inbox, _ := call(t, second, c, "GET", "/approvals", "alice@example.com", "", "")
		assert.Len(t, inbox["approvals"], 1, "listed for alice.smith: %v", inbox)
		assert.Len(t, second.Links("alice@example.com"), 1, "asked under her new id")
		p := second.As(t, "").Call(t, "GET", link, "", "")
		require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
		assert.Contains(t, string(p.Body), "<form")
		digest := strings.TrimSuffix(strings.TrimPrefix(approve, `{"turn_digest":"`), `","action":"approve"}`)
		status, _, _ := call(t, second, c, "POST", link, "", formCT, form("digest", digest, "action", "approve"))
		require.Equal(t, http.StatusOK, status, "the link decides for alice.smith")
		code, out := whCall(t, second, "POST", "/runs/"+id+"/decision", "alice@example.com", approve)
		assert.Equal(t, http.StatusConflict, code, "she voted through her link: %v", out)
		code, out = whCall(t, second, "POST", "/runs/"+id+"/decision", "bob", approve)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
		assert.Equal(t, []any{"alice.smith", "bob"}, out["decision"].(map[string]any)["deciders"])
	})
	t.Run("the address changed hands", func(t *testing.T) {
		after := `{"version": 1, "persons": [
  {"id": "alice.smith", "aliases": ["alice.smith@example.com"], "former_ids": ["alice"]},
  {"id": "gil", "aliases": ["alice@example.com"]},` + renameRest + `,
  "groups": [{"name": "finance", "members": ["alice.smith", "gil", "bob", "carol"]}]}`
		server, _ := voterServers(t, []string{"frank", "alice@example.com", "alice.smith@example.com", "bob", "carol"})
		first := server("", before)
		_, approve := heldForVotes(t, first, `{"prompt":"Raise the Team plan","approvers":["group:finance"],"required_approvals":2}`)
		link := linkPath(t, first.WaitLinks(t, "alice@example.com", 1)[0])
		first.Stop()

		second := server(first.Dir, after)
		p := second.As(t, "").Call(t, "GET", link, "", "")
		assert.Equal(t, http.StatusForbidden, p.Status, "alice@example.com is gil's now")
		digest := strings.TrimSuffix(strings.TrimPrefix(approve, `{"turn_digest":"`), `","action":"approve"}`)
		status, _, _ := call(t, second, second.Client(t), "POST", link, "", formCT, form("digest", digest, "action", "approve"))
		assert.Equal(t, http.StatusForbidden, status, "nor decides")
	})
}

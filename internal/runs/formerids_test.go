package runs_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// renamedDirectory is the directory after alice (alice@old.example.com)
// was renamed alice.smith and given a new address; with former, her entry
// records the rename (former_ids: ["alice"]).
func renamedDirectory(t *testing.T, former bool) *identity.Directory {
	t.Helper()
	ids := ""
	if former {
		ids = `, "former_ids": ["alice"]`
	}
	d, err := identity.DecodeDirectory([]byte(`{"version":1, "persons":[
		{"id":"alice.smith","aliases":["alice.smith@example.com"]` + ids + `},
		{"id":"bob","aliases":["bob@example.com"]},{"id":"carol","aliases":["carol@example.com"]}],
		"groups":[{"name":"finance","members":["alice.smith","bob","carol"]}]}`))
	require.NoError(t, err)
	return d
}

// TestARecordedRenameLinksVotesAndTheInitiator: what was recorded under
// the id alice (a vote, a run's initiator, a link) is alice.smith's once
// her entry lists alice among its former ids; without the record, she is
// someone new (the safe side's price: README, "Votes across a directory
// change").
func TestARecordedRenameLinksVotesAndTheInitiator(t *testing.T) {
	call := runs.CallSummary{ID: "w", Tool: "write_document", NeedsApproval: true, Rule: "pricing",
		Approval: &loop.ApprovalRule{Approvers: []string{"group:finance"}, RequiredApprovals: 2}}
	aliceVote := runs.Vote{By: "alice@old.example.com", Person: "person:alice", Keys: []string{"email:alice@old.example.com"}, Whole: true, Choices: "a", Via: runs.ViaAPI}
	bobVote := runs.Vote{By: "bob@example.com", Person: "person:bob", Whole: true, Choices: "a", Via: runs.ViaAPI}
	for _, former := range []bool{true, false} {
		dir := renamedDirectory(t, former)
		name := map[bool]string{true: "renamed with former_ids", false: "renamed without"}[former]
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, map[bool]string{true: "person:alice.smith", false: "person:alice"}[former], runs.RecordedKey(dir, "person:alice"))
			assert.Equal(t, "email:alice@old.example.com", runs.RecordedKey(dir, "email:alice@old.example.com"), "a bare principal's key is as recorded")

			// A vote cast as alice.
			r := &runs.Run{ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:finance"},
				VotesNeeded: 2, PendingCalls: []runs.CallSummary{call}, Votes: []runs.Vote{aliceVote}}
			_, voted := r.VoteOf(dir, "person:alice.smith")
			assert.Equal(t, former, voted, "alice.smith voted (as alice)")
			assert.Equal(t, former, runs.VotedKeys(dir, r)["person:alice.smith"])
			r.Votes = append(r.Votes, runs.Vote{By: "alice.smith@example.com", Person: "person:alice.smith", Whole: true, Choices: "a", Via: runs.ViaAPI})
			assert.Equal(t, map[bool]int{true: 1, false: 2}[former], len(r.TallyIn(dir)[0].ApprovedBy), "one person's two votes count once")
			assert.Equal(t, []string{"alice"}, r.TallyIn(dir)[0].ApprovedBy[:1], "the vote is named by the id it was cast under")

			// A four-eyes run alice started.
			r = &runs.Run{ID: "r2", Status: runs.StatusWaiting, Initiator: "alice@old.example.com", InitiatorPerson: "person:alice",
				InitiatorKeys: []string{"email:alice@old.example.com"}, Approvers: []string{"group:finance"}, FourEyes: true,
				VotesNeeded: 2, PendingCalls: []runs.CallSummary{call}}
			err := runs.MayDecide(dir, r, "alice.smith@example.com")
			if former {
				assert.Equal(t, identity.ReasonFourEyes, refusalReason(err), "%v", err)
			} else {
				assert.NoError(t, err, "to the directory, someone new")
			}
			var eligible []string
			for _, e := range runs.Eligible(dir, r, r.PendingCalls) {
				eligible = append(eligible, e.Subject.Key())
			}
			assert.Equal(t, !former, slices.Contains(eligible, "person:alice.smith"), "eligible: %v", eligible)
			r.Votes = []runs.Vote{{By: "alice.smith@example.com", Person: "person:alice.smith", Whole: true, Choices: "a", Via: runs.ViaAPI}, bobVote}
			assert.Equal(t, map[bool]int{true: 1, false: 2}[former], len(r.TallyIn(dir)[0].ApprovedBy), "under four-eyes the initiator's vote approves nothing")
		})
	}
}

package runs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// askedKeys returns the inbox keys of those rev asks.
func askedKeys(rev runs.DeciderRevision) []string {
	var out []string
	for _, e := range rev.Ask {
		out = append(out, e.Subject.Key())
	}
	return out
}

// TestPlanDecidersSwitchesWhenNoOneMayDecideTheWholeTurn: a turn held for
// one decision (erin could decide both calls) whose every such person
// loses the right while it waits, while each call keeps deciders of its
// own, is switched to per-call votes by the rule a hold applies, and
// everyone who may decide a call now is asked; erin, who may decide
// nothing any more, leaves the inbox. When erin keeps one of the calls,
// she stays listed and the others are asked. No change to the directory,
// no change to the row; a check that found a call lost switches nothing
// and asks nobody.
func TestPlanDecidersSwitchesWhenNoOneMayDecideTheWholeTurn(t *testing.T) {
	held, r := splitTurn(t, true)
	require.False(t, runs.HoldsVotes(held, r, r.PendingCalls), "held for one decision")
	r.InboxKeys = []string{"person:erin"}
	assert.True(t, runs.PlanDeciders(held, r, true).IsZero(), "the directory as at the hold changes nothing")

	gone, _ := splitTurn(t, false) // erin is in neither group now
	rev := runs.PlanDeciders(gone, r, true)
	assert.True(t, rev.PerCallVotes)
	assert.Equal(t, []string{"person:ann", "person:carol", "person:bob", "person:dave"}, askedKeys(rev), "as a hold asks them: round robin over the calls")
	assert.Equal(t, "ann@example.com", rev.Ask[0].Mailbox)
	assert.Equal(t, []string{"person:erin"}, rev.Drop)
	assert.Empty(t, rev.Restore)
	assert.Error(t, runs.MayDecide(gone, r, "erin@example.com"), "before the switch nobody may decide the turn")
	assert.Error(t, runs.MayDecide(gone, r, "ann@example.com"))

	lostCheck := runs.PlanDeciders(gone, r, false)
	assert.False(t, lostCheck.PerCallVotes, "a check that found a call lost switches nothing")
	assert.Empty(t, lostCheck.Ask)
	assert.Equal(t, []string{"person:erin"}, lostCheck.Drop)

	writer, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]},
			{"id":"erin","aliases":["erin@example.com"]},{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"writers","members":["ann","bob","erin"]},{"name":"deleters","members":["carol","dave"]}]}`))
	require.NoError(t, err)
	rev = runs.PlanDeciders(writer, r, true)
	assert.True(t, rev.PerCallVotes, "erin left the deleters: nobody may decide both")
	assert.Empty(t, rev.Drop, "erin may still decide the write")
	assert.Equal(t, []string{"person:ann", "person:carol", "person:bob", "person:dave"}, askedKeys(rev))
}

// TestPlanDecidersNeverSwitchesBack: a turn decided by votes, call by
// call, stays so when someone may decide every held call again (erin
// joins both groups): the votes cast stay as they are, and erin, who was
// not asked, is asked (her whole-turn vote decides every call still open).
// A voter is never asked again, and one whose calls are all decided is
// not asked either.
func TestPlanDecidersNeverSwitchesBack(t *testing.T) {
	_, r := splitTurn(t, false)
	r.PerCallVotes = true
	r.InboxKeys = []string{"person:ann", "person:carol", "person:bob", "person:dave"}
	both, _ := splitTurn(t, true)
	rev := runs.PlanDeciders(both, r, true)
	assert.False(t, rev.PerCallVotes)
	assert.Equal(t, []string{"person:erin"}, askedKeys(rev))
	assert.Empty(t, rev.Drop)

	// ann approved the write and left the inbox; bob's one call is decided.
	r.Votes = []runs.Vote{{By: "ann@example.com", Person: "person:ann", Whole: true, Choices: "a--"}}
	r.InboxKeys = []string{"person:carol", "person:bob", "person:dave"}
	rev = runs.PlanDeciders(both, r, true)
	assert.Equal(t, []string{"person:erin"}, askedKeys(rev), "erin may decide the delete still open")
	assert.Equal(t, []string{"person:bob"}, rev.Drop, "bob may decide no call still open")
}

// TestPlanDecidersDropsAndRestores: an approver the directory no longer
// lets decide any held call leaves the inbox; once the directory is fixed
// they are listed again (not asked anew: their link still works). A group
// key (written by a release before inbox keys) is left alone. A nil
// directory or a run that does not wait changes nothing.
func TestPlanDecidersDropsAndRestores(t *testing.T) {
	dir, r := splitTurn(t, false)
	r.PerCallVotes = true
	r.InboxKeys = []string{"person:ann", "person:carol", "person:bob", "person:dave", "group:writers"}
	noDave, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"],"tools":["read_*"]},
			{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"writers","members":["ann","bob"]},{"name":"deleters","members":["carol","dave"]}]}`))
	require.NoError(t, err)
	rev := runs.PlanDeciders(noDave, r, true)
	assert.Equal(t, runs.DeciderRevision{Drop: []string{"person:dave"}}, rev)

	r.InboxKeys = []string{"person:ann", "person:carol", "person:bob", "group:writers"}
	r.InboxDropped = []string{"person:dave"}
	assert.True(t, runs.PlanDeciders(noDave, r, true).IsZero(), "dropped already")
	rev = runs.PlanDeciders(dir, r, true)
	assert.Equal(t, runs.DeciderRevision{Restore: []string{"person:dave"}}, rev, "back, and not asked anew")

	assert.True(t, runs.PlanDeciders(nil, r, true).IsZero())
	r.Status = runs.StatusResuming
	assert.True(t, runs.PlanDeciders(dir, r, true).IsZero())
}

// TestPlanDecidersListsAtMostMaxApprovers: of more persons than a
// suspension lists, the first MaxApprovers (as a hold lists them) are
// asked; one who leaves makes room for the next.
func TestPlanDecidersListsAtMostMaxApprovers(t *testing.T) {
	directory := func(from int) *identity.Directory {
		t.Helper()
		persons, members := []string{`{"id":"frank","aliases":["frank@example.com"]}`}, []string{}
		for i := range runs.MaxApprovers + 5 {
			persons = append(persons, fmt.Sprintf(`{"id":"p%02d","aliases":["p%02d@example.com"]}`, i, i))
			if i >= from {
				members = append(members, fmt.Sprintf(`"p%02d"`, i))
			}
		}
		d, err := identity.DecodeDirectory([]byte(`{"version":1,"persons":[` + strings.Join(persons, ",") +
			`],"groups":[{"name":"writers","members":[` + strings.Join(members, ",") + `]}]}`))
		require.NoError(t, err)
		return d
	}
	r := &runs.Run{ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:writers"}, VotesNeeded: 1,
		PendingCalls: []runs.CallSummary{{ID: "w", Tool: "write_document", NeedsApproval: true}}}
	for i := range runs.MaxApprovers {
		r.InboxKeys = append(r.InboxKeys, fmt.Sprintf("person:p%02d", i))
	}
	assert.True(t, runs.PlanDeciders(directory(0), r, true).IsZero(), "the first MaxApprovers are listed already")
	rev := runs.PlanDeciders(directory(1), r, true)
	assert.Equal(t, []string{"person:p00"}, rev.Drop)
	assert.Equal(t, []string{fmt.Sprintf("person:p%02d", runs.MaxApprovers)}, askedKeys(rev), "the next one takes the place")
}

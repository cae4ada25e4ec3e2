package runs_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// quorumTurn is frank's run waiting on a turn of three calls: w (a write
// two of the writers approve; the writers group lets its members approve
// write_document only), d (a delete two of writers, carol or frank
// approve, four-eyes) and r (a read, no approval).
func quorumTurn(t *testing.T) (*identity.Directory, *runs.Run) {
	t.Helper()
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]},
			{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"writers","members":["ann","bob"],"tools":["write_document"]}]}`))
	require.NoError(t, err)
	r := &runs.Run{
		ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:writers"}, VotesNeeded: 2,
		PendingCalls: []runs.CallSummary{
			{ID: "w", Tool: "write_document", NeedsApproval: true, Rule: "pricing",
				Approval: &loop.ApprovalRule{Approvers: []string{"group:writers"}, RequiredApprovals: 2}},
			{ID: "d", Tool: "delete_document", NeedsApproval: true, Rule: "deletes",
				Approval: &loop.ApprovalRule{Approvers: []string{"group:writers", "carol@example.com", "frank@example.com"}, FourEyes: true}},
			{ID: "r", Tool: "read_document"},
		},
	}
	return dir, r
}

// TestVoteChoicesPerCallEligibility: under a quorum a voter chooses for
// the held calls they may decide (the group's tools gate, four-eyes), all
// of them in a per-call vote, none other.
func TestVoteChoicesPerCallEligibility(t *testing.T) {
	dir, r := quorumTurn(t)
	approve := func(ids ...string) []loop.CallDecision {
		var out []loop.CallDecision
		for _, id := range ids {
			out = append(out, loop.CallDecision{CallID: id, Action: loop.ActionApprove})
		}
		return out
	}
	tests := []struct {
		name    string
		who     string
		d       loop.Decision
		want    []runs.VoteChoice
		code    string   // runs error code, "" for none
		refusal bool     // an identity refusal (403)
		says    []string // fragments of the error
	}{
		{"a whole-turn approval is for the calls the voter may decide: the gate keeps ann off the delete",
			"ann@example.com", loop.Decision{Action: loop.ActionApprove},
			[]runs.VoteChoice{{CallID: "w", Action: loop.ActionApprove}}, "", false, nil},
		{"a whole-turn denial carries its message to each call",
			"carol@example.com", loop.Decision{Action: loop.ActionDeny, Message: "not now"},
			[]runs.VoteChoice{{CallID: "d", Action: loop.ActionDeny, Message: "not now"}}, "", false, nil},
		{"per call: every call the voter may decide, a read's approval left out",
			"ann@example.com", loop.Decision{Calls: append(approve("r"), loop.CallDecision{CallID: "w", Action: loop.ActionDeny, Message: "no"})},
			[]runs.VoteChoice{{CallID: "w", Action: loop.ActionDeny, Message: "no"}}, "", false, nil},
		{"per call: a call the group's tools gate keeps from the voter is 403 naming it",
			"ann@example.com", loop.Decision{Calls: approve("w", "d")}, nil, runs.EForbidden, false,
			[]string{`call "d"`, "may not approve calls of delete_document"}},
		{"per call: a call of another rule's approvers is 403 naming it",
			"carol@example.com", loop.Decision{Calls: approve("w", "d")}, nil, runs.EForbidden, false,
			[]string{`call "w"`, "not an approver"}},
		{"per call: a call the voter may decide left out is 422 naming it",
			"bob@example.com", loop.Decision{Calls: approve("r")}, nil, runs.EInvalid, false,
			[]string{`call "w" (write_document) needs a decision`}},
		{"four-eyes: frank may decide the delete's rule names him, but he started the run; no other call: 403",
			"frank@example.com", loop.Decision{Action: loop.ActionApprove}, nil, "", true, nil},
		{"nobody's approver: 403", "dave@example.com", loop.Decision{Action: loop.ActionApprove}, nil, "", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runs.VoteChoices(dir, r, tt.who, tt.d)
			switch {
			case tt.refusal:
				require.Error(t, err)
				assert.NotEmpty(t, refusalReason(err), "want an identity refusal, got %v", err)
				assert.Error(t, runs.MayDecide(dir, r, tt.who), "MayDecide agrees")
			case tt.code != "":
				require.Error(t, err)
				assert.Equal(t, tt.code, runs.ErrorCode(err), "got %v", err)
				for _, s := range tt.says {
					assert.Contains(t, err.Error(), s)
				}
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				assert.NoError(t, runs.MayDecide(dir, r, tt.who), "a voter who may decide a call may vote")
			}
		})
	}
	// With one decision for the whole turn, ann (who may not decide the
	// delete) may not decide at all, as before.
	one := *r
	one.VotesNeeded = 1
	assert.Equal(t, identity.ReasonToolGate, refusalReason(runs.MayDecide(dir, &one, "ann@example.com")))
}

// TestTallyPerCall: each held call counts its own votes, to its own
// quorum; one denial denies it; a vote recorded before votes were per
// call is on every held call.
func TestTallyPerCall(t *testing.T) {
	_, r := quorumTurn(t)
	progress := func() map[string][3]any {
		out := map[string][3]any{}
		for _, c := range r.Tally() {
			out[c.CallID] = [3]any{len(c.ApprovedBy), c.StillNeeded(), c.DeniedBy}
		}
		return out
	}
	assert.Equal(t, map[string][3]any{"w": {0, 2, ""}, "d": {0, 1, ""}}, progress())
	assert.Equal(t, 2, r.VotesMissing(), "the most any undecided call still needs")

	r.Votes = append(r.Votes, runs.Vote{By: "ann@example.com", Person: "person:ann", Choices: "a--"})
	assert.Equal(t, map[string][3]any{"w": {1, 1, ""}, "d": {0, 1, ""}}, progress())
	assert.Equal(t, 1, r.VotesMissing())

	r.Votes = append(r.Votes, runs.Vote{By: "carol@example.com", Person: "person:carol", Choices: "-d-", Reasons: []string{"keep it"}})
	tally, _ := r.CallTally("d")
	assert.True(t, tally.Denied())
	assert.Equal(t, "keep it", tally.DenyMessage)
	assert.Equal(t, 1, r.VotesMissing(), "w still needs one; d is decided")

	// A later approval does not lift the veto: a decided call takes no
	// more choices.
	r.Votes = append(r.Votes, runs.Vote{By: "bob@example.com", Person: "person:bob", Action: loop.ActionApprove, Choices: "aa-"})
	assert.Equal(t, map[string][3]any{"w": {2, 0, ""}, "d": {0, 0, "carol"}}, progress())
	assert.Equal(t, 0, r.VotesMissing())

	// Nor does a later denial take back an approval that was complete.
	_, first := quorumTurn(t)
	first.Votes = []runs.Vote{
		{By: "ann@example.com", Person: "person:ann", Choices: "a--"},
		{By: "bob@example.com", Person: "person:bob", Choices: "a--"},
		{By: "erin@example.com", Person: "person:erin", Choices: "d--"},
	}
	w, _ := first.CallTally("w")
	assert.True(t, w.Approved(), "approved by the first two; the third's denial came after")
	assert.Equal(t, []string{"ann", "bob"}, w.ApprovedBy, "named by person")

	// An old vote (no Choices) counts for every held call that needs approval.
	_, old := quorumTurn(t)
	old.Votes = []runs.Vote{{By: "ann@example.com", Person: "person:ann", Action: loop.ActionApprove}}
	for _, c := range old.Tally() {
		assert.Equal(t, []string{"ann"}, c.ApprovedBy, "call %s", c.CallID)
	}
	assert.Equal(t, 1, old.VotesMissing())
	// A suspension whose calls carry no quorum but whose row asks for one
	// applies it to every call.
	old.PendingCalls[0].Approval.RequiredApprovals = 0
	old.VotesNeeded = 3
	for _, c := range old.Tally() {
		assert.Equal(t, 3, c.Needed, "call %s", c.CallID)
	}
}

// TestDecidersReachEveryCall: under a quorum everyone who may decide a
// held call is asked, the calls taken round robin, so that the 20 a
// suspension lists include the approvers of a later call even when the
// first call has 20 or more.
func TestDecidersReachEveryCall(t *testing.T) {
	var persons, members []string
	for i := range 20 {
		persons = append(persons, fmt.Sprintf(`{"id":"w%02d","aliases":["w%02d@example.com"]}`, i, i))
		members = append(members, fmt.Sprintf(`"w%02d"`, i))
	}
	persons = append(persons, `{"id":"dave","aliases":["dave@example.com"]}`, `{"id":"frank","aliases":["frank@example.com"]}`)
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,"persons":[` + strings.Join(persons, ",") +
		`],"groups":[{"name":"writers","members":[` + strings.Join(members, ",") + `]}]}`))
	require.NoError(t, err)
	r := &runs.Run{ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:writers"}, VotesNeeded: 2,
		PendingCalls: []runs.CallSummary{
			{ID: "a", Tool: "write_document", NeedsApproval: true, Rule: "docs", Approval: &loop.ApprovalRule{Approvers: []string{"group:writers"}, RequiredApprovals: 2}},
			{ID: "b", Tool: "delete_document", NeedsApproval: true, Rule: "deletes", Approval: &loop.ApprovalRule{Approvers: []string{"dave@example.com"}}},
		}}
	var keys []string
	for _, d := range runs.Deciders(dir, r, r.PendingCalls) {
		keys = append(keys, d.Subject.Key())
	}
	require.Len(t, keys, 21, "every decider, each once")
	assert.Equal(t, "person:dave", keys[1], "the second call's first approver comes second")
}

// TestOnlyOpenCallsTakeVotes: under a quorum a call approved or denied
// for good takes no more choices: a per-call vote need not name it, a
// voter whose calls are all decided has nothing to vote on (EConflict),
// and "who may still vote" (the page, the mail, reminders) lists only
// those who may decide a call still open.
func TestOnlyOpenCallsTakeVotes(t *testing.T) {
	_, r := quorumTurn(t)
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]},
			{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"writers","members":["ann","bob","dave"],"tools":["write_document"]}]}`))
	require.NoError(t, err)
	names := func(es []identity.Eligible) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Subject.Key())
		}
		return out
	}
	assert.ElementsMatch(t, []string{"person:ann", "person:bob", "person:dave", "person:carol"}, names(runs.OpenDeciders(dir, r)))

	// carol denies the delete: it is decided, and she is the only one who
	// could decide it.
	r.Votes = append(r.Votes, runs.Vote{By: "carol@example.com", Person: "person:carol", Choices: "-d-"})
	assert.Equal(t, []string{"w"}, r.OpenCalls(nil, []string{"w", "d"}))
	ch, err := runs.VoteChoices(dir, r, "ann@example.com", loop.Decision{TurnDigest: r.TurnDigest, Calls: []loop.CallDecision{{CallID: "w", Action: loop.ActionApprove}}})
	require.NoError(t, err)
	assert.Equal(t, []runs.VoteChoice{{CallID: "w", Action: loop.ActionApprove}}, ch)

	// ann approves the write: dave may still vote on it.
	r.Votes = append(r.Votes, runs.Vote{By: "ann@example.com", Person: "person:ann", Choices: "a--"})
	_, err = runs.VoteChoices(dir, r, "dave@example.com", loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	// bob approves it too: every call is decided. A row that still waits
	// so (only a directory change since the last vote leaves one: the
	// vote that decides the turn resumes the run) takes dave's vote, which
	// resumes it with what the votes came to (Store.Decide).
	r.Votes = append(r.Votes, runs.Vote{By: "bob@example.com", Person: "person:bob", Choices: "a--"})
	ch, err = runs.VoteChoices(dir, r, "dave@example.com", loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err, "dave's only call is decided, but so is the turn")
	assert.Equal(t, []runs.VoteChoice{{CallID: "w", Action: loop.ActionApprove}}, ch)
	assert.Empty(t, runs.OpenDeciders(dir, r))
	_, still := runs.VoteTally(dir, r)
	assert.Empty(t, still, "nobody may still vote")
}

// splitTurn is frank's run waiting on a turn of two calls that need one
// approval each, a write for the writers (ann, bob) and a delete for the
// deleters (carol, dave), and a read; erin, when both is true, is in
// both groups.
func splitTurn(t *testing.T, both bool) (*identity.Directory, *runs.Run) {
	t.Helper()
	extra := ""
	if both {
		extra = `,"erin"`
	}
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]},
			{"id":"erin","aliases":["erin@example.com"]},{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"writers","members":["ann","bob"` + extra + `]},{"name":"deleters","members":["carol","dave"` + extra + `]}]}`))
	require.NoError(t, err)
	r := &runs.Run{
		ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:writers"}, VotesNeeded: 1,
		PendingCalls: []runs.CallSummary{
			{ID: "w", Tool: "write_document", NeedsApproval: true, Rule: "writes", Approval: &loop.ApprovalRule{Approvers: []string{"group:writers"}}},
			{ID: "d", Tool: "delete_document", NeedsApproval: true, Rule: "deletes", Approval: &loop.ApprovalRule{Approvers: []string{"group:deleters"}}},
			{ID: "r", Tool: "read_document"},
		},
	}
	return dir, r
}

// TestHoldsVotesWhenNoOneMayDecideTheWholeTurn: a turn whose calls need
// one approval each is decided by votes, call by call, exactly when no one
// person may decide every held call; everyone who may decide one is then
// asked, each decides the calls they may decide and no other, and a row
// that no longer says so (a release before PerCallVotes rewrote it before
// any vote) takes one decision again, which only a person who may decide
// every call may make.
func TestHoldsVotesWhenNoOneMayDecideTheWholeTurn(t *testing.T) {
	names := func(es []identity.Eligible) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Subject.Key())
		}
		return out
	}

	dir, r := splitTurn(t, true)
	assert.False(t, runs.HoldsVotes(dir, r, r.PendingCalls), "erin may decide both calls: one decision decides the turn")
	assert.Equal(t, []string{"person:erin"}, names(runs.Deciders(dir, r, r.PendingCalls)))
	assert.False(t, runs.HoldsVotes(dir, r, r.PendingCalls[:1]), "one held call: one decision")
	quorum := slices.Clone(r.PendingCalls)
	quorum[0].Approval = &loop.ApprovalRule{Approvers: []string{"group:writers"}, RequiredApprovals: 2}
	assert.True(t, runs.HoldsVotes(dir, r, quorum), "a quorum votes")

	dir, r = splitTurn(t, false)
	require.True(t, runs.HoldsVotes(dir, r, r.PendingCalls), "nobody may decide both calls")
	assert.Equal(t, []string{"person:ann", "person:carol", "person:bob", "person:dave"}, names(runs.Deciders(dir, r, r.PendingCalls)),
		"everyone who may decide a call, round robin")
	assert.Error(t, runs.MayDecide(dir, r, "ann@example.com"), "without PerCallVotes one decision decides, and ann may not decide the delete")

	r.PerCallVotes = true
	require.True(t, r.Voting())
	for who, want := range map[string][]runs.VoteChoice{
		"ann@example.com":   {{CallID: "w", Action: loop.ActionApprove}},
		"carol@example.com": {{CallID: "d", Action: loop.ActionApprove}},
	} {
		require.NoError(t, runs.MayDecide(dir, r, who))
		got, err := runs.VoteChoices(dir, r, who, loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove})
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s's whole-turn approval is of the call they may decide", who)
	}
	_, err := runs.VoteChoices(dir, r, "ann@example.com", loop.Decision{TurnDigest: r.TurnDigest,
		Calls: []loop.CallDecision{{CallID: "w", Action: loop.ActionApprove}, {CallID: "d", Action: loop.ActionApprove}}})
	assert.Equal(t, runs.EForbidden, runs.ErrorCode(err), "ann's choice on the delete: %v", err)
	// Each call needs one approval: ann may edit the write she decides.
	require.True(t, r.VotesTakeEdits())
	got, err := runs.VoteChoices(dir, r, "ann@example.com", loop.Decision{TurnDigest: r.TurnDigest,
		Calls: []loop.CallDecision{{CallID: "w", Action: loop.ActionEdit, Input: []byte(`{"path":"a"}`)}}})
	require.NoError(t, err)
	assert.Equal(t, []runs.VoteChoice{{CallID: "w", Action: loop.ActionEdit, Input: []byte(`{"path":"a"}`)}}, got)
	quorumRun := *r
	quorumRun.VotesNeeded = 2
	assert.False(t, quorumRun.VotesTakeEdits(), "under a quorum votes take no edits")
	assert.Error(t, runs.MayDecide(dir, r, "frank@example.com"), "frank is nobody's approver")
	assert.ElementsMatch(t, []string{"person:ann", "person:bob", "person:carol", "person:dave"}, names(runs.OpenDeciders(dir, r)))

	// ann approves the write: only the deleters may still vote.
	r.Votes = append(r.Votes, runs.Vote{By: "ann@example.com", Person: "person:ann", Whole: true, Choices: "a--"})
	assert.ElementsMatch(t, []string{"person:carol", "person:dave"}, names(runs.OpenDeciders(dir, r)))
	assert.Equal(t, 1, r.VotesMissing())
	_, err = runs.VoteChoices(dir, r, "bob@example.com", loop.Decision{TurnDigest: r.TurnDigest, Action: loop.ActionApprove})
	assert.Equal(t, runs.EConflict, runs.ErrorCode(err), "bob's only call is approved: %v", err)

	// The flag lost after a vote: the votes still say votes decide.
	r.PerCallVotes = false
	assert.True(t, r.Voting())
	assert.NoError(t, runs.MayDecide(dir, r, "carol@example.com"))
}

// TestVotersAreNamedByPerson: reports name a voter by the directory person
// the vote counted for, whichever alias they voted with, and anyone
// without a directory entry by their canonical principal; Vote.By keeps
// the alias as authenticated.
func TestVotersAreNamedByPerson(t *testing.T) {
	_, r := quorumTurn(t)
	r.Votes = []runs.Vote{
		{By: "ann-ci", Person: "person:ann", Choices: "a--"},
		{By: "Erin@Example.COM", Person: "email:erin@example.com", Choices: "ad-", Reasons: []string{"no"}},
	}
	assert.Equal(t, "ann", r.Votes[0].Name())
	assert.Equal(t, "erin@example.com", r.Votes[1].Name(), "no directory entry: the canonical principal")
	w, _ := r.CallTally("w")
	assert.Equal(t, []string{"ann", "erin@example.com"}, w.ApprovedBy)
	d, _ := r.CallTally("d")
	assert.Equal(t, "erin@example.com", d.DeniedBy)
	assert.Equal(t, []string{"ann", "erin@example.com"}, r.DecidingVoters())
	assert.Equal(t, []runs.DecidedCall{
		{CallID: "w", Tool: "write_document", Action: loop.ActionApprove, By: []string{"ann", "erin@example.com"}},
		{CallID: "d", Tool: "delete_document", Action: loop.ActionDeny, By: []string{"erin@example.com"}},
	}, r.DecidedCalls())
	assert.Equal(t, "ann-ci", r.Votes[0].By, "the vote keeps the alias as authenticated")
}

// TestEditsCountAsApprovals: a vote's edit of a call that needs one
// approval approves it (edited): it counts in the tally, in Approvals and
// among those VoteTally says approved; an 'e' on a call that needs more
// than one approval (which Store.Decide never takes) approves nothing
// (reviewer helper-91 F4, F6).
func TestEditsCountAsApprovals(t *testing.T) {
	dir, r := quorumTurn(t)
	r.Votes = []runs.Vote{{By: "carol@example.com", Person: "person:carol", Choices: "-e-", Edits: []json.RawMessage{json.RawMessage(`{"path":"b"}`)}}}
	d, _ := r.CallTally("d")
	assert.True(t, d.Approved(), "the edit approves d")
	assert.JSONEq(t, `{"path":"b"}`, string(d.Edited))
	assert.Equal(t, 1, r.Approvals())
	voted, _ := runs.VoteTally(dir, r)
	assert.Equal(t, []string{"carol"}, voted)

	r.Votes = []runs.Vote{{By: "ann@example.com", Person: "person:ann", Choices: "e--", Edits: []json.RawMessage{json.RawMessage(`{"path":"a"}`)}}}
	w, _ := r.CallTally("w")
	assert.Empty(t, w.ApprovedBy, "w needs two approvals: an edit of it is no approval")
	assert.Nil(t, w.Edited)
}

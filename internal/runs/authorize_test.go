package runs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func refusalReason(err error) identity.Reason {
	var r *identity.Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	if err != nil {
		return "not a refusal: " + identity.Reason(err.Error())
	}
	return ""
}

func waitingRun(initiator string, fourEyes bool, approvers ...string) *runs.Run {
	return &runs.Run{
		ID: "r1", Status: runs.StatusWaiting, Initiator: initiator, Approvers: approvers, FourEyes: fourEyes,
		PendingCalls: []runs.CallSummary{{ID: "c1", Tool: "write_document", NeedsApproval: true}, {ID: "c2", Tool: "read_document"}},
	}
}

// TestMayDecideFailsClosed: every input MayDecide cannot make sense of
// refuses, and the four-eyes rule comes from the typed field.
func TestMayDecideFailsClosed(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com","arn:aws:iam::123456789012:user/ann"]},{"id":"bob","aliases":["bob@example.com"]}],
		"groups":[{"name":"ops","members":["ann","bob"]}],
		"service_accounts":[{"id":"ci","aliases":["ci-bot"]}]}`))
	require.NoError(t, err)
	noCalls := waitingRun("ann@example.com", true, "bob@example.com")
	noCalls.PendingCalls = []runs.CallSummary{{ID: "c2", Tool: "read_document"}}
	tests := []struct {
		name    string
		dir     *identity.Directory
		run     *runs.Run
		decider string
		want    identity.Reason
	}{
		{"no run", nil, nil, "bob@example.com", identity.ReasonInvalid},
		{"decider not a principal", nil, waitingRun("ann@example.com", false, "bob@example.com"), "bob <bob@example.com>", identity.ReasonInvalid},
		{"empty decider", nil, waitingRun("ann@example.com", false, "bob@example.com"), "", identity.ReasonInvalid},
		{"initiator not a principal", nil, waitingRun("ann smith", false, "bob@example.com"), "bob@example.com", identity.ReasonInvalid},
		{"approvers no longer resolve", dir, waitingRun("ann@example.com", false, "group:gone"), "bob@example.com", identity.ReasonInvalid},
		{"stored approver is not a principal", nil, waitingRun("ann@example.com", false, "bob@@example.com"), "bob@example.com", identity.ReasonInvalid},
		{"no call needs approval", nil, noCalls, "bob@example.com", identity.ReasonInvalid},
		{"four-eyes, case variant", nil, waitingRun("ann@example.com", true, "Ann@Example.com"), "ANN@example.com", identity.ReasonFourEyes},
		{"four-eyes, +tag", nil, waitingRun("ann@example.com", true, "ann+x@example.com"), "ann+x@example.com", identity.ReasonFourEyes},
		{"four-eyes, ARN vs e-mail alias", dir, waitingRun("arn:aws:iam::123456789012:user/ann", true, "ann@example.com"), "ann@example.com", identity.ReasonFourEyes},
		{"four-eyes, assumed-role session vs role", nil, waitingRun("arn:aws:sts::123456789012:assumed-role/Ops/mon", true, "arn:aws:iam::123456789012:role/Ops"), "arn:aws:sts::123456789012:assumed-role/Ops/tue", identity.ReasonFourEyes},
		{"four-eyes, initiator in the group", dir, waitingRun("ann@example.com", true, "group:ops"), "arn:aws:iam::123456789012:user/ann", identity.ReasonFourEyes},
		{"service account", dir, waitingRun("ann@example.com", false, "bob@example.com"), "ci-bot", identity.ReasonServiceAccount},
		{"not named", nil, waitingRun("ann@example.com", false, "bob@example.com"), "carol@example.com", identity.ReasonNotApprover},
		{"without four-eyes the initiator may decide", nil, waitingRun("ann@example.com", false, "Ann@example.com"), "ann@example.com", ""},
		{"another person of the group", dir, waitingRun("ann@example.com", true, "group:ops"), "Bob@Example.com", ""},
		{"an approver by a case variant", nil, waitingRun("ann@example.com", true, "bob@example.com"), "BOB@example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, refusalReason(runs.MayDecide(tt.dir, tt.run, tt.decider)))
		})
	}
}

// TestMayDecideUnderAQuorumSaysWhy: a person who may decide none of the
// held calls of a turn that needs more than one approval is refused for
// the reason that keeps them from a call they are named on (four-eyes,
// the tool gate) before "not an approver" of another; four-eyes only when
// they are the initiator and would otherwise be eligible.
func TestMayDecideUnderAQuorumSaysWhy(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"frank","aliases":["frank@example.com"]}],
		"groups":[{"name":"ops","members":["ann","bob","frank"]}]}`))
	require.NoError(t, err)
	call := func(id string, fourEyes bool, approvers ...string) runs.CallSummary {
		return runs.CallSummary{ID: id, Tool: "write_document", NeedsApproval: true,
			Approval: &loop.ApprovalRule{Approvers: approvers, RequiredApprovals: 2, FourEyes: fourEyes}}
	}
	run := func(calls ...runs.CallSummary) *runs.Run {
		return &runs.Run{ID: "r1", Status: runs.StatusWaiting, Initiator: "frank@example.com", Approvers: []string{"group:ops"}, VotesNeeded: 2, PendingCalls: calls}
	}
	tests := []struct {
		name    string
		run     *runs.Run
		decider string
		want    identity.Reason
		says    string
	}{
		{"the initiator, approver of the second call only", run(call("b", true, "ann@example.com", "bob@example.com"), call("a", true, "group:ops")),
			"frank@example.com", identity.ReasonFourEyes, "four-eyes"},
		{"the initiator, approver of no call", run(call("a", true, "ann@example.com", "bob@example.com"), call("b", true, "bob@example.com", "carol@example.com")),
			"frank@example.com", identity.ReasonNotApprover, "not an approver"},
		{"another who is no approver", run(call("a", true, "group:ops"), call("b", true, "ann@example.com", "bob@example.com")),
			"carol@example.com", identity.ReasonNotApprover, "not an approver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runs.MayDecide(dir, tt.run, tt.decider)
			assert.Equal(t, tt.want, refusalReason(err))
			if err != nil {
				assert.Contains(t, err.Error(), tt.says)
			}
		})
	}
}

func TestEligibleAndMayRead(t *testing.T) {
	r := waitingRun("ann@example.com", true, "Ann+x@example.com", "bob@example.com", "arn:aws:iam::123456789012:user/carol")
	var got []string
	for _, e := range runs.Eligible(nil, r, r.PendingCalls) {
		got = append(got, e.Mailbox)
	}
	assert.Equal(t, []string{"bob@example.com", ""}, got, "four-eyes: no link for the initiator's own mailbox; an ARN gets none")
	assert.Nil(t, runs.Eligible(nil, waitingRun("ann smith", false, "bob@example.com"), r.PendingCalls), "an unreadable initiator: nobody")

	assert.True(t, runs.MayRead(nil, r, "ANN@example.com"))
	assert.True(t, runs.MayRead(nil, r, "Bob@example.com"))
	assert.False(t, runs.MayRead(nil, r, "mallory@example.com"))
	assert.False(t, runs.MayRead(nil, r, "not a principal"))
}

func TestInboxApprovers(t *testing.T) {
	r := waitingRun("ann@example.com", true, "Ann+x@example.com", "group:ops", "bob@example.com")
	assert.Equal(t, []string{"group:ops", "bob@example.com"}, runs.InboxApprovers(nil, r), "four-eyes leaves the initiator's own spellings out")
	r.FourEyes = false
	assert.Equal(t, []string{"Ann+x@example.com", "group:ops", "bob@example.com"}, runs.InboxApprovers(nil, r))
}

// TestUnmeetableApprovals: a held call whose quorum exceeds the distinct
// persons who may decide it (four-eyes leaving out the initiator, the tool
// gate) is named with a reason; one that can be met is not.
func TestUnmeetableApprovals(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"],"tools":["read_*"]}],
		"groups":[{"name":"finance","members":["bob","carol"]},{"name":"ops","members":["ann","bob","carol","dave"]},
			{"name":"readers","members":["dave"]}]}`))
	require.NoError(t, err)
	pricing := func(n int, fourEyes bool, approvers ...string) runs.CallSummary {
		return runs.CallSummary{ID: "w1", Tool: "write_document", NeedsApproval: true, Rule: "pricing",
			Approval: &loop.ApprovalRule{Approvers: approvers, RequiredApprovals: n, FourEyes: fourEyes}}
	}
	run := func(initiator string, fourEyes bool, calls ...runs.CallSummary) *runs.Run {
		r := waitingRun(initiator, fourEyes, "group:ops")
		r.PendingCalls = calls
		return r
	}
	tests := []struct {
		name string
		run  *runs.Run
		want map[string][]string // call id -> fragments of its denial; nil: meetable
	}{
		{"quorum 2 of 2, the initiator one of them, four-eyes: unmeetable",
			run("bob@example.com", false, pricing(2, true, "group:finance")),
			map[string][]string{"w1": {`rule "pricing" needs 2 approvals`, "only 1 person may decide: carol", "four-eyes: bob started the run"}}},
		{"the same, four-eyes from the run: unmeetable",
			run("bob@example.com", true, pricing(2, false, "group:finance")),
			map[string][]string{"w1": {"only 1 person may decide: carol"}}},
		{"the same without four-eyes: meetable", run("bob@example.com", false, pricing(2, false, "group:finance")), nil},
		{"exactly enough: the initiator outside the group", run("ann@example.com", false, pricing(2, true, "group:finance")), nil},
		{"one short: ann is the initiator, dave may not approve writes", run("ann@example.com", false, pricing(3, true, "group:finance", "dave@example.com", "ann@example.com")),
			map[string][]string{"w1": {"only 2 persons may decide: bob, carol"}}},
		{"the tool gate counts: dave may not approve writes", run("ann@example.com", true, pricing(3, false, "group:ops")),
			map[string][]string{"w1": {"needs 3 approvals", "only 2 persons may decide: bob, carol"}}},
		{"exactly enough: quorum 2 met by the two left after four-eyes and the tool gate", run("ann@example.com", true, pricing(2, false, "group:ops")), nil},
		{"nobody at all", run("ann@example.com", false, pricing(1, false, "group:readers")),
			map[string][]string{"w1": {`rule "pricing" needs 1 approval`, "but nobody may decide"}}},
		{"the run's approvers when the rule names none", run("ann@example.com", true, runs.CallSummary{ID: "w1", Tool: "write_document", NeedsApproval: true, Rule: "default",
			Approval: &loop.ApprovalRule{RequiredApprovals: 4}}),
			map[string][]string{"w1": {`rule "default" needs 4 approvals`, "only 2 persons may decide: bob, carol"}}},
		{"an initiator that is not a principal", run("bob smith", false, pricing(1, false, "group:finance")),
			map[string][]string{"w1": {"the run's initiator is not a valid principal"}}},
		{"calls needing no approval are never named", run("bob@example.com", true, runs.CallSummary{ID: "r1", Tool: "read_document"}), nil},
		{"each meetable by its own deciders, though only carol may decide both: votes are per call",
			run("ann@example.com", false, pricing(2, false, "group:finance"),
				runs.CallSummary{ID: "w2", Tool: "write_document", NeedsApproval: true, Rule: "legal", Approval: &loop.ApprovalRule{Approvers: []string{"carol@example.com", "ann@example.com"}}}),
			nil},
		{"per call: only the call its own deciders cannot approve is denied",
			run("bob@example.com", false, pricing(2, true, "group:finance"),
				runs.CallSummary{ID: "w2", Tool: "write_document", NeedsApproval: true, Rule: "legal", Approval: &loop.ApprovalRule{Approvers: []string{"carol@example.com", "ann@example.com"}, RequiredApprovals: 2}}),
			map[string][]string{"w1": {`rule "pricing" needs 2 approvals`, "only 1 person may decide: carol", "four-eyes: bob started the run"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runs.UnmeetableApprovals(dir, tt.run, tt.run.PendingCalls)
			if tt.want == nil {
				assert.Nil(t, got, "got denials %v, want none (the approval can be given)", got)
				return
			}
			require.Len(t, got, len(tt.want), "got denials %v", got)
			for id, frags := range tt.want {
				require.Contains(t, got, id)
				assert.Contains(t, got[id], "approval cannot be given")
				for _, f := range frags {
					assert.Contains(t, got[id], f)
				}
			}
		})
	}
}

// TestCheckOpenApprovals: a waiting run's held call not yet approved or
// denied is lost when the directory in force leaves fewer persons who have
// not voted able to decide it than the approvals it still needs, or when
// a group its approvers name is gone; the same rule as at planning, less
// the votes cast. What cannot be read is unsure, never lost; a directory
// that still has enough persons, a decided call, a run that does not
// wait and no directory at all give nothing.
func TestCheckOpenApprovals(t *testing.T) {
	const before = `{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]}],
		"groups":[{"name":"finance","members":["bob","carol","dave"]},{"name":"legal","members":["carol","dave"]}]}`
	directory := func(t *testing.T, doc string) *identity.Directory {
		t.Helper()
		d, err := identity.DecodeDirectory([]byte(doc))
		require.NoError(t, err)
		return d
	}
	// finance lost bob and dave; legal is gone.
	after := directory(t, `{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
			{"id":"carol","aliases":["carol@example.com"]},{"id":"dave","aliases":["dave@example.com"]}],
		"groups":[{"name":"finance","members":["carol"]}]}`)
	pricing := runs.CallSummary{ID: "w1", Tool: "write_document", NeedsApproval: true, Rule: "pricing",
		Approval: &loop.ApprovalRule{Approvers: []string{"group:finance"}, RequiredApprovals: 2}}
	contract := runs.CallSummary{ID: "w2", Tool: "write_document", NeedsApproval: true, Rule: "legal",
		Approval: &loop.ApprovalRule{Approvers: []string{"group:legal"}}}
	waiting := func(initiator string, calls ...runs.CallSummary) *runs.Run {
		r := waitingRun(initiator, false, "group:finance")
		r.PendingCalls = calls
		r.VotesNeeded = runs.VotesNeeded(calls)
		return r
	}
	voted := func(r *runs.Run, person, choices string) *runs.Run {
		r.Votes = append(r.Votes, runs.Vote{By: person + "@example.com", Person: "person:" + person, Choices: choices, Via: runs.ViaAPI})
		return r
	}

	t.Run("when planned, the run could wait", func(t *testing.T) {
		r := waiting("ann@example.com", pricing, contract)
		require.Nil(t, runs.UnmeetableApprovals(directory(t, before), r, r.PendingCalls))
		lost, unsure := runs.CheckOpenApprovals(directory(t, before), r)
		assert.Nil(t, lost)
		assert.Nil(t, unsure)
	})
	t.Run("members left the group: lost, saying who may still decide", func(t *testing.T) {
		lost, unsure := runs.CheckOpenApprovals(after, waiting("ann@example.com", pricing))
		assert.Nil(t, unsure)
		assert.Equal(t, map[string]string{"w1": `approval can no longer be given: rule "pricing" needs 2 approvals from distinct persons, but only 1 person may decide: carol`}, lost)
	})
	t.Run("a vote counts, and its voter does not vote again", func(t *testing.T) {
		// bob approved before he left finance: carol alone may still vote,
		// and one more approval is all the call needs.
		r := voted(waiting("ann@example.com", pricing), "bob", "a")
		lost, _ := runs.CheckOpenApprovals(after, r)
		assert.Nil(t, lost, "carol's approval would complete it")
		// carol approved: nobody who has not voted is left for the second.
		r = voted(waiting("ann@example.com", pricing), "carol", "a")
		lost, _ = runs.CheckOpenApprovals(after, r)
		assert.Equal(t, map[string]string{"w1": `approval can no longer be given: rule "pricing" needs 2 approvals from distinct persons and has 1, but nobody who has not voted may decide`}, lost)
	})
	t.Run("a decided call is not checked", func(t *testing.T) {
		// Approved by bob and carol (a row that still waits with every call
		// decided is one the release before per-call votes left).
		r := voted(voted(waiting("ann@example.com", pricing), "bob", "a"), "carol", "a")
		lost, unsure := runs.CheckOpenApprovals(after, r)
		assert.Nil(t, lost)
		assert.Nil(t, unsure)
	})
	t.Run("a group that is gone: lost, certainly", func(t *testing.T) {
		lost, unsure := runs.CheckOpenApprovals(after, waiting("ann@example.com", contract))
		assert.Nil(t, unsure)
		require.Contains(t, lost, "w2")
		assert.Contains(t, lost["w2"], `rule "legal" needs 1 approval from distinct persons, and nobody may decide: its approvers no longer resolve`)
		assert.Contains(t, lost["w2"], "no such group in the directory")
	})
	t.Run("each call on its own", func(t *testing.T) {
		r := waiting("ann@example.com", pricing, runs.CallSummary{ID: "w3", Tool: "write_document", NeedsApproval: true, Rule: "default"},
			runs.CallSummary{ID: "r1", Tool: "read_document"})
		r.Approvers = []string{"carol@example.com"}
		lost, _ := runs.CheckOpenApprovals(after, r)
		assert.Equal(t, []string{"w1"}, keys(lost), "w3 (the run's approver carol) can still be approved, r1 needs no approval")
	})
	t.Run("what cannot be read is unsure, never lost", func(t *testing.T) {
		lost, unsure := runs.CheckOpenApprovals(after, waiting("not a principal", pricing))
		assert.Nil(t, lost)
		assert.Contains(t, unsure["w1"], "the run's initiator is not a valid principal")
		r := waiting("ann@example.com", runs.CallSummary{ID: "w4", Tool: "write_document", NeedsApproval: true, Rule: "odd",
			Approval: &loop.ApprovalRule{Approvers: []string{"arn:aws:sts::123456789012:assumed-role/Ops/s1"}}})
		lost, unsure = runs.CheckOpenApprovals(after, r)
		assert.Nil(t, lost)
		assert.Contains(t, unsure, "w4")
	})
	t.Run("no directory, or not waiting: nothing", func(t *testing.T) {
		lost, unsure := runs.CheckOpenApprovals(nil, waiting("ann@example.com", contract))
		assert.Nil(t, lost)
		assert.Nil(t, unsure)
		r := waiting("ann@example.com", pricing)
		r.Status = runs.StatusResuming
		lost, unsure = runs.CheckOpenApprovals(after, r)
		assert.Nil(t, lost)
		assert.Nil(t, unsure)
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPastRuleApproversRead: the approvers policy rules named for earlier
// turns read the run (each entry resolved on its own: two rules naming one
// person by two aliases, more entries than a list holds, or a group the
// directory lost must not cost the others their access), and only those
// of the turn held now may cancel it.
func TestPastRuleApproversRead(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},
		           {"id":"carol","aliases":["carol@example.com","carol"]},{"id":"dave","aliases":["dave@example.com"]}],
		"groups":[{"name":"finance","members":["carol"]}]}`))
	require.NoError(t, err)
	r := waitingRun("ann@example.com", false, "bob@example.com")
	r.RuleApprovers = []string{"carol@example.com", "carol", "group:gone"}
	for i := range 20 {
		r.RuleApprovers = append(r.RuleApprovers, "x"+string(rune('a'+i))+"@example.com")
	}
	r.RuleApprovers = append(r.RuleApprovers, "group:finance")
	for _, who := range []string{"carol", "CAROL@example.com", "xa@example.com", "bob@example.com", "ann@example.com"} {
		assert.True(t, runs.MayRead(dir, r, who), "%s reads", who)
	}
	assert.False(t, runs.MayRead(dir, r, "dave@example.com"))
	assert.False(t, runs.MayCancel(dir, r, "carol"), "asked about an earlier turn: reads, does not cancel")
	assert.True(t, runs.MayCancel(dir, r, "bob@example.com"))
	assert.True(t, runs.MayCancel(dir, r, "ann@example.com"))
	r.PendingCalls[0].Approval = &loop.ApprovalRule{Approvers: []string{"group:finance"}}
	assert.True(t, runs.MayCancel(dir, r, "carol"), "named by the turn held now")
}

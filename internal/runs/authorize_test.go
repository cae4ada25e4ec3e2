package runs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
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

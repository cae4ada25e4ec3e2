package runs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestMaySubmitResultsFailsClosed: the initiator's person, the named
// tool executors (compared canonically) and the members of the groups the
// run names may submit; everything else, and anything that cannot be
// read, is refused.
func TestMaySubmitResultsFailsClosed(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com","arn:aws:iam::123456789012:user/ann"]},{"id":"bob","aliases":["bob@example.com","arn:aws:iam::123456789012:role/BobAdmin"]},
		           {"id":"carol","aliases":["carol"]},{"id":"dave","aliases":["dave@example.com"]}],
		"groups":[{"name":"ops","members":["ann","bob"]},{"name":"audit","members":["carol"],"tools":["read_*"]}],
		"service_accounts":[{"id":"ci","aliases":["ci-bot"]}]}`))
	require.NoError(t, err)
	run := func(initiator string, executors ...string) *runs.Run {
		return &runs.Run{ID: "r1", Status: runs.StatusWaitingForToolResults, Initiator: initiator, Approvers: []string{"carol"}, ToolExecutors: executors}
	}
	tests := []struct {
		name    string
		dir     *identity.Directory
		run     *runs.Run
		who     string
		granted string // the entry that lets who submit; "-" when refused
	}{
		{"initiator", nil, run("ann@example.com"), "ann@example.com", ""},
		{"initiator, other case and +tag", nil, run("ann@example.com"), "Ann+ci@Example.com", ""},
		{"initiator by another alias (directory)", dir, run("ann@example.com"), "arn:aws:iam::123456789012:user/ann", ""},
		{"initiator's assumed-role session", nil, run("arn:aws:iam::123456789012:role/app"), "arn:aws:sts::123456789012:assumed-role/app/s1", ""},
		{"initiator who is also in an executor group", dir, run("ann@example.com", "group:ops"), "ann@example.com", ""},
		{"named executor", nil, run("ann@example.com", "ci-bot"), "ci-bot", "ci-bot"},
		{"executor is a service account", dir, run("ann@example.com", "ci-bot"), "ci-bot", "ci-bot"},
		{"executor by another alias", dir, run("bob@example.com", "ann@example.com"), "arn:aws:iam::123456789012:user/ann", "ann@example.com"},
		{"group member", dir, run("carol", "group:ops"), "bob@example.com", "group:ops"},
		{"group member by another alias, other case", dir, run("carol", "group:ops"), "ANN@example.com", "group:ops"},
		{"group member's assumed-role session", dir, run("carol", "group:ops"), "arn:aws:sts::123456789012:assumed-role/BobAdmin/s1", "group:ops"},
		{"group member, the group's approval tool limit does not apply", dir, run("ann@example.com", "group:audit"), "carol", "group:audit"},
		{"the first entry naming the submitter is recorded", dir, run("carol", "bob@example.com", "group:ops"), "bob@example.com", "bob@example.com"},
		{"a second group", dir, run("dave@example.com", "group:audit", "group:ops"), "ann@example.com", "group:ops"},
		{"not a member of the group", dir, run("carol", "group:ops"), "dave@example.com", "-"},
		{"a stranger to the directory is no member", dir, run("carol", "group:ops"), "mallory", "-"},
		{"a service account is no member", dir, run("carol", "group:ops"), "ci-bot", "-"},
		{"a group without a directory grants nothing", nil, run("carol", "group:ops"), "bob@example.com", "-"},
		{"a group the directory lost grants nothing", dir, run("carol", "group:gone"), "bob@example.com", "-"},
		{"a lost group costs other entries nothing", dir, run("carol", "group:gone", "group:ops"), "bob@example.com", "group:ops"},
		{"an empty group name grants nothing", dir, run("carol", "group:"), "bob@example.com", "-"},
		{"an approver is not an executor", nil, run("ann@example.com"), "carol", "-"},
		{"stranger", nil, run("ann@example.com", "ci-bot"), "mallory", "-"},
		{"not a principal", nil, run("ann@example.com"), "ann <ann@example.com>", "-"},
		{"a group as submitter", dir, run("ann@example.com", "group:ops"), "group:ops", "-"},
		{"empty submitter", nil, run("ann@example.com"), "", "-"},
		{"unreadable initiator grants nothing", nil, run("not a principal"), "not a principal", "-"},
		{"unreadable executor grants nothing", nil, run("ann@example.com", "bad principal"), "bad principal", "-"},
		{"no run", nil, nil, "ann@example.com", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			granted, err := runs.MaySubmitResults(tt.dir, tt.run, tt.who)
			if tt.granted != "-" {
				assert.NoError(t, err)
				assert.Equal(t, tt.granted, granted, "the entry that lets the submitter submit")
				assert.True(t, runs.MayRead(tt.dir, tt.run, tt.who), "who may submit may read the run")
				assert.True(t, runs.MayCancel(tt.dir, tt.run, tt.who), "who may submit may cancel the run")
				return
			}
			var ref *identity.Refusal
			require.ErrorAs(t, err, &ref)
			assert.NotEmpty(t, ref.Message)
			assert.Empty(t, granted)
		})
	}
}

// TestMaySubmitResultsReadsMembershipAtSubmission: a group's members are
// those of the directory when the results come in, not when the run
// started: a person removed from the group since (a redeploy with a new
// directory) is refused with a message saying so, one added may submit.
func TestMaySubmitResultsReadsMembershipAtSubmission(t *testing.T) {
	const persons = `"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]},{"id":"carol","aliases":["carol@example.com"]}]`
	atStart, err := identity.DecodeDirectory([]byte(`{"version":1,` + persons + `,"groups":[{"name":"ops","members":["ann","bob"]}]}`))
	require.NoError(t, err)
	now, err := identity.DecodeDirectory([]byte(`{"version":1,` + persons + `,"groups":[{"name":"ops","members":["bob","carol"]}]}`))
	require.NoError(t, err)
	r := &runs.Run{ID: "r1", Status: runs.StatusWaitingForToolResults, Initiator: "dave", Approvers: []string{"dave"}, ToolExecutors: []string{"group:ops"}}

	_, err = runs.MaySubmitResults(atStart, r, "ann@example.com")
	require.NoError(t, err, "ann was a member when the run started")

	_, err = runs.MaySubmitResults(now, r, "ann@example.com")
	var ref *identity.Refusal
	require.ErrorAs(t, err, &ref, "ann left the group")
	// The log's reason: she is no tool executor (it said not_approver).
	assert.Equal(t, identity.ReasonNotToolExecutor, ref.Reason)
	assert.Equal(t, "ann@example.com is neither the initiator nor a tool executor of run r1, nor now a member of a group it names as tool executors", ref.Message)
	assert.False(t, runs.MayRead(now, r, "ann@example.com"), "nor may she read the run")

	plain := &runs.Run{ID: "r1", Status: runs.StatusWaitingForToolResults, Initiator: "dave", Approvers: []string{"dave"}, ToolExecutors: []string{"bob@example.com"}}
	_, err = runs.MaySubmitResults(now, plain, "ann@example.com")
	var plainRef *identity.Refusal
	require.ErrorAs(t, err, &plainRef)
	assert.Equal(t, ref.Message, plainRef.Message, "the refusal does not tell whether the run names groups")

	granted, err := runs.MaySubmitResults(now, r, "carol@example.com")
	require.NoError(t, err, "carol joined the group")
	assert.Equal(t, "group:ops", granted)
	granted, err = runs.MaySubmitResults(now, r, "bob@example.com")
	require.NoError(t, err, "bob stayed")
	assert.Equal(t, "group:ops", granted)
}

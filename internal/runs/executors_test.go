package runs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestMaySubmitResultsFailsClosed: the initiator's person and the named
// tool executors may submit, compared canonically; everything else, and
// anything that cannot be read, is refused.
func TestMaySubmitResultsFailsClosed(t *testing.T) {
	dir, err := identity.DecodeDirectory([]byte(`{"version":1,
		"persons":[{"id":"ann","aliases":["ann@example.com","arn:aws:iam::123456789012:user/ann"]},{"id":"bob","aliases":["bob@example.com"]}],
		"groups":[{"name":"ops","members":["ann","bob"]}],
		"service_accounts":[{"id":"ci","aliases":["ci-bot"]}]}`))
	require.NoError(t, err)
	run := func(initiator string, executors ...string) *runs.Run {
		return &runs.Run{ID: "r1", Status: runs.StatusWaitingForToolResults, Initiator: initiator, Approvers: []string{"carol"}, ToolExecutors: executors}
	}
	tests := []struct {
		name string
		dir  *identity.Directory
		run  *runs.Run
		who  string
		ok   bool
	}{
		{"initiator", nil, run("ann@example.com"), "ann@example.com", true},
		{"initiator, other case and +tag", nil, run("ann@example.com"), "Ann+ci@Example.com", true},
		{"initiator by another alias (directory)", dir, run("ann@example.com"), "arn:aws:iam::123456789012:user/ann", true},
		{"initiator's assumed-role session", nil, run("arn:aws:iam::123456789012:role/app"), "arn:aws:sts::123456789012:assumed-role/app/s1", true},
		{"named executor", nil, run("ann@example.com", "ci-bot"), "ci-bot", true},
		{"executor is a service account", dir, run("ann@example.com", "ci-bot"), "ci-bot", true},
		{"executor by another alias", dir, run("bob@example.com", "ann@example.com"), "arn:aws:iam::123456789012:user/ann", true},
		{"an approver is not an executor", nil, run("ann@example.com"), "carol", false},
		{"stranger", nil, run("ann@example.com", "ci-bot"), "mallory", false},
		{"not a principal", nil, run("ann@example.com"), "ann <ann@example.com>", false},
		{"empty submitter", nil, run("ann@example.com"), "", false},
		{"unreadable initiator grants nothing", nil, run("not a principal"), "not a principal", false},
		{"unreadable executor grants nothing", nil, run("ann@example.com", "bad principal"), "bad principal", false},
		{"a group entry grants nothing", dir, run("carol", "group:ops"), "bob@example.com", false},
		{"no run", nil, nil, "ann@example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runs.MaySubmitResults(tt.dir, tt.run, tt.who)
			if tt.ok {
				assert.NoError(t, err)
				assert.True(t, runs.MayRead(tt.dir, tt.run, tt.who), "who may submit may read the run")
				return
			}
			var ref *identity.Refusal
			require.ErrorAs(t, err, &ref)
			assert.NotEmpty(t, ref.Message)
		})
	}
}

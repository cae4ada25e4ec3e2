package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// TestHoistGlobalFlags: the API commands' flags given before the command
// go after the command and its verb; anything else before the command is
// left for run to refuse.
func TestHoistGlobalFlags(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"--json approvals approve ID --digest d", "approvals approve --json ID --digest d"},
		{"-json runs get ID", "runs get -json ID"},
		{"--endpoint http://x --token=t --region eu-west-1 --json runs events ID", "runs events --endpoint http://x --token=t --region eu-west-1 --json ID"},
		{"--json runs", "runs --json"},
		{"--json serve --addr :0", "serve --json --addr :0"},
		{"runs get ID --json", "runs get ID --json"},
		{"--json", "--json"},
		{"--endpoint", "--endpoint"},
		{"--verbose runs get ID", "--verbose runs get ID"},
		{"--json -- runs get ID", "--json -- runs get ID"},
	}
	for _, tt := range tests {
		if got := hoistGlobalFlags(strings.Fields(tt.in)); !slices.Equal(got, strings.Fields(tt.want)) {
			t.Errorf("hoistGlobalFlags(%s) = %q, want %q", tt.in, got, strings.Fields(tt.want))
		}
	}
}

// TestJSONBeforeTheCommand: `agentgate --json <group> <verb>` is the verb
// with --json, as README says every command takes it; on a command without
// the flag it is a usage error naming the flag, not an unknown command.
func TestJSONBeforeTheCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--json", "runs", "get"}, &out, &errOut)
	if code != 2 || !strings.HasPrefix(errOut.String(), `{"error":{"message":"give the run id"`) {
		t.Errorf("agentgate --json runs get: exit %d, stderr %q; want 2 with the usage error as JSON", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"--json", "compact"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "flag provided but not defined: -json") {
		t.Errorf("agentgate --json compact: exit %d, stderr %q; want 2 naming the flag", code, errOut.String())
	}
}

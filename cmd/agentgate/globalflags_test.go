package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// TestHoistGlobalFlags: the API commands' flags given before the command
// go after the command and its verb; --version and --help before the
// command are themselves; flags that leave no command, lack a value or
// are unknown are errors.
func TestHoistGlobalFlags(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "--json approvals approve ID --digest d", want: "approvals approve --json ID --digest d"},
		{in: "-json runs get ID", want: "runs get -json ID"},
		{in: "--endpoint http://x --token=t --region eu-west-1 --json runs events ID", want: "runs events --endpoint http://x --token=t --region eu-west-1 --json ID"},
		{in: "--json runs", want: "runs --json"},
		{in: "--json serve --addr :0", want: "serve --json --addr :0"},
		{in: "runs get ID --json", want: "runs get ID --json"},
		{in: "--json --version", want: "--version"},
		{in: "--json -h", want: "--help"},
		{in: "--json -- runs get ID", want: "--json -- runs get ID"},
		{in: "--json", err: "no command given"},
		{in: "--endpoint", err: "flag needs an argument: -endpoint"},
		{in: "--json --token", err: "flag needs an argument: -token"},
		{in: "--verbose runs get ID", err: "flag provided but not defined: -verbose"},
	}
	for _, tt := range tests {
		got, err := hoistGlobalFlags(strings.Fields(tt.in))
		switch {
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("hoistGlobalFlags(%s) = %q, %v; want the error %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || !slices.Equal(got, strings.Fields(tt.want))):
			t.Errorf("hoistGlobalFlags(%s) = %q, %v; want %q", tt.in, got, err, strings.Fields(tt.want))
		}
	}
}

// TestGlobalFlagsWithoutACommand: global flags with no command after them,
// or a group without its verb, or a flag without its value, say that, not
// that the flag is an unknown command (tester helper-109 P3-1).
func TestGlobalFlagsWithoutACommand(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		stdout   string // a prefix
		stderr   string // a prefix
		notInErr string
	}{
		{args: []string{"--json"}, code: 2, stderr: "agentgate: no command given"},
		{args: []string{"--json", "--version"}, code: 0, stdout: "agentgate "},
		{args: []string{"--json", "version"}, code: 0, stdout: "agentgate "},
		{args: []string{"--token"}, code: 2, stderr: "agentgate: flag needs an argument: -token"},
		{args: []string{"--json", "runs"}, code: 2, stderr: `{"error":{"message":"no command given"}}`},
		{args: []string{"--endpoint", "http://x", "approvals"}, code: 2, stderr: "agentgate approvals: no command given"},
		{args: []string{"runs", "--json", "--bogus"}, code: 2, stderr: "agentgate runs: no command given"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.HasPrefix(out.String(), tt.stdout) || !strings.HasPrefix(errOut.String(), tt.stderr) || strings.Contains(errOut.String(), "unknown command") {
			t.Errorf("agentgate %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr %q...", strings.Join(tt.args, " "), code, out.String(), errOut.String(), tt.code, tt.stdout, tt.stderr)
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

//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLambdaWithoutCELRefusesConditions runs the startrun and resume
// bootstraps as `make build` builds them by default (without the tag cel)
// with a deployment policy: a policy whose rules have `when` conditions
// stops start-up with an error naming every such rule and the build that
// evaluates them (a rule is never silently ignored); a policy without
// conditions gets past start-up (the bootstrap then stops because no Lambda
// runtime API is set). No emulator is needed: start-up makes no AWS call.
func TestLambdaWithoutCELRefusesConditions(t *testing.T) {
	if ready := os.Getenv("AGENTGATE_E2E_BOOTSTRAPS"); ready != "" {
		if b, err := os.ReadFile(filepath.Join(ready, "features")); err == nil && slices.Contains(strings.Fields(string(b)), "cel") {
			t.Skipf("the bootstraps in %s were built with cel", ready)
		}
	}
	dir := t.TempDir()
	bins := buildBootstraps(t)
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, demoScript, 0o600))
	plain := filepath.Join(dir, "plain-policy.json")
	require.NoError(t, os.WriteFile(plain, []byte(`{"version":1,"rules":[{"id":"no-deletes","tools":["delete_*"],"outcome":"deny"}]}`), 0o600))
	examples, err := filepath.Abs("../../examples")
	require.NoError(t, err)

	start := func(fn, policyFile string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins[fn]) //nolint:gosec // a bootstrap this test just built
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"),
			"AGENTGATE_TABLE=agentgate-runs", "AGENTGATE_BUCKET=agentgate-state",
			"AGENTGATE_STARTRUN_FUNCTION=startrun", "AGENTGATE_RESUME_FUNCTION=resume",
			"AGENTGATE_MODEL=scripted:" + script,
			"AGENTGATE_DIRECTORY=" + filepath.Join(examples, "directory.json"), "AGENTGATE_POLICY=" + policyFile,
			"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
			"AWS_ENDPOINT_URL=http://127.0.0.1:9", // never called
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s without a Lambda runtime API must stop: %s", fn, out)
		require.NoError(t, ctx.Err(), "%s did not stop: %s", fn, out)
		return string(out)
	}
	for _, fn := range []string{"startrun", "resume"} {
		out := start(fn, filepath.Join(examples, "policy.json"))
		require.Contains(t, out, "start-up failed", fn)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "start-up failed") {
				require.Equal(t, 1, strings.Count(line, `"function":`), "%s: the log line names the function once: %s", fn, line)
			}
		}
		for _, rule := range []string{`rules[0] \"no-prod-deletes\"`, `rules[1] \"drafts\"`, `rules[2] \"pricing\"`, `rules[4] \"secret-reads\"`} {
			require.Contains(t, out, rule, "%s: every rule with a condition is named", fn)
		}
		require.NotContains(t, out, "payments", "%s: a rule without a condition is not refused", fn)
		require.Contains(t, out, "make build LAMBDA_FEATURES=cel", fn)

		out = start(fn, plain)
		require.NotContains(t, out, "start-up failed", "%s: a policy without conditions loads", fn)
		require.Contains(t, out, "expected AWS Lambda environment variables", "%s got past start-up", fn)
	}
}

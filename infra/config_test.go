package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/agentgate/agentgate/infra/stack"
)

func contextOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestReadConfigDefaults(t *testing.T) {
	cfg, err := readConfig(contextOf(nil))
	if err != nil {
		t.Fatalf("readConfig(empty) = %v", err)
	}
	p := cfg.props
	checks := []struct {
		name      string
		got, want any
	}{
		{"stack name", cfg.stackName, "Agentgate"},
		{"deletion protection", p.DeletionProtection, true},
		{"model", p.Model, "bedrock:" + defaultModelID},
		{"log retention", p.LogRetention, awslogs.RetentionDays_ONE_MONTH},
		{"tracing (production: on)", p.Tracing, true},
		{"purge rate", p.PurgeRateMinutes, 1},
		{"startrun concurrency (no cap)", p.StartRunConcurrency, 0},
		{"resume concurrency (no cap)", p.ResumeConcurrency, 0},
		{"approval rate limit", p.ApprovalRateLimit, stack.DefaultApprovalRateLimit},
		{"approval throttle", p.ApprovalThrottleRateLimit, float64(stack.DefaultApprovalThrottleRateLimit)},
		{"approval burst", p.ApprovalThrottleBurstLimit, float64(stack.DefaultApprovalThrottleBurstLimit)},
		{"alarm e-mail", p.AlarmEmail, ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(p.ModelArns) != 1 || !strings.HasSuffix(p.ModelArns[0], "::foundation-model/"+defaultModelID) {
		t.Errorf("model ARNs = %v, want the default model's foundation-model ARN", p.ModelArns)
	}
}

func TestReadConfigSettings(t *testing.T) {
	cfg, err := readConfig(contextOf(map[string]string{
		"stackName": "AgentgateDev", "deletionProtection": "false", "model": "openai:gpt-test", "assetDir": t.TempDir(),
		"modelArns": "arn:a, arn:b", "tracing": "true", "logRetentionDays": "7", "purgeRateMinutes": "5",
	}))
	if err != nil {
		t.Fatalf("readConfig = %v", err)
	}
	p := cfg.props
	if cfg.stackName != "AgentgateDev" || p.DeletionProtection || !p.Tracing || p.PurgeRateMinutes != 5 ||
		p.LogRetention != awslogs.RetentionDays_ONE_WEEK || !slices.Equal(p.ModelArns, []string{"arn:a", "arn:b"}) {
		t.Errorf("readConfig = %+v, want the given settings", cfg)
	}
	cfg, err = readConfig(contextOf(map[string]string{"model": "openai:gpt-test", "assetDir": t.TempDir()}))
	if err != nil || len(cfg.props.ModelArns) != 0 {
		t.Errorf("non-Bedrock model: ModelArns = %v (err %v), want none", cfg.props.ModelArns, err)
	}
}

func TestReadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		kv   map[string]string
		want string
	}{
		{"bool", map[string]string{"tracing": "yes please"}, "tracing"},
		{"int", map[string]string{"dueShards": "-2"}, "dueShards"},
		{"retention days", map[string]string{"logRetentionDays": "8"}, "logRetentionDays"},
		{"duration", map[string]string{"approvalTtl": "tomorrow"}, "approval TTL"},
		{"inference profile", map[string]string{"model": "bedrock:us.anthropic.claude-x"}, "modelArns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readConfig(contextOf(tt.kv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readConfig(%v) = %v, want an error naming %s", tt.kv, err, tt.want)
			}
		})
	}
}

func TestCheckAssetFeatures(t *testing.T) {
	dir := t.TempDir()
	if err := checkAssetFeatures(dir, "tools.json"); err != nil {
		t.Errorf("no features file: %v, want no check", err)
	}
	if err := os.WriteFile(filepath.Join(dir, assetFeaturesFile), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkAssetFeatures(dir, ""); err != nil {
		t.Errorf("zips without MCP, no tool sources: %v, want nil", err)
	}
	if err := checkAssetFeatures(dir, "tools.json"); err == nil || !strings.Contains(err.Error(), "LAMBDA_FEATURES=mcp") {
		t.Errorf("zips without MCP, tool sources: %v, want an error saying how to rebuild", err)
	}
	if err := os.WriteFile(filepath.Join(dir, assetFeaturesFile), []byte("mcp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkAssetFeatures(dir, "tools.json"); err != nil {
		t.Errorf("zips with MCP, tool sources: %v, want nil", err)
	}
}

// TestReadConfigGovernance: the directory and policy keys name the files
// (paths from infra/) and a policy the functions would refuse stops synth.
func TestReadConfigGovernance(t *testing.T) {
	kv := map[string]string{"assetDir": t.TempDir(), "directory": "../examples/directory.json", "policy": "../examples/policy.json"}
	cfg, err := readConfig(contextOf(kv))
	if err != nil || cfg.props.DirectoryFile != kv["directory"] || cfg.props.PolicyFile != kv["policy"] {
		t.Fatalf("readConfig = %+v, %v; want the example files", cfg.props, err)
	}
	bad := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(bad, []byte(`{"version":1,"rules":[{"id":"fin","tools":["*"],"outcome":"require_approval","approvers":["group:nobody"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kv["policy"] = bad
	if _, err := readConfig(contextOf(kv)); err == nil || !strings.Contains(err.Error(), `rules[0] "fin"`) {
		t.Errorf("a policy naming a group the directory lacks: %v, want an error naming the rule", err)
	}
}

func TestCheckAssetProviders(t *testing.T) {
	dir := t.TempDir()
	if err := checkAssetProviders(dir, "openai:gpt-test"); err != nil {
		t.Errorf("no providers file: %v, want no check", err)
	}
	if err := os.WriteFile(filepath.Join(dir, assetProvidersFile), []byte("bedrock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		model string
		ok    bool
	}{{"bedrock:m", true}, {"scripted:/x.json", true}, {"openai:gpt-test", false}, {"anthropic:claude", false}} {
		err := checkAssetProviders(dir, tt.model)
		if (err == nil) != tt.ok {
			t.Errorf("checkAssetProviders(bedrock zips, %s) = %v, want ok=%t", tt.model, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "LAMBDA_PROVIDER=") {
			t.Errorf("error %q does not say how to rebuild", err)
		}
	}
}

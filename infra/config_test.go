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
		{"SES API (unset: the functions' default, v2)", p.SESAPI, ""},
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
		"modelArns": "arn:a, arn:b", "tracing": "true", "logRetentionDays": "7", "purgeRateMinutes": "5", "sesApi": "v1",
		"quorumCheck": "on", "quorumCheckEvery": "2m",
	}))
	if err != nil {
		t.Fatalf("readConfig = %v", err)
	}
	p := cfg.props
	if cfg.stackName != "AgentgateDev" || p.DeletionProtection || !p.Tracing || p.PurgeRateMinutes != 5 || p.SESAPI != "v1" || p.QuorumCheck != "on" || p.QuorumCheckEvery != "2m" ||
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
		{"SES API", map[string]string{"sesApi": "sesv2"}, `SES API "sesv2": want v2`},
		{"quorum check", map[string]string{"quorumCheck": "yes"}, `quorum check "yes": want on or off`},
		{"quorum check interval", map[string]string{"quorumCheckEvery": "0s"}, `quorum check interval "0s": want a Go duration from 1s to 24h`},
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

// TestCheckAssetFeatures: synth refuses a configuration whose opt-in
// features (MCP for tool sources, CEL for policy conditions) the zips were
// built without, and says which `make build` fixes it.
func TestCheckAssetFeatures(t *testing.T) {
	policyDir := t.TempDir()
	celPolicy := filepath.Join(policyDir, "cel.json")
	plainPolicy := filepath.Join(policyDir, "plain.json")
	for path, body := range map[string]string{
		celPolicy: `{"version":1,"rules":[{"id":"prod","tools":["delete_*"],"when":"args.path.startsWith('prod/')","outcome":"deny"},` +
			`{"id":"all-deletes","tools":["delete_*"],"outcome":"require_approval"},` +
			`{"id":"drafts","tools":["write_*"],"when":"args.path.startsWith('drafts/')","outcome":"allow"}]}`,
		plainPolicy: `{"version":1,"rules":[{"id":"no-deletes","tools":["delete_*"],"outcome":"deny"}]}`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name                string
		features            *string // nil: no features file
		toolSources, policy string
		want                []string // substrings of the error; none: no error
	}{
		{name: "no features file", features: nil, toolSources: "tools.json", policy: celPolicy},
		{name: "nothing needed", features: ptr("\n")},
		{name: "plain policy without cel", features: ptr("\n"), policy: plainPolicy},
		{name: "tool sources without mcp", features: ptr("\n"), toolSources: "tools.json",
			want: []string{`toolSources="tools.json"`, "without mcp", "LAMBDA_FEATURES=mcp`"}},
		{name: "tool sources with mcp", features: ptr("mcp\n"), toolSources: "tools.json"},
		{name: "cel policy without cel", features: ptr("\n"), policy: celPolicy,
			want: []string{`rule(s) "prod", "drafts" have a when condition`, "without cel", "LAMBDA_FEATURES=cel`"}},
		{name: "cel policy, mcp only", features: ptr("mcp\n"), toolSources: "tools.json", policy: celPolicy,
			want: []string{"without cel;", `LAMBDA_FEATURES="mcp cel"`}},
		{name: "both missing", features: ptr(""), toolSources: "tools.json", policy: celPolicy,
			want: []string{"without mcp and cel", `LAMBDA_FEATURES="mcp cel"`}},
		{name: "cel policy with cel", features: ptr("cel\n"), policy: celPolicy},
		{name: "both built", features: ptr("mcp\ncel\n"), toolSources: "tools.json", policy: celPolicy},
		{name: "unreadable policy left to Validate", features: ptr(""), policy: filepath.Join(policyDir, "none.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.features != nil {
				if err := os.WriteFile(filepath.Join(dir, assetFeaturesFile), []byte(*tt.features), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := checkAssetFeatures(dir, tt.toolSources, tt.policy)
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("checkAssetFeatures = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkAssetFeatures = nil, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkAssetFeatures = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

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

	// The example policy has when conditions: zips built without cel (make
	// build writes the features file) cannot load it, so synth stops.
	kv["policy"] = "../examples/policy.json"
	if err := os.WriteFile(filepath.Join(kv["assetDir"], assetFeaturesFile), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readConfig(contextOf(kv)); err == nil || !strings.Contains(err.Error(), "LAMBDA_FEATURES=cel") ||
		!strings.Contains(err.Error(), `"no-prod-deletes"`) {
		t.Errorf("the example policy with zips built without cel: %v, want an error naming its CEL rules and how to rebuild", err)
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

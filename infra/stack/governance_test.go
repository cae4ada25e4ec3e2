package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

const (
	testDirectoryJSON = `{"version":1,"persons":[{"id":"ann","aliases":["ann@example.com"]},{"id":"bob","aliases":["bob@example.com"]}],
	  "groups":[{"name":"ops","members":["ann","bob"]}]}`
	testPolicyJSON = `{"version":1,"rules":[{"id":"ops-writes","tools":["write_*"],"outcome":"require_approval","approvers":["group:ops"],"required_approvals":2},
	  {"id":"big-deletes","tools":["delete_*"],"when":"size(args) > 1","outcome":"deny"}]}`
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// layerContents reads a file of a layer asset in the cloud assembly out.
func layerContents(t *testing.T, out string, layer map[string]any, rel string) string {
	t.Helper()
	asset, _ := layer["Metadata"].(map[string]any)["aws:asset:path"].(string)
	if asset == "" {
		t.Fatalf("layer without asset path: %v", layer["Metadata"])
	}
	raw, err := os.ReadFile(filepath.Join(out, asset, rel))
	if err != nil {
		t.Fatalf("layer asset: %v", err)
	}
	return string(raw)
}

// TestGovernanceShipsInLayersToTheFunctionsThatReadThem: the directory
// reaches all three functions (purge mails reminders to whoever may still
// decide), the policy only the workers, each at the path its variable
// names; no IAM statement changes.
func TestGovernanceShipsInLayersToTheFunctionsThatReadThem(t *testing.T) {
	// Asset metadata names each layer's folder in the cloud assembly.
	out := t.TempDir()
	s := synthApp(t, AgentgateStackProps{ModelArns: []string{testModelArn},
		DirectoryFile: writeFile(t, "directory.json", testDirectoryJSON), PolicyFile: writeFile(t, "policy.json", testPolicyJSON)},
		&awscdk.AppProps{Outdir: jsii.String(out), Context: &map[string]any{"aws:cdk:enable-asset-metadata": true}})
	must(t, "two layers", func() { s.assert.ResourceCountIs(str("AWS::Lambda::LayerVersion"), jsii.Number(2)) })
	dirID, dirLayer := s.resource(t, "AWS::Lambda::LayerVersion", func(p map[string]any) bool {
		return strings.Contains(render(p["Description"]), DirectoryLayerPath)
	})
	polID, polLayer := s.resource(t, "AWS::Lambda::LayerVersion", func(p map[string]any) bool {
		return strings.Contains(render(p["Description"]), PolicyLayerPath)
	})
	if got := layerContents(t, out, dirLayer, "agentgate/directory.json"); got != testDirectoryJSON {
		t.Errorf("directory layer holds %q", got)
	}
	if got := layerContents(t, out, polLayer, "agentgate/policy.json"); got != testPolicyJSON {
		t.Errorf("policy layer holds %q", got)
	}
	if DirectoryLayerPath != "/opt/agentgate/directory.json" || PolicyLayerPath != "/opt/agentgate/policy.json" {
		t.Errorf("layer paths %s, %s: want them under /opt/agentgate", DirectoryLayerPath, PolicyLayerPath)
	}

	base := defaultTemplate(t)
	for _, name := range FunctionNames {
		_, fn := s.functionByName(t, testStackName+"-"+name)
		env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		wantLayers, wantPolicy := "${"+dirID+"} | ${"+polID+"}", any(PolicyLayerPath)
		if name == "purge" {
			wantLayers, wantPolicy = "${"+dirID+"}", nil
		}
		if env["AGENTGATE_DIRECTORY"] != DirectoryLayerPath || env["AGENTGATE_POLICY"] != wantPolicy {
			t.Errorf("%s: AGENTGATE_DIRECTORY=%v AGENTGATE_POLICY=%v, want %s and %v", name,
				env["AGENTGATE_DIRECTORY"], env["AGENTGATE_POLICY"], DirectoryLayerPath, wantPolicy)
		}
		if got := render(fn["Layers"]); got != wantLayers {
			t.Errorf("%s: layers %q, want %q", name, got, wantLayers)
		}
		got, want := renderStatements(roleStatements(t, s, functionRole(t, s, name))), renderStatements(roleStatements(t, base, functionRole(t, base, name)))
		if got != want {
			t.Errorf("%s: role statements\n%s\nwant those of a stack without directory and policy\n%s", name, got, want)
		}
	}
}

// renderStatements is a role's statements in a stable order.
func renderStatements(stmts []statement) string {
	out := make([]string, len(stmts))
	for i, st := range stmts {
		out[i] = fmt.Sprintf("%+v", st)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestGovernanceFilesAreOptional: a directory alone reaches the three
// functions and no AGENTGATE_POLICY is set; a policy alone (no groups)
// reaches the workers only.
func TestGovernanceFilesAreOptional(t *testing.T) {
	dirOnly := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, DirectoryFile: writeFile(t, "directory.json", testDirectoryJSON)})
	polOnly := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn},
		PolicyFile: writeFile(t, "policy.json", `{"version":1,"rules":[{"id":"no-deletes","tools":["delete_*"],"outcome":"deny"}]}`)})
	for _, name := range FunctionNames {
		_, fn := dirOnly.functionByName(t, testStackName+"-"+name)
		env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, ok := env["AGENTGATE_POLICY"]; ok || env["AGENTGATE_DIRECTORY"] != DirectoryLayerPath || len(list(fn["Layers"])) != 1 {
			t.Errorf("directory only, %s: env %v, layers %s", name, env, render(fn["Layers"]))
		}
		_, fn = polOnly.functionByName(t, testStackName+"-"+name)
		env = fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		wantLayers, wantPolicy := 1, any(PolicyLayerPath)
		if name == "purge" {
			wantLayers, wantPolicy = 0, nil
		}
		if _, ok := env["AGENTGATE_DIRECTORY"]; ok || env["AGENTGATE_POLICY"] != wantPolicy || len(list(fn["Layers"])) != wantLayers {
			t.Errorf("policy only, %s: env %v, layers %s", name, env, render(fn["Layers"]))
		}
	}
}

// TestGovernanceIsValidatedAtSynth: a CEL error, a group the directory
// lacks (or no directory at all), a broken directory or a missing file
// stops synth with an error naming the file and the rule or entry.
func TestGovernanceIsValidatedAtSynth(t *testing.T) {
	dir := writeFile(t, "directory.json", testDirectoryJSON)
	groupRule := `{"version":1,"rules":[{"id":"fin","tools":["*"],"outcome":"require_approval","approvers":["group:finance"]}]}`
	tests := []struct{ name, directory, policy, want string }{
		{"CEL error", dir, `{"version":1,"rules":[{"id":"prod","tools":["*"],"when":"args.path.startsWith(","outcome":"deny"}]}`, `rules[0] "prod": when:`},
		{"CEL not bool", dir, `{"version":1,"rules":[{"id":"sz","tools":["*"],"when":"size(args)","outcome":"deny"}]}`, `rules[0] "sz": when:`},
		{"unknown group", dir, groupRule, "no such group"},
		{"group without directory", "", groupRule, `rules[0] "fin"`},
		{"unknown field", dir, `{"version":1,"rules":[],"extra":1}`, `unknown field "extra"`},
		{"broken directory", writeFile(t, "bad.json", `{"version":2,"persons":[]}`), "", "version: got 2"},
		{"missing policy", dir, "-", "no-such-policy.json"},
		{"missing directory", filepath.Join(t.TempDir(), "no-such-directory.json"), "", "no-such-directory.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := AgentgateStackProps{DirectoryFile: tt.directory}
			switch tt.policy {
			case "":
			case "-":
				p.PolicyFile = filepath.Join(t.TempDir(), "no-such-policy.json")
			default:
				p.PolicyFile = writeFile(t, "policy.json", tt.policy)
			}
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	p := AgentgateStackProps{DirectoryFile: dir, PolicyFile: writeFile(t, "policy.json", testPolicyJSON)}
	if err := p.Validate(); err != nil {
		t.Errorf("valid files: %v", err)
	}
}

func TestPolicyConditions(t *testing.T) {
	got, err := PolicyConditions(writeFile(t, "policy.json", testPolicyJSON))
	if err != nil || !slices.Equal(got, []string{"big-deletes"}) {
		t.Errorf("PolicyConditions = %v, %v; want [big-deletes]", got, err)
	}
	got, err = PolicyConditions(writeFile(t, "policy.json", `{"version":1,"rules":[{"id":"no-deletes","tools":["delete_*"],"outcome":"deny"}]}`))
	if err != nil || len(got) != 0 {
		t.Errorf("no conditions: %v, %v", got, err)
	}
	if _, err := PolicyConditions(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing file: want an error")
	}
}

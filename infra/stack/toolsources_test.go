package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

const (
	toolSecretA = "arn:aws:secretsmanager:us-east-1:123456789012:secret:crm-token-AbCdEf"
	toolSecretB = "arn:aws:secretsmanager:us-east-1:123456789012:secret:billing-key-GhIjKl"
)

func writeToolSources(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool-sources.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestToolSourcesShipInALayerWithOnlyTheirSecrets(t *testing.T) {
	path := writeToolSources(t, `{"servers": [
	  {"name": "crm", "url": "https://crm.example.com/mcp", "trust_annotations": true,
	   "headers": {"Authorization": {"secret_arn": "`+toolSecretA+`", "prefix": "Bearer "}}},
	  {"name": "billing", "url": "https://billing.example.com/mcp",
	   "headers": {"X-Api-Key": {"secret_arn": "`+toolSecretB+`"}, "X-Other": {"secret_arn": "`+toolSecretA+`"}}}
	]}`)
	s := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, ToolSourcesFile: path})

	must(t, "one layer", func() { s.assert.ResourceCountIs(str("AWS::Lambda::LayerVersion"), jsii.Number(1)) })
	layerID, _ := s.resource(t, "AWS::Lambda::LayerVersion", func(map[string]any) bool { return true })
	for _, name := range []string{"startrun", "resume", "purge"} {
		_, fn := s.functionByName(t, testStackName+"-"+name)
		env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		layers := render(fn["Layers"])
		stmts := roleStatements(t, s, functionRole(t, s, name))
		var secrets []string
		for _, st := range stmts {
			if st.sid == sidReadToolSecrets {
				if strings.Join(st.actions, ",") != "secretsmanager:GetSecretValue" {
					t.Errorf("%s: %s allows %v, want only secretsmanager:GetSecretValue", name, st.sid, st.actions)
				}
				secrets = append(secrets, st.resources...)
			}
		}
		if name == "purge" {
			if _, ok := env["AGENTGATE_TOOL_SOURCES"]; ok || fn["Layers"] != nil || len(secrets) > 0 {
				t.Errorf("purge runs no tools: env %v, layers %q, secrets %v", env["AGENTGATE_TOOL_SOURCES"], layers, secrets)
			}
			continue
		}
		if got := env["AGENTGATE_TOOL_SOURCES"]; got != "/opt/agentgate/tool-sources.json" {
			t.Errorf("%s: AGENTGATE_TOOL_SOURCES = %v", name, got)
		}
		if layers != "${"+layerID+"}" {
			t.Errorf("%s: layers %q, want the tool-sources layer %s", name, layers, layerID)
		}
		if strings.Join(secrets, ",") != toolSecretB+","+toolSecretA && strings.Join(secrets, ",") != toolSecretA+","+toolSecretB {
			t.Errorf("%s: may read %v, want exactly the two secrets of the file", name, secrets)
		}
	}
}

func TestToolSourcesFileIsValidatedAtSynth(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"env header on Lambda", `{"servers":[{"name":"crm","url":"https://c/mcp","headers":{"X-Key":{"env":"KEY"}}}]}`,
			"servers[0] (crm): headers.X-Key.env: environment variables are for the local server"},
		{"unknown field", `{"servers":[{"name":"crm","url":"https://c/mcp","token":"x"}]}`, `unknown field "token"`},
		{"connect timeout over API Gateway's wait", `{"servers":[{"name":"crm","url":"https://c/mcp","connect_timeout_seconds":21}]}`,
			"servers[0] (crm): connect_timeout_seconds: 21 must be between 1 and 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AgentgateStackProps{ToolSourcesFile: writeToolSources(t, tt.body)}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := (AgentgateStackProps{ToolSourcesFile: filepath.Join(t.TempDir(), "missing.json")}).Validate(); err == nil {
		t.Fatal("a missing file must be refused")
	}
}

func TestNoToolSourcesNoLayer(t *testing.T) {
	s := defaultTemplate(t)
	must(t, "no layer", func() { s.assert.ResourceCountIs(str("AWS::Lambda::LayerVersion"), jsii.Number(0)) })
	for _, name := range []string{"startrun", "resume"} {
		for _, st := range roleStatements(t, s, functionRole(t, s, name)) {
			if st.sid == sidReadToolSecrets {
				t.Errorf("%s may read tool secrets without a tool-sources file", name)
			}
		}
	}
}

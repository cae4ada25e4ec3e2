package stack

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// nagReport is one synth checked by the three packs: the findings nothing
// accepts, the report rows, and the suppressions in the template.
type nagReport struct {
	unaccepted []Finding
	// rows are the CSV report lines of every pack: rule id, resource,
	// compliance, exception reason.
	rows [][]string
	// suppressed are the suppressions in the template's cdk_nag metadata,
	// as "path rule" or "path rule[finding]".
	suppressed map[string]bool
}

func nagCheck(t *testing.T, props AgentgateStackProps) nagReport {
	t.Helper()
	if props.AssetDir == "" {
		props.AssetDir = fakeAssets(t)
	}
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out),
		Context: &map[string]any{"aws:cdk:enable-path-metadata": true}})
	NewAgentgateStack(app, testStackName, &props)
	CheckCompliance(app, true)
	asm := app.Synth(nil)
	r := nagReport{unaccepted: UnacceptedFindings(asm, testStackName), suppressed: map[string]bool{}}
	for _, pack := range NagPacks {
		f, err := os.Open(filepath.Join(out, NagReportFile(pack, testStackName)))
		if err != nil {
			t.Fatalf("report of %s: %v", pack, err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil || len(rows) < 2 {
			t.Fatalf("report of %s: %d rows, %v", pack, len(rows), err)
		}
		r.rows = append(r.rows, rows[1:]...)
	}
	raw, err := os.ReadFile(filepath.Join(out, testStackName+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Metadata struct {
				Path   string `json:"aws:cdk:path"`
				CdkNag struct {
					Rules []struct {
						ID        string `json:"id"`
						Reason    string `json:"reason"`
						AppliesTo []any  `json:"applies_to"`
					} `json:"rules_to_suppress"`
				} `json:"cdk_nag"`
			}
		}
	}
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	for _, res := range tpl.Resources {
		for _, rule := range res.Metadata.CdkNag.Rules {
			key := res.Metadata.Path + " " + rule.ID
			if len(rule.AppliesTo) == 0 {
				r.suppressed[key] = true
			}
			for _, a := range rule.AppliesTo {
				if s, ok := a.(string); ok {
					r.suppressed[key+"["+s+"]"] = true
				}
			}
		}
	}
	return r
}

// The stack passes the three packs in every configuration the README
// documents: nothing is left that is neither fixed nor accepted, and every
// accepted finding still occurs (a suppression whose finding went away is
// removed, not kept as a blanket).
func TestNagFindingsAllFixedOrAccepted(t *testing.T) {
	tests := []struct {
		name  string
		props AgentgateStackProps
	}{
		{"production", AgentgateStackProps{DeletionProtection: true, Tracing: true, ModelArns: []string{testModelArn}}},
		{"emulator (no tracing, no protection)", AgentgateStackProps{}},
		{"caps, API key, alarm mail, own account role, directory and policy", AgentgateStackProps{
			Tracing: true, StartRunConcurrency: 20, ResumeConcurrency: 50, AlarmEmail: "ops@example.com",
			Model: "anthropic:claude-sonnet-4-5", SkipAPIGatewayAccountRole: true,
			APIKeySecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/anthropic-AbCdEf",
			DirectoryFile:   writeFile(t, "directory.json", testDirectoryJSON), PolicyFile: writeFile(t, "policy.json", testPolicyJSON),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := nagCheck(t, tt.props)
			for _, f := range r.unaccepted {
				t.Errorf("unaccepted: %s", f)
			}
			used := map[string]bool{}
			suppressed := 0
			for _, row := range r.rows {
				rule, path, compliance, reason := row[0], row[1], row[2], row[3]
				switch compliance {
				case "Non-Compliant":
					t.Errorf("non-compliant in the report: %v", row)
				case "Suppressed":
					suppressed++
					key := path + " " + rule
					used[key] = true
					if finding, rest, ok := strings.Cut(strings.TrimPrefix(reason, "["), "] "); ok && strings.HasPrefix(reason, "[") {
						used[key+"["+finding+"]"] = true
						reason = rest
					}
					if len(reason) < 60 {
						t.Errorf("%s on %s: reason %q is too short to convince a reviewer", rule, path, reason)
					}
				}
			}
			for s := range r.suppressed {
				if !used[s] {
					t.Errorf("suppression %s accepts no finding: remove it from nag.go", s)
				}
			}
			t.Logf("%d findings accepted (%d distinct suppressions)", suppressed, len(r.suppressed))
		})
	}
}

package main

import (
	"slices"
	"strings"
	"testing"
)

func TestExpect(t *testing.T) {
	gapOK := func() (string, bool) { return "arm64", true }
	gapBad := func() (string, bool) { return "x86_64", false }
	tests := []struct {
		name      string
		emulator  string
		got, want string
		gap       func() (string, bool)
		pass      bool
		source    string
	}{
		{"live match", "moto", "arm64", "arm64", gapOK, true, "[live]"},
		{"moto gap, template right", "moto", "x86_64", "arm64", gapOK, true, "deployed template"},
		{"moto gap, template wrong", "moto", "x86_64", "arm64", gapBad, false, "deployed template x86_64"},
		{"moto, no known gap", "moto", "x86_64", "arm64", nil, false, "got x86_64"},
		{"localstack never falls back", "localstack", "x86_64", "arm64", gapOK, false, "got x86_64"},
		{"aws never falls back", "aws", "x86_64", "arm64", gapOK, false, "got x86_64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &checker{emulator: tt.emulator}
			c.expect("function", "architecture", tt.got, tt.want, tt.gap)
			if gotPass := c.passed == 1 && c.failed == 0; gotPass != tt.pass {
				t.Fatalf("passed=%d failed=%d, want pass=%t", c.passed, c.failed, tt.pass)
			}
			if line := c.lines[0]; !strings.Contains(line, tt.source) {
				t.Errorf("line %q does not mention %q", line, tt.source)
			}
		})
	}
}

func TestTemplateHelpers(t *testing.T) {
	tpl, err := parseTemplate(`{"Resources":{
		"Fn":{"Type":"AWS::Lambda::Function","Properties":{"Architectures":["arm64"],"Role":{"Ref":"R"}}},
		"B":{"Type":"AWS::S3::Bucket","Properties":{"VersioningConfiguration":{"Status":"Enabled"},
			"LifecycleConfiguration":{"Rules":[{"Prefix":"runs/","ExpirationInDays":90}]}}}}}`)
	if err != nil {
		t.Fatalf("parseTemplate: %v", err)
	}
	id, props, err := tpl.only("AWS::S3::Bucket")
	if err != nil || id != "B" {
		t.Fatalf("only(bucket) = %q, %v", id, err)
	}
	checks := map[string][2]string{
		"versioning": {flat(at(props, "VersioningConfiguration", "Status")), "Enabled"},
		"rule":       {flat(at(props, "LifecycleConfiguration", "Rules", 0)), "{ExpirationInDays=90 Prefix=runs/}"},
		"missing":    {flat(at(props, "LifecycleConfiguration", "Rules", 3)), ""},
		"arch":       {flat(at(tpl.props("Fn"), "Architectures")), "arm64"},
		"ref":        {flat(at(tpl.props("Fn"), "Role")), "${R}"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if _, _, err := tpl.only("AWS::Events::Rule"); err == nil {
		t.Error("only(absent type) = nil error, want one")
	}
	if got := quote("error: operation error S3: GetPublicAccessBlock, https response error StatusCode: 404, RequestID: x, api error NoSuchPublicAccessBlockConfiguration: not found"); got != "error: NoSuchPublicAccessBlockConfiguration: not found" {
		t.Errorf("quote(sdk error) = %q", got)
	}
}

// TestWantEnvTakesTheOptionalVariablesTheTemplateSets: a stack deployed
// with sesApi (scripts/infra-local.sh on LocalStack) gives each function
// AGENTGATE_SES_API, and one deployed with quorumCheck gives the workers
// AGENTGATE_QUORUM_CHECK; the checker failed such a function's environment
// as not the contract's.
func TestWantEnvTakesTheOptionalVariablesTheTemplateSets(t *testing.T) {
	tpl, err := parseTemplate(`{"Resources":{
		"Purge":{"Type":"AWS::Lambda::Function","Properties":{"Environment":{"Variables":{"AGENTGATE_TABLE":{"Ref":"T"},"AGENTGATE_SES_API":"v1"}}}},
		"Resume":{"Type":"AWS::Lambda::Function","Properties":{"Environment":{"Variables":{"AGENTGATE_TABLE":{"Ref":"T"}}}}},
		"StartRun":{"Type":"AWS::Lambda::Function","Properties":{"Environment":{"Variables":{"AGENTGATE_TABLE":{"Ref":"T"},"AGENTGATE_QUORUM_CHECK":"on"}}}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{template: tpl, physical: map[string][]resource{"AWS::Lambda::Function": {{"Purge", "Agentgate-purge"}, {"Resume", "Agentgate-resume"}, {"StartRun", "Agentgate-startrun"}}}}
	keys, values := c.wantEnv("PurgeFunctionName", "Agentgate-purge")
	if !slices.Contains(keys, "AGENTGATE_SES_API") || values["AGENTGATE_SES_API"] != "v1" || len(keys) != len(contractEnv["PurgeFunctionName"])+1 {
		t.Errorf("purge: %v %v, want the contract's variables and AGENTGATE_SES_API=v1", keys, values)
	}
	keys, values = c.wantEnv("ResumeFunctionName", "Agentgate-resume")
	if !slices.Equal(keys, contractEnv["ResumeFunctionName"]) || len(values) != 0 {
		t.Errorf("resume: %v %v, want the contract's variables alone", keys, values)
	}
	keys, values = c.wantEnv("StartRunFunctionName", "Agentgate-startrun")
	if !slices.Contains(keys, "AGENTGATE_QUORUM_CHECK") || values["AGENTGATE_QUORUM_CHECK"] != "on" || len(keys) != len(contractEnv["StartRunFunctionName"])+1 {
		t.Errorf("startrun: %v %v, want the contract's variables and AGENTGATE_QUORUM_CHECK=on", keys, values)
	}
}

// TestArchitectureFollowsTheFlag: a stack deployed with x86_64 functions
// (scripts/infra-local.sh on LocalStack on an x86 Docker host, which runs
// them there) passes with -architecture x86_64 and fails the default
// arm64; the checker failed every such deploy, as it wanted arm64 only.
func TestArchitectureFollowsTheFlag(t *testing.T) {
	tpl, err := parseTemplate(`{"Resources":{"Fn":{"Type":"AWS::Lambda::Function","Properties":{"Architectures":["x86_64"]}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		emulator, flag, live string
		pass                 bool
	}{
		{"localstack", "x86_64", "x86_64", true},
		{"localstack", "", "x86_64", false},
		{"localstack", "x86_64", "arm64", false},
		{"moto", "x86_64", "x86_64", true},
		// moto reports x86_64 whatever was deployed: the template decides.
		{"moto", "arm64", "x86_64", false},
	}
	for _, tt := range tests {
		c := &checker{emulator: tt.emulator, expectArch: tt.flag, template: tpl,
			physical: map[string][]resource{"AWS::Lambda::Function": {{logical: "Fn", physical: "Agentgate-startrun"}}}}
		c.checkArchitecture("function", "Agentgate-startrun", tt.live)
		if got := c.passed == 1 && c.failed == 0; got != tt.pass {
			t.Errorf("%s, -architecture %q, live %s: pass = %t, want %t (%s)", tt.emulator, tt.flag, tt.live, got, tt.pass, strings.Join(c.lines, "; "))
		}
	}
}

// TestQueueRetentionFromTheTemplate: the stack shortens the failed-events
// queue's retention to a deployment retention under 14 days; the checker
// wants what the deployed template sets, and 14 days without one.
func TestQueueRetentionFromTheTemplate(t *testing.T) {
	for body, want := range map[string]string{
		`{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{"MessageRetentionPeriod":86400}}}}`:   "86400",
		`{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{"MessageRetentionPeriod":1209600}}}}`: "1209600",
		`{"Resources":{}}`: "1209600",
	} {
		tpl, err := parseTemplate(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := (&checker{template: tpl}).wantQueueRetention(); got != want {
			t.Errorf("template %s: want retention %s, got %s", body, want, got)
		}
	}
}

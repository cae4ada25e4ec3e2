package stack

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/routes"
)

func TestTable(t *testing.T) {
	s := defaultTemplate(t)
	must(t, "one table", func() { s.assert.ResourceCountIs(str("AWS::DynamoDB::Table"), jsii.Number(1)) })
	must(t, "table per CONTRACTS.md", func() {
		s.assert.HasResourceProperties(str("AWS::DynamoDB::Table"), obj(map[string]any{
			"KeySchema": []any{
				map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"AttributeDefinitions": assertions.Match_ArrayEquals(arr(
				map[string]any{"AttributeName": "pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "sk", "AttributeType": "S"},
				map[string]any{"AttributeName": "due_pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "due_at", "AttributeType": "N"},
			)),
			"BillingMode": "PAY_PER_REQUEST",
			"GlobalSecondaryIndexes": []any{map[string]any{
				"IndexName": "due-index",
				"KeySchema": []any{
					map[string]any{"AttributeName": "due_pk", "KeyType": "HASH"},
					map[string]any{"AttributeName": "due_at", "KeyType": "RANGE"},
				},
				"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
			}},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "expires_at", "Enabled": true},
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"DeletionProtectionEnabled":        false,
			"ProvisionedThroughput":            assertions.Match_Absent(),
		}))
	})
}

func TestDeletionProtection(t *testing.T) {
	tests := []struct {
		name   string
		on     bool
		policy string
	}{
		{"on: protected and retained", true, "Retain"},
		{"off: deleted with the stack", false, "Delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s synthesized
			if tt.on {
				s = synth(t, AgentgateStackProps{DeletionProtection: true})
			} else {
				s = defaultTemplate(t)
			}
			must(t, "table", func() {
				s.assert.HasResource(str("AWS::DynamoDB::Table"), obj(map[string]any{
					"Properties":     map[string]any{"DeletionProtectionEnabled": tt.on},
					"DeletionPolicy": tt.policy,
				}))
			})
			for _, typ := range []string{"AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup"} {
				for id, r := range s.resources(typ) {
					if got := r["DeletionPolicy"]; got != tt.policy {
						t.Errorf("%s %s: DeletionPolicy %v, want %s", typ, id, got, tt.policy)
					}
				}
			}
		})
	}
}

func TestBucket(t *testing.T) {
	s := defaultTemplate(t)
	keyID, _ := s.resource(t, "AWS::KMS::Key", isStateKey)
	must(t, "key rotation", func() {
		s.assert.HasResourceProperties(str("AWS::KMS::Key"), obj(map[string]any{"EnableKeyRotation": true}))
	})
	// The key policy is CDK's default: kms:* for the account root only, which
	// delegates access to IAM; the functions get Decrypt and GenerateDataKey
	// through their own policies (iam_test.go).
	_, key := s.resource(t, "AWS::KMS::Key", isStateKey)
	var principals []string
	for _, st := range list(key["Properties"].(map[string]any)["KeyPolicy"].(map[string]any)["Statement"]) {
		principals = append(principals, render(st.(map[string]any)["Principal"]))
	}
	if want := []string{"{AWS=arn:${AWS::Partition}:iam::${AWS::AccountId}:root}"}; !slices.Equal(principals, want) {
		t.Errorf("key policy principals %v, want %v", principals, want)
	}
	must(t, "bucket", func() {
		s.assert.HasResourceProperties(str("AWS::S3::Bucket"), obj(map[string]any{
			"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{map[string]any{
				"BucketKeyEnabled": true,
				"ServerSideEncryptionByDefault": map[string]any{
					"SSEAlgorithm":   "aws:kms",
					"KMSMasterKeyID": map[string]any{"Fn::GetAtt": []any{keyID, "Arn"}},
				},
			}}},
			"PublicAccessBlockConfiguration": map[string]any{
				"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
			},
			"VersioningConfiguration": map[string]any{"Status": "Enabled"},
			"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayEquals(arr(
				assertions.Match_ObjectLike(obj(map[string]any{
					"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1},
					"Prefix":                         assertions.Match_Absent(),
					"Status":                         "Enabled",
				})),
				assertions.Match_ObjectLike(obj(map[string]any{
					"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": DefaultNoncurrentDays},
					"ExpiredObjectDeleteMarker":   true,
					"Status":                      "Enabled",
				})),
				assertions.Match_ObjectLike(obj(map[string]any{
					"Prefix":           "runs/",
					"ExpirationInDays": DefaultStateBlobDays,
					"Status":           "Enabled",
				})),
			))},
		}))
	})
	must(t, "TLS enforced by the bucket policy", func() {
		s.assert.HasResourceProperties(str("AWS::S3::BucketPolicy"), obj(map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(obj(map[string]any{
				"Statement": assertions.Match_ArrayWith(arr(assertions.Match_ObjectLike(obj(map[string]any{
					"Effect":    "Deny",
					"Action":    "s3:*",
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				})))),
			})),
		}))
	})
}

// wantEnv is the environment of each function per CONTRACTS.md.
var wantEnv = map[string][]string{
	"startrun": {"AGENTGATE_TABLE", "AGENTGATE_BUCKET", "AGENTGATE_KMS_KEY_ID", "AGENTGATE_STARTRUN_FUNCTION",
		"AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_MAIL_FROM", "AGENTGATE_APPROVAL_TTL",
		"AGENTGATE_RETENTION", "AGENTGATE_DUE_SHARDS"},
	"resume": {"AGENTGATE_TABLE", "AGENTGATE_BUCKET", "AGENTGATE_KMS_KEY_ID", "AGENTGATE_RESUME_FUNCTION",
		"AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_MAIL_FROM", "AGENTGATE_APPROVAL_TTL",
		"AGENTGATE_RETENTION", "AGENTGATE_DUE_SHARDS"},
	"purge": {"AGENTGATE_TABLE", "AGENTGATE_BUCKET", "AGENTGATE_KMS_KEY_ID", "AGENTGATE_STARTRUN_FUNCTION",
		"AGENTGATE_RESUME_FUNCTION", "AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_MAIL_FROM",
		"AGENTGATE_RETENTION", "AGENTGATE_DUE_SHARDS"},
}

func TestFunctions(t *testing.T) {
	s := synth(t, AgentgateStackProps{Model: "bedrock:m", ModelArns: []string{testModelArn}})
	must(t, "three functions", func() { s.assert.ResourceCountIs(str("AWS::Lambda::Function"), jsii.Number(3)) })
	tableID, _ := s.resource(t, "AWS::DynamoDB::Table", func(map[string]any) bool { return true })
	bucketID, _ := s.resource(t, "AWS::S3::Bucket", func(map[string]any) bool { return true })
	apiID, _ := s.resource(t, "AWS::ApiGateway::RestApi", func(map[string]any) bool { return true })
	for _, name := range FunctionNames {
		t.Run(name, func(t *testing.T) {
			_, p := s.functionByName(t, testStackName+"-"+name)
			checks := map[string][2]any{
				"Runtime":       {p["Runtime"], "provided.al2023"},
				"Architectures": {render(p["Architectures"]), "arm64"},
				"Handler":       {p["Handler"], "bootstrap"},
				"TracingConfig": {p["TracingConfig"], nil},
			}
			for field, c := range checks {
				if c[0] != c[1] {
					t.Errorf("%s = %v, want %v", field, c[0], c[1])
				}
			}
			if _, ok := p["LoggingConfig"].(map[string]any)["LogGroup"]; !ok {
				t.Errorf("LoggingConfig = %v, want the function's own log group", render(p["LoggingConfig"]))
			}

			env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			want := slices.Clone(wantEnv[name])
			if name != "purge" {
				want = append(want, "AGENTGATE_MODEL")
			}
			sort.Strings(want)
			var got []string
			for k := range env {
				got = append(got, k)
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("environment keys\n got %v\nwant %v", got, want)
			}
			values := map[string]string{
				"AGENTGATE_TABLE":           "${" + tableID + "}",
				"AGENTGATE_BUCKET":          "${" + bucketID + "}",
				"AGENTGATE_MAIL_FROM":       "${MailFrom}",
				"AGENTGATE_RETENTION":       DefaultRetention,
				"AGENTGATE_DUE_SHARDS":      "8",
				"AGENTGATE_PUBLIC_BASE_URL": "https://${" + apiID + "}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1",
			}
			if name != "purge" {
				values["AGENTGATE_MODEL"] = "bedrock:m"
				values["AGENTGATE_APPROVAL_TTL"] = DefaultApprovalTTL
			}
			if name != "resume" {
				values["AGENTGATE_STARTRUN_FUNCTION"] = "Agentgate-startrun"
			}
			if name != "startrun" {
				values["AGENTGATE_RESUME_FUNCTION"] = "Agentgate-resume"
			}
			for k, want := range values {
				if got := render(env[k]); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
		})
	}
	must(t, "function log groups keep a month", func() {
		// three functions, API access and execution logs, WAF logs
		s.assert.ResourcePropertiesCountIs(str("AWS::Logs::LogGroup"), obj(map[string]any{"RetentionInDays": 30}), jsii.Number(6))
	})
}

func TestArchitecture(t *testing.T) {
	s := synth(t, AgentgateStackProps{Architecture: "x86_64"})
	must(t, "x86_64 functions", func() {
		s.assert.ResourcePropertiesCountIs(str("AWS::Lambda::Function"),
			obj(map[string]any{"Architectures": []any{"x86_64"}}), jsii.Number(3))
	})
	if err := (AgentgateStackProps{Architecture: "riscv"}).Validate(); err == nil {
		t.Error("Validate(architecture riscv) = nil, want an error")
	}
}

func TestModelUnsetLeavesEnvUnset(t *testing.T) {
	s := defaultTemplate(t)
	_, p := s.functionByName(t, "Agentgate-startrun")
	env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
	if v, ok := env["AGENTGATE_MODEL"]; ok {
		t.Errorf("AGENTGATE_MODEL = %v, want unset when no model is configured", v)
	}
}

func TestTracing(t *testing.T) {
	s := synth(t, AgentgateStackProps{Tracing: true})
	must(t, "functions traced", func() {
		s.assert.ResourcePropertiesCountIs(str("AWS::Lambda::Function"),
			obj(map[string]any{"TracingConfig": map[string]any{"Mode": "Active"}}), jsii.Number(3))
	})
	must(t, "stage traced", func() {
		s.assert.HasResourceProperties(str("AWS::ApiGateway::Stage"), obj(map[string]any{"TracingEnabled": true}))
	})
}

func TestPublicBaseURLOverride(t *testing.T) {
	s := synth(t, AgentgateStackProps{PublicBaseURL: "https://approvals.example.com"})
	for _, name := range FunctionNames {
		_, p := s.functionByName(t, "Agentgate-"+name)
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := env["AGENTGATE_PUBLIC_BASE_URL"]; got != "https://approvals.example.com" {
			t.Errorf("%s: AGENTGATE_PUBLIC_BASE_URL = %v, want the override", name, render(got))
		}
	}
}

// TestPublicBaseURLPlaceholders: {apiId} and {stage} in the public base
// URL become the REST API's id and the stage name, so one deploy onto
// LocalStack mails links that reach its API (scripts/infra-local.sh); the
// default (the AWS stage URL) could not be reached there, and the id is
// known only once the stack is deployed (outside tester helper-113).
func TestPublicBaseURLPlaceholders(t *testing.T) {
	for base, want := range map[string]string{
		"http://{apiId}.execute-api.localhost.localstack.cloud:4566/{stage}": "http://${API}.execute-api.localhost.localstack.cloud:4566/v2",
		"http://localhost:4566/restapis/{apiId}/{stage}/_user_request_":      "http://localhost:4566/restapis/${API}/v2/_user_request_",
		"https://approvals.example.com/{stage}":                              "https://approvals.example.com/v2",
	} {
		s := synth(t, AgentgateStackProps{PublicBaseURL: base, StageName: "v2"})
		apiID, _ := s.resource(t, "AWS::ApiGateway::RestApi", func(map[string]any) bool { return true })
		want = strings.ReplaceAll(want, "API", apiID)
		for _, name := range FunctionNames {
			_, p := s.functionByName(t, "Agentgate-"+name)
			env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			if got := render(env["AGENTGATE_PUBLIC_BASE_URL"]); got != want {
				t.Errorf("%s with publicBaseUrl %s: AGENTGATE_PUBLIC_BASE_URL = %s, want %s", name, base, got, want)
			}
		}
	}
	for _, bad := range []string{
		"http://{apiID}.execute-api.localhost.localstack.cloud:4566/v1", // not a placeholder
		"localhost:4566/v1",
		"ftp://approvals.example.com",
		"https://approvals.example.com/?x=1",
		"https://user:pw@approvals.example.com",
	} {
		if err := (AgentgateStackProps{PublicBaseURL: bad}).Validate(); err == nil || !strings.Contains(err.Error(), "public base URL") {
			t.Errorf("Validate(publicBaseUrl %s) = %v, want an error about the public base URL", bad, err)
		}
	}
}

// apiPaths maps each ApiGateway::Resource logical id to its full path.
func apiPaths(s synthesized) map[string]string {
	res := s.resources("AWS::ApiGateway::Resource")
	paths := map[string]string{}
	var resolve func(id string) string
	resolve = func(id string) string {
		if p, ok := paths[id]; ok {
			return p
		}
		props := res[id]["Properties"].(map[string]any)
		parent := props["ParentId"].(map[string]any)
		prefix := ""
		if ref, ok := parent["Ref"].(string); ok {
			prefix = resolve(ref)
		}
		paths[id] = prefix + "/" + props["PathPart"].(string)
		return paths[id]
	}
	for id := range res {
		resolve(id)
	}
	return paths
}

func TestRoutes(t *testing.T) {
	s := defaultTemplate(t)
	paths := apiPaths(s)
	fnIDs := map[string]string{}
	for _, name := range FunctionNames {
		fnIDs[name], _ = s.functionByName(t, "Agentgate-"+name)
	}
	type route struct{ method, path, fn, auth string }
	var got []route
	for id, m := range s.resources("AWS::ApiGateway::Method") {
		p := m["Properties"].(map[string]any)
		integ := p["Integration"].(map[string]any)
		if integ["Type"] != "AWS_PROXY" || integ["IntegrationHttpMethod"] != "POST" {
			t.Errorf("method %s: integration %s, want a Lambda proxy (AWS_PROXY, POST)", id, render(integ))
		}
		uri := render(integ["Uri"])
		fn := ""
		for name, fid := range fnIDs {
			if strings.Contains(uri, "${"+fid+".Arn}") {
				fn = name
			}
		}
		ref, _ := p["ResourceId"].(map[string]any)["Ref"].(string)
		got = append(got, route{p["HttpMethod"].(string), paths[ref], fn, p["AuthorizationType"].(string)})
	}
	var want []route
	for _, r := range routes.Deployed() {
		auth := "NONE"
		if r.Authenticated {
			auth = "AWS_IAM"
		}
		want = append(want, route{r.Method, r.Path, string(r.Function), auth})
	}
	key := func(r route) string { return r.path + " " + r.method }
	sort.Slice(got, func(i, j int) bool { return key(got[i]) < key(got[j]) })
	sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
	if !slices.Equal(got, want) {
		t.Errorf("routes\n got %v\nwant %v", got, want)
	}
	for _, r := range want {
		if strings.HasPrefix(r.path, "/runs") && r.auth != "AWS_IAM" {
			t.Errorf("%s %s: /runs routes must require AWS_IAM", r.method, r.path)
		}
	}
}

func TestStage(t *testing.T) {
	s := defaultTemplate(t)
	logsID := ""
	for id := range s.resources("AWS::Logs::LogGroup") {
		if strings.HasPrefix(id, "ApiAccessLogs") {
			logsID = id
		}
	}
	must(t, "REST API is regional", func() {
		s.assert.HasResourceProperties(str("AWS::ApiGateway::RestApi"), obj(map[string]any{
			"EndpointConfiguration": map[string]any{"Types": []any{"REGIONAL"}},
		}))
	})
	must(t, "stage throttled with access logs", func() {
		s.assert.HasResourceProperties(str("AWS::ApiGateway::Stage"), obj(map[string]any{
			"StageName": "v1",
			"AccessLogSetting": assertions.Match_ObjectLike(obj(map[string]any{
				"DestinationArn": map[string]any{"Fn::GetAtt": []any{logsID, "Arn"}},
				"Format":         assertions.Match_StringLikeRegexp(str(`\$context\.requestId`)),
			})),
			"MethodSettings": assertions.Match_ArrayWith(arr(assertions.Match_ObjectLike(obj(map[string]any{
				"HttpMethod": "*", "ResourcePath": "/*",
				"ThrottlingRateLimit": DefaultThrottleRateLimit, "ThrottlingBurstLimit": DefaultThrottleBurstLimit,
			})))),
		}))
	})
	if logsID == "" {
		t.Error("no access log group")
	}
	must(t, "account role for access logs", func() {
		s.assert.ResourceCountIs(str("AWS::ApiGateway::Account"), jsii.Number(1))
	})
	skip := synth(t, AgentgateStackProps{SkipAPIGatewayAccountRole: true, StageName: "prod"})
	must(t, "account role skipped", func() {
		skip.assert.ResourceCountIs(str("AWS::ApiGateway::Account"), jsii.Number(0))
	})
	must(t, "stage name", func() {
		skip.assert.HasResourceProperties(str("AWS::ApiGateway::Stage"), obj(map[string]any{"StageName": "prod"}))
	})
}

func TestPurgeSchedule(t *testing.T) {
	tests := []struct {
		minutes int
		want    string
	}{
		{0, "rate(1 minute)"},
		{5, "rate(5 minutes)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			s := defaultTemplate(t)
			if tt.minutes != 0 {
				s = synth(t, AgentgateStackProps{PurgeRateMinutes: tt.minutes})
			}
			purgeID, _ := s.functionByName(t, "Agentgate-purge")
			must(t, "rule", func() {
				s.assert.HasResourceProperties(str("AWS::Events::Rule"), obj(map[string]any{
					"ScheduleExpression": tt.want,
					"State":              "ENABLED",
					"Targets": []any{assertions.Match_ObjectLike(obj(map[string]any{
						"Arn": map[string]any{"Fn::GetAtt": []any{purgeID, "Arn"}},
					}))},
				}))
			})
			must(t, "events may invoke purge", func() {
				s.assert.HasResourceProperties(str("AWS::Lambda::Permission"), obj(map[string]any{
					"Action":       "lambda:InvokeFunction",
					"Principal":    "events.amazonaws.com",
					"FunctionName": map[string]any{"Fn::GetAtt": []any{purgeID, "Arn"}},
				}))
			})
		})
	}
}

func TestOutputsAndParameters(t *testing.T) {
	s := defaultTemplate(t)
	for _, name := range []string{"ApiUrl", "TableName", "BucketName", "KmsKeyArn",
		"StartRunFunctionName", "ResumeFunctionName", "PurgeFunctionName", "FailedEventsQueueUrl", "AlarmTopicArn"} {
		must(t, "output "+name, func() { s.assert.HasOutput(str(name), obj(map[string]any{})) })
	}
	outputs := s.json["Outputs"].(map[string]any)
	if len(outputs) != 9 {
		var names []string
		for k := range outputs {
			names = append(names, k)
		}
		sort.Strings(names)
		t.Errorf("outputs %v, want exactly the nine above", names)
	}
	apiID, _ := s.resource(t, "AWS::ApiGateway::RestApi", func(map[string]any) bool { return true })
	if got, want := render(outputs["ApiUrl"].(map[string]any)["Value"]), "https://${"+apiID+"}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1/"; got != want {
		t.Errorf("ApiUrl = %s, want %s", got, want)
	}
	for _, name := range []string{"MailFrom", "SesIdentity"} {
		must(t, "parameter "+name, func() {
			s.assert.HasParameter(str(name), obj(map[string]any{"Type": "String", "Default": assertions.Match_Absent()}))
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		props   AgentgateStackProps
		wantErr string
	}{
		{"defaults", AgentgateStackProps{}, ""},
		{"bad ttl", AgentgateStackProps{ApprovalTTL: "a day"}, "approval TTL"},
		{"bad retention", AgentgateStackProps{Retention: "-1h"}, "retention"},
		{"backstop too short", AgentgateStackProps{Retention: "3000h"}, "backstop"},
		// A run may ask for a 7-day approval (or tool-results) window
		// whatever the deployment's default: 2 days would expire its state
		// blob before it is decided (outside tester helper-113).
		{"backstop under the longest window a run may ask for", AgentgateStackProps{ApprovalTTL: "1h", Retention: "24h", StateBlobDays: 2}, "backstop"},
		{"backstop of exactly 7 days plus retention", AgentgateStackProps{ApprovalTTL: "1h", Retention: "24h", StateBlobDays: 8}, "backstop"},
		{"backstop past 7 days plus retention", AgentgateStackProps{ApprovalTTL: "1h", Retention: "24h", StateBlobDays: 9}, ""},
		{"bad stage", AgentgateStackProps{StageName: "v 1"}, "stage name"},
		{"ttl over a week", AgentgateStackProps{ApprovalTTL: "169h"}, "approval TTL"},
		{"too many shards", AgentgateStackProps{DueShards: 65}, "due shards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.props.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckAssets(t *testing.T) {
	if err := CheckAssets(fakeAssets(t)); err != nil {
		t.Errorf("CheckAssets(complete dir) = %v, want nil", err)
	}
	err := CheckAssets(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "startrun.zip") {
		t.Errorf("CheckAssets(empty dir) = %v, want an error naming startrun.zip and `make build`", err)
	}
}

func TestAPIKeySecret(t *testing.T) {
	const secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/anthropic-AbCdEf"
	props := AgentgateStackProps{Model: "anthropic:claude-sonnet-4-5", APIKeySecretArn: secret}
	s := synth(t, props)
	for _, fn := range []string{"startrun", "resume", "purge"} {
		_, p := s.functionByName(t, "Agentgate-"+fn)
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		got, ok := env["AGENTGATE_ANTHROPIC_API_KEY_SECRET"]
		if fn == "purge" {
			if ok {
				t.Errorf("purge has the API key secret in its environment: %v", got)
			}
			continue
		}
		if got != secret {
			t.Errorf("%s: AGENTGATE_ANTHROPIC_API_KEY_SECRET = %v, want %s", fn, got, secret)
		}
	}
	for fn, want := range map[string]bool{"startrun": true, "resume": true, "purge": false} {
		roleID := functionRole(t, s, fn)
		found := false
		for _, st := range roleStatements(t, s, roleID) {
			if st.sid == sidReadAPIKey {
				found = true
				if strings.Join(st.actions, ",") != "secretsmanager:GetSecretValue" || strings.Join(st.resources, ",") != secret {
					t.Errorf("%s: %s = %v on %v, want GetSecretValue on the one secret", fn, sidReadAPIKey, st.actions, st.resources)
				}
			}
		}
		if found != want {
			t.Errorf("%s: has %s = %t, want %t", fn, sidReadAPIKey, found, want)
		}
	}
	bad := props
	bad.Model = "bedrock:x"
	if err := bad.Validate(); err == nil {
		t.Error("a secret with a bedrock model validated")
	}
	bad = props
	bad.APIKeySecretArn = "my-secret"
	if err := bad.Validate(); err == nil {
		t.Error("a secret that is not an ARN validated")
	}
}

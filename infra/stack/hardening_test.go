package stack

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
)

// Issue 17, one test per item: edge protection of the approval routes,
// failure handling of asynchronous invokes, concurrency, request
// validation and execution logs.

func TestWebACLProtectsTheStage(t *testing.T) {
	s := defaultTemplate(t)
	aclID, acl := s.resource(t, "AWS::WAFv2::WebACL", func(map[string]any) bool { return true })
	p := acl["Properties"].(map[string]any)
	if p["Scope"] != "REGIONAL" || render(p["DefaultAction"]) != "{Allow={}}" {
		t.Errorf("web ACL scope %v, default %s; want REGIONAL, allow", p["Scope"], render(p["DefaultAction"]))
	}
	rules := map[string]map[string]any{}
	for _, r := range list(p["Rules"]) {
		rules[r.(map[string]any)["Name"].(string)] = r.(map[string]any)
	}
	rate := rules["ApprovalRatePerIP"]
	if rate == nil {
		t.Fatal("no ApprovalRatePerIP rule")
	}
	rbs := rate["Statement"].(map[string]any)["RateBasedStatement"].(map[string]any)
	match := rbs["ScopeDownStatement"].(map[string]any)["ByteMatchStatement"].(map[string]any)
	for what, c := range map[string][2]any{
		"action":      {render(rate["Action"]), "{Block={}}"},
		"aggregate":   {rbs["AggregateKeyType"], "IP"},
		"limit":       {rbs["Limit"], float64(DefaultApprovalRateLimit)},
		"window":      {rbs["EvaluationWindowSec"], ApprovalRateWindow.Seconds()},
		"scope field": {render(match["FieldToMatch"]), "{UriPath={}}"},
		"scope match": {match["PositionalConstraint"].(string) + " " + match["SearchString"].(string), "CONTAINS /approvals/"},
	} {
		if c[0] != c[1] {
			t.Errorf("rate rule %s = %v, want %v", what, c[0], c[1])
		}
	}
	common := rules["CommonRules"]
	if common == nil {
		t.Fatal("no CommonRules rule")
	}
	mrg := common["Statement"].(map[string]any)["ManagedRuleGroupStatement"].(map[string]any)
	if mrg["VendorName"] != "AWS" || mrg["Name"] != "AWSManagedRulesCommonRuleSet" || render(common["OverrideAction"]) != "{None={}}" {
		t.Errorf("common rules %s, override %s", render(mrg), render(common["OverrideAction"]))
	}
	var counted []string
	for _, o := range list(mrg["RuleActionOverrides"]) {
		o := o.(map[string]any)
		if render(o["ActionToUse"]) != "{Count={}}" {
			t.Errorf("override %v acts %s, want count", o["Name"], render(o["ActionToUse"]))
		}
		counted = append(counted, o["Name"].(string))
	}
	if !reflect.DeepEqual(counted, countedCommonRules) {
		t.Errorf("counted rules %v, want %v", counted, countedCommonRules)
	}
	for _, name := range counted {
		if !strings.HasSuffix(name, "_BODY") {
			t.Errorf("%s is counted; only body rules may be", name)
		}
	}

	stageID, _ := s.resource(t, "AWS::ApiGateway::Stage", func(map[string]any) bool { return true })
	apiID, _ := s.resource(t, "AWS::ApiGateway::RestApi", func(map[string]any) bool { return true })
	_, assoc := s.resource(t, "AWS::WAFv2::WebACLAssociation", func(map[string]any) bool { return true })
	ap := assoc["Properties"].(map[string]any)
	if got, want := render(ap["ResourceArn"]), "arn:${AWS::Partition}:apigateway:${AWS::Region}::/restapis/${"+apiID+"}/stages/${"+stageID+"}"; got != want {
		t.Errorf("association resource %s, want %s", got, want)
	}
	if got := render(ap["WebACLArn"]); got != "${"+aclID+".Arn}" {
		t.Errorf("association web ACL %s", got)
	}

	_, logging := s.resource(t, "AWS::WAFv2::LoggingConfiguration", func(map[string]any) bool { return true })
	lp := logging["Properties"].(map[string]any)
	if got := render(lp["LogDestinationConfigs"]); got != "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:aws-waf-logs-Agentgate" {
		t.Errorf("WAF log destination %s", got)
	}
	if got, want := render(lp["RedactedFields"]), "{UriPath={}} | {SingleHeader={Name=authorization}} | {SingleHeader={Name=x-amz-security-token}} | {SingleHeader={Name=idempotency-key}}"; got != want {
		t.Errorf("WAF logs redact %s, want %s (approval tokens are in the path, a start's Idempotency-Key in its header)", got, want)
	}
	if got := render(lp["LoggingFilter"]); !strings.Contains(got, "DefaultBehavior=DROP") || !strings.Contains(got, "Action=BLOCK") {
		t.Errorf("WAF logging filter %s, want blocked requests only", got)
	}
	must(t, "WAF log group", func() {
		s.assert.HasResourceProperties(str("AWS::Logs::LogGroup"), obj(map[string]any{"LogGroupName": "aws-waf-logs-Agentgate", "RetentionInDays": 30}))
	})
}

// methodSettings returns the stage's method settings by "ResourcePath HttpMethod".
func methodSettings(t *testing.T, s synthesized) map[string]map[string]any {
	t.Helper()
	_, stage := s.resource(t, "AWS::ApiGateway::Stage", func(map[string]any) bool { return true })
	out := map[string]map[string]any{}
	for _, m := range list(stage["Properties"].(map[string]any)["MethodSettings"]) {
		m := m.(map[string]any)
		out[m["ResourcePath"].(string)+" "+m["HttpMethod"].(string)] = m
	}
	return out
}

func TestApprovalMethodThrottlesAndExecutionLogs(t *testing.T) {
	s := defaultTemplate(t)
	settings := methodSettings(t, s)
	want := map[string][2]float64{"/* *": {DefaultThrottleRateLimit, DefaultThrottleBurstLimit}}
	for _, r := range routes.Deployed() {
		if !r.Authenticated {
			// API Gateway escapes "/" in a method setting's resource path as "~1".
			want["/"+strings.ReplaceAll(r.Path, "/", "~1")+" "+r.Method] = [2]float64{DefaultApprovalThrottleRateLimit, DefaultApprovalThrottleBurstLimit}
		}
	}
	if len(settings) != len(want) {
		t.Errorf("method settings %v, want %d entries", keys(settings), len(want))
	}
	for key, limits := range want {
		m, ok := settings[key]
		if !ok {
			t.Errorf("no method setting %q (have %v)", key, keys(settings))
			continue
		}
		if m["ThrottlingRateLimit"] != limits[0] || m["ThrottlingBurstLimit"] != limits[1] {
			t.Errorf("%s throttled %v/%v, want %v/%v", key, m["ThrottlingRateLimit"], m["ThrottlingBurstLimit"], limits[0], limits[1])
		}
	}
	// INFO or data tracing would write request paths, approval tokens
	// included, into the execution logs.
	for key, m := range settings {
		if m["LoggingLevel"] != "ERROR" || m["DataTraceEnabled"] != false {
			t.Errorf("%s: logging %v, data trace %v; want ERROR and no data trace", key, m["LoggingLevel"], m["DataTraceEnabled"])
		}
	}
	apiID, _ := s.resource(t, "AWS::ApiGateway::RestApi", func(map[string]any) bool { return true })
	_, logs := s.resource(t, "AWS::Logs::LogGroup", func(p map[string]any) bool {
		return strings.HasPrefix(render(p["LogGroupName"]), "API-Gateway-Execution-Logs_")
	})
	lp := logs["Properties"].(map[string]any)
	if got := render(lp["LogGroupName"]); got != "API-Gateway-Execution-Logs_${"+apiID+"}/v1" || lp["RetentionInDays"] != 30.0 {
		t.Errorf("execution log group %s, retention %v", got, lp["RetentionInDays"])
	}

	bad := (AgentgateStackProps{ApprovalThrottleRateLimit: 100}).Validate()
	if bad == nil || !strings.Contains(bad.Error(), "approval throttles") {
		t.Errorf("approval throttle above the stage's: Validate() = %v", bad)
	}
	if err := (AgentgateStackProps{ApprovalRateLimit: 5}).Validate(); err == nil {
		t.Error("a WAF rate limit below 10 validated")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAsyncFailureHandling(t *testing.T) {
	s := defaultTemplate(t)
	queueID, queue := s.resource(t, "AWS::SQS::Queue", func(map[string]any) bool { return true })
	qp := queue["Properties"].(map[string]any)
	if qp["SqsManagedSseEnabled"] != true || qp["MessageRetentionPeriod"] != 14*24*3600.0 {
		t.Errorf("failed-events queue %s, want SQS-managed encryption and 14 days", render(qp))
	}
	// A worker's on-failure record holds the run's row (prompt, held
	// calls) and the retention purge does not reach the queue: under a
	// retention shorter than 14 days the queue keeps records no longer
	// (outside tester helper-113: 14 days whatever the retention).
	for retention, want := range map[string]float64{"24h": 86400, "90m": 5400, "335h": 335 * 3600, "337h": 14 * 24 * 3600} {
		_, q := synth(t, AgentgateStackProps{Retention: retention}).resource(t, "AWS::SQS::Queue", func(map[string]any) bool { return true })
		if got := q["Properties"].(map[string]any)["MessageRetentionPeriod"]; got != want {
			t.Errorf("retention %s: failed-events queue keeps records %v s, want %v", retention, got, want)
		}
	}
	want := map[string][2]float64{
		"startrun": {WorkerRetryAttempts, 3600},
		"resume":   {WorkerRetryAttempts, 3600},
		"purge":    {0, 60}, // a failed or overdue sweep is not retried: the next tick sweeps
	}
	configs := s.resources("AWS::Lambda::EventInvokeConfig")
	if len(configs) != 3 {
		t.Errorf("%d event-invoke configs, want one per function", len(configs))
	}
	for fn, w := range want {
		fnID, _ := s.functionByName(t, "Agentgate-"+fn)
		_, cfg := s.resource(t, "AWS::Lambda::EventInvokeConfig", func(p map[string]any) bool {
			return render(p["FunctionName"]) == "${"+fnID+"}"
		})
		p := cfg["Properties"].(map[string]any)
		if p["MaximumRetryAttempts"] != w[0] || p["MaximumEventAgeInSeconds"] != w[1] || p["Qualifier"] != "$LATEST" {
			t.Errorf("%s: retries %v, max age %v, qualifier %v; want %v, %v, $LATEST", fn, p["MaximumRetryAttempts"], p["MaximumEventAgeInSeconds"], p["Qualifier"], w[0], w[1])
		}
		if got := render(p["DestinationConfig"]); got != "{OnFailure={Destination=${"+queueID+".Arn}}}" {
			t.Errorf("%s: destination %s, want the failed-events queue", fn, got)
		}
		// Lambda checks the role may send to the destination when it stores
		// the configuration: the policy must exist first.
		policy := ""
		for id, pol := range s.resources("AWS::IAM::Policy") {
			if render(pol["Properties"].(map[string]any)["Roles"]) == "${"+functionRole(t, s, fn)+"}" {
				policy = id
			}
		}
		if deps := sortedStrings(cfg["DependsOn"]); policy == "" || !contains(deps, policy) {
			t.Errorf("%s: event-invoke config depends on %v, want the role policy %s", fn, deps, policy)
		}
	}
	purgeID, _ := s.functionByName(t, "Agentgate-purge")
	must(t, "purge rule: no delivery retries, dead letters to the queue", func() {
		s.assert.HasResourceProperties(str("AWS::Events::Rule"), obj(map[string]any{
			"Targets": []any{assertions.Match_ObjectLike(obj(map[string]any{
				"Arn":              map[string]any{"Fn::GetAtt": []any{purgeID, "Arn"}},
				"RetryPolicy":      map[string]any{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
				"DeadLetterConfig": map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}}},
			}))},
		}))
	})
	must(t, "queue policy: TLS only, EventBridge may dead-letter", func() {
		s.assert.HasResourceProperties(str("AWS::SQS::QueuePolicy"), obj(map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(obj(map[string]any{
				"Statement": assertions.Match_ArrayWith(arr(
					assertions.Match_ObjectLike(obj(map[string]any{
						"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
					})),
					assertions.Match_ObjectLike(obj(map[string]any{
						"Effect": "Allow", "Action": "sqs:SendMessage", "Principal": map[string]any{"Service": "events.amazonaws.com"},
					})),
				)),
			})),
		}))
	})

	topicID, topic := s.resource(t, "AWS::SNS::Topic", func(map[string]any) bool { return true })
	alarmKeyID, _ := s.resource(t, "AWS::KMS::Key", func(p map[string]any) bool { return !isStateKey(p) })
	if got := render(topic["Properties"].(map[string]any)["KmsMasterKeyId"]); got != "${"+alarmKeyID+".Arn}" {
		t.Errorf("alarm topic key %s, want its own key", got)
	}
	_, alarm := s.resource(t, "AWS::CloudWatch::Alarm", func(map[string]any) bool { return true })
	ap := alarm["Properties"].(map[string]any)
	checks := map[string][2]any{
		"metric":     {ap["MetricName"], "ApproximateNumberOfMessagesVisible"},
		"dimension":  {render(ap["Dimensions"]), "{Name=QueueName, Value=${" + queueID + ".QueueName}}"},
		"comparison": {ap["ComparisonOperator"], "GreaterThanThreshold"},
		"threshold":  {ap["Threshold"], 0.0},
		"missing":    {ap["TreatMissingData"], "notBreaching"},
		"actions":    {render(ap["AlarmActions"]), "${" + topicID + "}"},
		"ok actions": {render(ap["OKActions"]), "${" + topicID + "}"},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("alarm %s = %v, want %v", what, c[0], c[1])
		}
	}
	mail := synth(t, AgentgateStackProps{AlarmEmail: "ops@example.com"})
	must(t, "alarm e-mail subscription", func() {
		mail.assert.HasResourceProperties(str("AWS::SNS::Subscription"), obj(map[string]any{"Protocol": "email", "Endpoint": "ops@example.com"}))
	})
	must(t, "no subscription by default", func() { s.assert.ResourceCountIs(str("AWS::SNS::Subscription"), jsii.Number(0)) })
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func TestConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name  string
		props AgentgateStackProps
		want  map[string]any
	}{
		{"default: purge 1, workers uncapped", AgentgateStackProps{}, map[string]any{"startrun": nil, "resume": nil, "purge": 1.0}},
		{"caps", AgentgateStackProps{StartRunConcurrency: 20, ResumeConcurrency: 50}, map[string]any{"startrun": 20.0, "resume": 50.0, "purge": 1.0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := defaultTemplate(t)
			if tt.props.StartRunConcurrency != 0 {
				s = synth(t, tt.props)
			}
			for fn, want := range tt.want {
				_, p := s.functionByName(t, "Agentgate-"+fn)
				if got := p["ReservedConcurrentExecutions"]; got != want {
					t.Errorf("%s reserved concurrency %v, want %v", fn, got, want)
				}
			}
		})
	}
	if err := (AgentgateStackProps{ResumeConcurrency: -1}).Validate(); err == nil {
		t.Error("a negative concurrency cap validated")
	}
}

func TestRequestValidation(t *testing.T) {
	s := defaultTemplate(t)
	validatorID, validator := s.resource(t, "AWS::ApiGateway::RequestValidator", func(map[string]any) bool { return true })
	vp := validator["Properties"].(map[string]any)
	if vp["ValidateRequestBody"] != true || vp["ValidateRequestParameters"] != true {
		t.Errorf("validator %s", render(vp))
	}
	models := map[string]map[string]any{} // logical id -> properties
	for id, m := range s.resources("AWS::ApiGateway::Model") {
		models[id] = m["Properties"].(map[string]any)
	}
	list, err := RequestBodies()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range list {
		got = append(got, b.Method+" "+b.Path+" "+b.Component)
	}
	// The operations of openapi.yaml that require a JSON body; a new one
	// must be a route (and is then validated).
	if want := []string{"POST /runs StartRequest", "POST /runs/{id}/decision Decision", "POST /runs/{id}/tool-results ToolResultsSubmission"}; !reflect.DeepEqual(got, want) {
		t.Errorf("JSON request bodies of the spec %v, want %v", got, want)
	}
	if len(models) != len(list) {
		t.Errorf("%d models, want one per JSON request body of the spec (%d)", len(models), len(list))
	}
	bodies := map[string]RequestBody{}
	for _, b := range list {
		bodies[b.Method+" "+b.Path] = b
	}
	paths := apiPaths(s)
	for id, m := range s.resources("AWS::ApiGateway::Method") {
		p := m["Properties"].(map[string]any)
		ref, _ := p["ResourceId"].(map[string]any)["Ref"].(string)
		key := p["HttpMethod"].(string) + " " + paths[ref]
		b, hasBody := bodies[key]
		if !hasBody {
			if p["RequestValidatorId"] != nil || p["RequestModels"] != nil {
				t.Errorf("%s (%s) validates a body it does not have", key, id)
			}
			continue
		}
		delete(bodies, key)
		if got := render(p["RequestValidatorId"]); got != "${"+validatorID+"}" {
			t.Errorf("%s: validator %s", key, got)
		}
		modelRef := p["RequestModels"].(map[string]any)["application/json"].(map[string]any)["Ref"].(string)
		mp := models[modelRef]
		if mp == nil || mp["Name"] != b.Component || mp["ContentType"] != "application/json" {
			t.Errorf("%s: model %s %v", key, modelRef, mp)
			continue
		}
		// The model is the spec's export itself, not a copy.
		got, _ := json.Marshal(mp["Schema"])
		want, _ := apispec.Draft4Shape(b.Component)
		var wantDoc any
		_ = json.Unmarshal(want, &wantDoc)
		want, _ = json.Marshal(wantDoc)
		if string(got) != string(want) {
			t.Errorf("%s: model schema\n got %s\nwant %s", key, got, want)
		}
		if mp["Schema"].(map[string]any)["additionalProperties"] != false {
			t.Errorf("%s: the model must refuse unknown fields", key)
		}
		for param, required := range p["RequestParameters"].(map[string]any) {
			if !strings.HasPrefix(param, "method.request.path.") || required != true {
				t.Errorf("%s: request parameter %s=%v", key, param, required)
			}
		}
	}
	for key := range bodies {
		t.Errorf("the spec's body of %s has no method in the route table", key)
	}
	_, resp := s.resource(t, "AWS::ApiGateway::GatewayResponse", func(p map[string]any) bool { return p["ResponseType"] == "BAD_REQUEST_BODY" })
	rp := resp["Properties"].(map[string]any)
	tmpl := rp["ResponseTemplates"].(map[string]any)["application/json"].(string)
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(tmpl), &body); err != nil || body.Error.Code != runs.EBadRequest || rp["StatusCode"] != "400" {
		t.Errorf("BAD_REQUEST_BODY %v %s (%v): want 400 and the handler's error shape with code %q", rp["StatusCode"], tmpl, err, runs.EBadRequest)
	}
	// API Gateway's own answers carry the headers of every API answer.
	for _, typ := range []string{"BAD_REQUEST_BODY", "DEFAULT_4XX", "DEFAULT_5XX"} {
		_, resp := s.resource(t, "AWS::ApiGateway::GatewayResponse", func(p map[string]any) bool { return p["ResponseType"] == typ })
		headers, _ := resp["Properties"].(map[string]any)["ResponseParameters"].(map[string]any)
		if headers["gatewayresponse.header.Cache-Control"] != "'no-store'" || headers["gatewayresponse.header.X-Content-Type-Options"] != "'nosniff'" {
			t.Errorf("%s response parameters %v: want Cache-Control no-store and X-Content-Type-Options nosniff", typ, headers)
		}
	}
}

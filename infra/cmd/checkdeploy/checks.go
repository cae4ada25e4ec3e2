package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentgate/agentgate/internal/routes"
)

// The expectations below restate CONTRACTS.md and issue 7 independently of
// the stack code, so that a change on either side shows up here.

func (c *checker) checkTable(ctx context.Context) {
	name := c.output("TableName")
	if name == "" {
		return
	}
	out, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		c.fail("table", "describe "+name, err.Error())
		return
	}
	t := out.Table
	types := map[string]string{}
	for _, a := range t.AttributeDefinitions {
		types[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	keys := func(ks []struct{ name, kind string }) string {
		parts := make([]string, len(ks))
		for i, k := range ks {
			parts[i] = fmt.Sprintf("%s(%s) %s", k.name, types[k.name], k.kind)
		}
		return strings.Join(parts, ", ")
	}
	var tableKeys []struct{ name, kind string }
	for _, k := range t.KeySchema {
		tableKeys = append(tableKeys, struct{ name, kind string }{aws.ToString(k.AttributeName), string(k.KeyType)})
	}
	c.expect("table", "key schema", keys(tableKeys), "pk(S) HASH, sk(S) RANGE", nil)
	billing := ""
	if t.BillingModeSummary != nil {
		billing = string(t.BillingModeSummary.BillingMode)
	}
	c.expect("table", "billing mode", billing, "PAY_PER_REQUEST", nil)
	gsi := "missing"
	for _, g := range t.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != "due-index" {
			continue
		}
		var ks []struct{ name, kind string }
		for _, k := range g.KeySchema {
			ks = append(ks, struct{ name, kind string }{aws.ToString(k.AttributeName), string(k.KeyType)})
		}
		proj := ""
		if g.Projection != nil {
			proj = string(g.Projection.ProjectionType)
		}
		gsi = keys(ks) + ", projection " + proj
	}
	c.expect("table", "GSI due-index", gsi, "due_pk(S) HASH, due_at(N) RANGE, projection KEYS_ONLY", nil)

	_, tableProps, terr := c.template.only("AWS::DynamoDB::Table")
	fromTemplate := func(path []any, want string) func() (string, bool) {
		return func() (string, bool) {
			if terr != nil {
				return terr.Error(), false
			}
			got := flat(at(tableProps, path...))
			return got, got == want
		}
	}
	ttl := ""
	if o, err := c.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name}); err != nil {
		ttl = "error: " + err.Error()
	} else if d := o.TimeToLiveDescription; d != nil {
		ttl = aws.ToString(d.AttributeName) + " " + string(d.TimeToLiveStatus)
		if d.TimeToLiveStatus == "ENABLING" {
			ttl = aws.ToString(d.AttributeName) + " ENABLED"
		}
	}
	c.expect("table", "TTL", ttl, "expires_at ENABLED",
		fromTemplate([]any{"TimeToLiveSpecification"}, "{AttributeName=expires_at Enabled=true}"))
	pitr := ""
	if o, err := c.ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: &name}); err != nil {
		pitr = "error: " + err.Error()
	} else if d := o.ContinuousBackupsDescription; d != nil && d.PointInTimeRecoveryDescription != nil {
		pitr = string(d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus)
	}
	c.expect("table", "point-in-time recovery", pitr, "ENABLED",
		fromTemplate([]any{"PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"}, "true"))
}

func (c *checker) checkBucket(ctx context.Context) {
	name, keyArn := c.output("BucketName"), c.output("KmsKeyArn")
	if name == "" {
		return
	}
	if _, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name}); err != nil {
		c.fail("bucket", "head "+name, err.Error())
		return
	}
	_, props, terr := c.template.only("AWS::S3::Bucket")
	fromTemplate := func(path []any, want string) func() (string, bool) {
		return func() (string, bool) {
			if terr != nil {
				return terr.Error(), false
			}
			got := flat(at(props, path...))
			return got, got == want
		}
	}

	sse, bucketKey := "", ""
	if o, err := c.s3.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: &name}); err != nil {
		sse = "error: " + err.Error()
	} else if cfg := o.ServerSideEncryptionConfiguration; cfg != nil && len(cfg.Rules) > 0 {
		r := cfg.Rules[0]
		if d := r.ApplyServerSideEncryptionByDefault; d != nil {
			sse = string(d.SSEAlgorithm) + " " + aws.ToString(d.KMSMasterKeyID)
		}
		bucketKey = fmt.Sprint(aws.ToBool(r.BucketKeyEnabled))
	}
	c.expect("bucket", "default encryption", sse, "aws:kms "+keyArn, nil)
	c.expect("bucket", "S3 bucket key", bucketKey, "true",
		fromTemplate([]any{"BucketEncryption", "ServerSideEncryptionConfiguration", 0, "BucketKeyEnabled"}, "true"))

	versioning := ""
	if o, err := c.s3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &name}); err != nil {
		versioning = "error: " + err.Error()
	} else {
		versioning = string(o.Status)
	}
	c.expect("bucket", "versioning", versioning, "Enabled",
		fromTemplate([]any{"VersioningConfiguration", "Status"}, "Enabled"))

	block := ""
	if o, err := c.s3.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: &name}); err != nil {
		block = "error: " + err.Error()
	} else if p := o.PublicAccessBlockConfiguration; p != nil {
		block = fmt.Sprintf("%t %t %t %t", aws.ToBool(p.BlockPublicAcls), aws.ToBool(p.BlockPublicPolicy),
			aws.ToBool(p.IgnorePublicAcls), aws.ToBool(p.RestrictPublicBuckets))
	}
	c.expect("bucket", "public access block (acls, policy, ignore, restrict)", block, "true true true true",
		fromTemplate([]any{"PublicAccessBlockConfiguration"},
			"{BlockPublicAcls=true BlockPublicPolicy=true IgnorePublicAcls=true RestrictPublicBuckets=true}"))

	lifecycle := ""
	if o, err := c.s3.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &name}); err != nil {
		lifecycle = "error: " + err.Error()
	} else {
		var kinds []string
		for _, r := range o.Rules {
			if r.AbortIncompleteMultipartUpload != nil {
				kinds = append(kinds, "abort-multipart")
			}
			if r.NoncurrentVersionExpiration != nil {
				kinds = append(kinds, "expire-noncurrent")
			}
			prefix := aws.ToString(r.Prefix)
			if r.Filter != nil && r.Filter.Prefix != nil {
				prefix = aws.ToString(r.Filter.Prefix)
			}
			if r.Expiration != nil && aws.ToInt32(r.Expiration.Days) > 0 {
				kinds = append(kinds, "expire:"+prefix)
			}
		}
		sort.Strings(kinds)
		lifecycle = strings.Join(kinds, " ")
	}
	c.expect("bucket", "lifecycle rules", lifecycle, "abort-multipart expire-noncurrent expire:runs/", func() (string, bool) {
		if terr != nil {
			return terr.Error(), false
		}
		var kinds []string
		rules, _ := at(props, "LifecycleConfiguration", "Rules").([]any)
		for _, r := range rules {
			if at(r, "AbortIncompleteMultipartUpload") != nil {
				kinds = append(kinds, "abort-multipart")
			}
			if at(r, "NoncurrentVersionExpiration") != nil {
				kinds = append(kinds, "expire-noncurrent")
			}
			if at(r, "ExpirationInDays") != nil {
				kinds = append(kinds, "expire:"+flat(at(r, "Prefix")))
			}
		}
		sort.Strings(kinds)
		got := strings.Join(kinds, " ")
		return got, got == "abort-multipart expire-noncurrent expire:runs/"
	})
}

// contractEnv lists each function's environment (CONTRACTS.md).
var contractEnv = map[string][]string{
	"StartRunFunctionName": {"AGENTGATE_APPROVAL_TTL", "AGENTGATE_BUCKET", "AGENTGATE_DUE_SHARDS", "AGENTGATE_KMS_KEY_ID",
		"AGENTGATE_MAIL_FROM", "AGENTGATE_MODEL", "AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_RETENTION",
		"AGENTGATE_STARTRUN_FUNCTION", "AGENTGATE_TABLE"},
	"ResumeFunctionName": {"AGENTGATE_APPROVAL_TTL", "AGENTGATE_BUCKET", "AGENTGATE_DUE_SHARDS", "AGENTGATE_KMS_KEY_ID",
		"AGENTGATE_MAIL_FROM", "AGENTGATE_MODEL", "AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_RESUME_FUNCTION",
		"AGENTGATE_RETENTION", "AGENTGATE_TABLE"},
	"PurgeFunctionName": {"AGENTGATE_BUCKET", "AGENTGATE_DUE_SHARDS", "AGENTGATE_KMS_KEY_ID", "AGENTGATE_MAIL_FROM",
		"AGENTGATE_PUBLIC_BASE_URL", "AGENTGATE_RESUME_FUNCTION", "AGENTGATE_RETENTION",
		"AGENTGATE_STARTRUN_FUNCTION", "AGENTGATE_TABLE"},
}

// optionalEnv are the variables the stack sets only when asked
// (CONTRACTS.md): AGENTGATE_SES_API with the sesApi context key, which
// scripts/infra-local.sh sets on LocalStack, AGENTGATE_QUORUM_CHECK
// (startrun and resume) with quorumCheck, and AGENTGATE_QUORUM_CHECK_EVERY
// (all three) with quorumCheckEvery.
var optionalEnv = []string{"AGENTGATE_QUORUM_CHECK", "AGENTGATE_QUORUM_CHECK_EVERY", "AGENTGATE_SES_API"}

// wantEnv returns the environment variables of the function named name (the
// stack output out) and the values the deployed template gives the
// optional ones: contractEnv plus each optional variable the template sets.
func (c *checker) wantEnv(out, name string) (keys []string, values map[string]string) {
	keys = slices.Clone(contractEnv[out])
	values = map[string]string{}
	for _, r := range c.physical["AWS::Lambda::Function"] {
		if r.physical != name || c.template == nil {
			continue
		}
		for _, k := range optionalEnv {
			if v := at(c.template.props(r.logical), "Environment", "Variables", k); v != nil {
				keys = append(keys, k)
				values[k] = flat(v)
			}
		}
	}
	sort.Strings(keys)
	return keys, values
}

func (c *checker) checkFunctions(ctx context.Context) {
	wantValues := map[string]string{
		"AGENTGATE_TABLE":             c.outputs["TableName"],
		"AGENTGATE_BUCKET":            c.outputs["BucketName"],
		"AGENTGATE_KMS_KEY_ID":        c.outputs["KmsKeyArn"],
		"AGENTGATE_STARTRUN_FUNCTION": c.outputs["StartRunFunctionName"],
		"AGENTGATE_RESUME_FUNCTION":   c.outputs["ResumeFunctionName"],
	}
	for _, out := range []string{"StartRunFunctionName", "ResumeFunctionName", "PurgeFunctionName"} {
		name := c.output(out)
		if name == "" {
			continue
		}
		area := "function"
		cfg, err := c.lam.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: &name})
		if err != nil {
			c.fail(area, name, err.Error())
			continue
		}
		c.expect(area, name+" runtime", string(cfg.Runtime), "provided.al2023", nil)
		c.expect(area, name+" handler", aws.ToString(cfg.Handler), "bootstrap", nil)
		var arch []string
		for _, a := range cfg.Architectures {
			arch = append(arch, string(a))
		}
		c.checkArchitecture(area, name, strings.Join(arch, ","))
		env := map[string]string{}
		if cfg.Environment != nil {
			env = cfg.Environment.Variables
		}
		var keys []string
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		wantKeys, optional := c.wantEnv(out, name)
		c.expect(area, name+" environment variables", strings.Join(keys, " "), strings.Join(wantKeys, " "), nil)
		var mismatched []string
		for k, want := range optional {
			if got := env[k]; got != want {
				mismatched = append(mismatched, fmt.Sprintf("%s=%s (want %s)", k, got, want))
			}
		}
		for k, want := range wantValues {
			if got, ok := env[k]; ok && got != want {
				mismatched = append(mismatched, fmt.Sprintf("%s=%s (want %s)", k, got, want))
			}
		}
		if base := env["AGENTGATE_PUBLIC_BASE_URL"]; base != "" && !strings.HasPrefix(base, "http") {
			mismatched = append(mismatched, "AGENTGATE_PUBLIC_BASE_URL="+base+" (want an http(s) URL)")
		}
		sort.Strings(mismatched)
		c.expect(area, name+" environment values match the stack outputs", strings.Join(mismatched, "; "), "", nil)
	}
}

// checkArchitecture checks the live architecture of the function called
// name against expectArch (arm64 when unset); on moto, which reports every
// function as x86_64, against the deployed template.
func (c *checker) checkArchitecture(area, name, live string) {
	want := c.expectArch
	if want == "" {
		want = "arm64"
	}
	c.expect(area, name+" architecture", live, want, func() (string, bool) {
		for _, r := range c.physical["AWS::Lambda::Function"] {
			if r.physical == name {
				got := flat(at(c.template.props(r.logical), "Architectures"))
				return got, got == want
			}
		}
		return "function not in the template", false
	})
}

// functionOutputs are the stack outputs naming the function of each route.
var functionOutputs = map[routes.Function]string{
	routes.StartRun: "StartRunFunctionName",
	routes.Resume:   "ResumeFunctionName",
}

func (c *checker) checkAPI(ctx context.Context) {
	apis := c.physical["AWS::ApiGateway::RestApi"]
	if len(apis) != 1 {
		c.fail("api", "REST API", fmt.Sprintf("%d AWS::ApiGateway::RestApi resources in the stack, want 1", len(apis)))
		return
	}
	id := apis[0].physical
	if url := c.output("ApiUrl"); url != "" {
		c.expect("api", "ApiUrl names the API and stage", fmt.Sprint(strings.Contains(url, id) && strings.HasSuffix(url, "/"+c.expectStage+"/")), "true", nil)
	}
	res, err := c.apg.GetResources(ctx, &apigateway.GetResourcesInput{RestApiId: &id, Embed: []string{"methods"}, Limit: aws.Int32(500)})
	if err != nil {
		c.fail("api", "resources of "+id, err.Error())
		return
	}
	type method struct{ auth, integration, uri string }
	got := map[string]method{}
	for _, r := range res.Items {
		for verb, m := range r.ResourceMethods {
			mm := method{auth: aws.ToString(m.AuthorizationType)}
			if m.MethodIntegration != nil {
				mm.integration = string(m.MethodIntegration.Type)
				mm.uri = aws.ToString(m.MethodIntegration.Uri)
			}
			got[aws.ToString(r.Path)+" "+verb] = mm
		}
	}
	for _, rt := range routes.Deployed() {
		key := rt.Path + " " + rt.Method
		m, ok := got[key]
		delete(got, key)
		if !ok {
			c.fail("api", key, "missing")
			continue
		}
		auth := "NONE"
		if rt.Authenticated {
			auth = "AWS_IAM"
		}
		fn := c.outputs[functionOutputs[rt.Function]]
		summary := fmt.Sprintf("%s %s -> %t", m.auth, m.integration, strings.Contains(m.uri, ":function:"+fn+"/"))
		c.expect("api", key, summary, fmt.Sprintf("%s AWS_PROXY -> true", auth), nil)
	}
	var extra []string
	for k := range got {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	c.expect("api", "no other methods", strings.Join(extra, ", "), "", nil)

	// Throttles (stage, and lower on the approval methods) and execution
	// logs at ERROR without data trace on every method setting.
	const wantStage = "throttled=true approval-throttles=2 logging=ERROR access-logs=true"
	stage := ""
	if o, err := c.apg.GetStage(ctx, &apigateway.GetStageInput{RestApiId: &id, StageName: &c.expectStage}); err != nil {
		stage = "error: " + err.Error()
	} else {
		throttled, approval, logging := false, 0, "ERROR"
		for key, s := range o.MethodSettings {
			throttled = throttled || s.ThrottlingRateLimit > 0
			if strings.Contains(key, "approvals") && s.ThrottlingRateLimit > 0 {
				approval++
			}
			if aws.ToString(s.LoggingLevel) != "ERROR" || s.DataTraceEnabled {
				logging = fmt.Sprintf("%s(%s, data trace %t)", aws.ToString(s.LoggingLevel), key, s.DataTraceEnabled)
			}
		}
		if len(o.MethodSettings) == 0 {
			logging = "none"
		}
		stage = fmt.Sprintf("throttled=%t approval-throttles=%d logging=%s access-logs=%t", throttled, approval, logging,
			o.AccessLogSettings != nil && aws.ToString(o.AccessLogSettings.DestinationArn) != "")
	}
	c.expect("api", "stage "+c.expectStage, stage, wantStage, func() (string, bool) {
		_, p, err := c.template.only("AWS::ApiGateway::Stage")
		if err != nil {
			return err.Error(), false
		}
		throttled, approval, logging := false, 0, "ERROR"
		settings, _ := at(p, "MethodSettings").([]any)
		for _, s := range settings {
			throttled = throttled || at(s, "ThrottlingRateLimit") != nil
			if strings.Contains(flat(at(s, "ResourcePath")), "approvals") && at(s, "ThrottlingRateLimit") != nil {
				approval++
			}
			if flat(at(s, "LoggingLevel")) != "ERROR" || flat(at(s, "DataTraceEnabled")) != "false" {
				logging = flat(at(s, "LoggingLevel")) + "(" + flat(at(s, "ResourcePath")) + ")"
			}
		}
		got := fmt.Sprintf("stage=%s throttled=%t approval-throttles=%d logging=%s access-logs=%t", flat(at(p, "StageName")),
			throttled, approval, logging, at(p, "AccessLogSetting", "DestinationArn") != nil)
		return got, got == "stage="+c.expectStage+" "+wantStage
	})
	c.checkValidationAndEdge(ctx, id)
}

func (c *checker) checkRule(ctx context.Context) {
	rules := c.physical["AWS::Events::Rule"]
	if len(rules) != 1 {
		c.fail("rule", "purge rule", fmt.Sprintf("%d AWS::Events::Rule resources in the stack, want 1", len(rules)))
		return
	}
	name := rules[0].physical
	r, err := c.evb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: &name})
	if err != nil {
		c.fail("rule", "describe "+name, err.Error())
		return
	}
	c.expect("rule", "schedule", aws.ToString(r.ScheduleExpression)+" "+string(r.State), c.expectPurgeRate+" ENABLED", nil)
	t, err := c.evb.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: &name})
	if err != nil {
		c.fail("rule", "targets of "+name, err.Error())
		return
	}
	var targets []string
	for _, tg := range t.Targets {
		arn := aws.ToString(tg.Arn)
		targets = append(targets, arn[strings.LastIndex(arn, ":")+1:])
	}
	c.expect("rule", "targets", strings.Join(targets, ","), c.outputs["PurgeFunctionName"], nil)
}

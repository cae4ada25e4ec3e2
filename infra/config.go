package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/agentgate/agentgate/infra/stack"
)

// Context keys read by the app (all optional). Booleans are "true"/"false".
//
//	stackName                  stack name, prefix of the function names (default Agentgate)
//	deletionProtection         table deletion protection, retain data on stack delete (default true)
//	architecture               arm64 (default) or x86_64 (an emulator executing the functions on x86;
//	                           scripts/infra-local.sh picks the Docker host's on LocalStack)
//	assetDir                   folder with startrun.zip, resume.zip, purge.zip
//	                           (default ../dist/lambda/arm64, or ../dist/lambda/amd64 for x86_64)
//	model                      AGENTGATE_MODEL (default bedrock:<defaultModelID>)
//	apiKeySecretArn            Secrets Manager ARN of the API key of an openai:/anthropic: model
//	toolSources                tool-sources file of MCP servers (path from infra/), shipped in a layer
//	directory                  directory file (persons, aliases, groups; path from infra/), validated,
//	                           shipped in a layer to the three functions (AGENTGATE_DIRECTORY)
//	policy                     policy file (rules per tool, CEL conditions; path from infra/), validated
//	                           against the directory, shipped in a layer to startrun and resume (AGENTGATE_POLICY)
//	modelArns                  comma-separated ARNs for bedrock:InvokeModel; default: the
//	                           foundation model of a bedrock: model in the stack's region
//	publicBaseUrl              AGENTGATE_PUBLIC_BASE_URL (default: the API stage URL); {apiId} in it
//	                           stands for the REST API's id, {stage} for the stage name
//	                           (scripts/infra-local.sh sets LocalStack's form of the stage URL)
//	stageName                  API stage (default v1)
//	purgeRateMinutes           purge schedule (default 1)
//	tracing                    X-Ray on functions and stage (default true)
//	startRunConcurrency        reserved (capped) concurrency of startrun (default: no cap)
//	resumeConcurrency          reserved (capped) concurrency of resume (default: no cap; also caps its API routes)
//	approvalRateLimit          WAF: requests per client IP per 5 minutes to /approvals/ (default 300)
//	approvalThrottleRate, approvalThrottleBurst  each approval method (default 10 rps, burst 20)
//	alarmEmail                 address subscribed to the alarm topic (default: none)
//	logRetentionDays           1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180 or 365 (default 30)
//	approvalTtl, retention     AGENTGATE_APPROVAL_TTL, AGENTGATE_RETENTION (Go durations)
//	dueShards                  AGENTGATE_DUE_SHARDS (default 8)
//	stateBlobDays              runs/ lifecycle backstop (default 90); must exceed retention plus 7 days,
//	                           the longest approval or tool-results window a run may ask for
//	noncurrentDays             noncurrent object versions kept (default 7)
//	throttleRate, throttleBurst  stage throttling (default 50 rps, burst 100)
//	skipApiGatewayAccountRole  leave the account's API Gateway CloudWatch role alone (default false)
//	sesApi                     AGENTGATE_SES_API of the functions: v2 (SES v2) or v1 (SES's first API,
//	                           for LocalStack Community; scripts/infra-local.sh sets it there); default unset (v2)
//	quorumCheck                AGENTGATE_QUORUM_CHECK of startrun and resume: on or off; default unset (off
//	                           in this release; see the README's quorum check)
//	quorumCheckEvery           AGENTGATE_QUORUM_CHECK_EVERY of the three functions: a Go duration from 1s
//	                           to 24h; default unset (1h)
const (
	defaultStackName = "Agentgate"
	defaultModelID   = "anthropic.claude-3-haiku-20240307-v1:0"
)

// config is the app's settings, read once from the CDK context.
type config struct {
	stackName string
	props     stack.AgentgateStackProps
}

var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
}

// readConfig reads and validates the settings; get returns "" for an unset key.
func readConfig(get func(key string) string) (config, error) {
	var errs []string
	str := func(key, def string) string {
		if v := strings.TrimSpace(get(key)); v != "" {
			return v
		}
		return def
	}
	boolean := func(key string, def bool) bool {
		v := get(key)
		if v == "" {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("context %s=%q: want true or false", key, v))
		}
		return b
	}
	integer := func(key string, def int) int {
		v := get(key)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Sprintf("context %s=%q: want a positive integer", key, v))
		}
		return n
	}

	// optionalInteger is a positive integer, or 0 when unset.
	optionalInteger := func(key string) int {
		if get(key) == "" {
			return 0
		}
		return integer(key, 0)
	}

	cfg := config{stackName: str("stackName", defaultStackName)}
	p := &cfg.props
	p.DeletionProtection = boolean("deletionProtection", true)
	p.Architecture = str("architecture", "arm64")
	defaultAssets := stack.DefaultAssetDir
	if p.Architecture == "x86_64" {
		defaultAssets = stack.DefaultAssetDirX86
	}
	p.AssetDir = str("assetDir", defaultAssets)
	p.Model = str("model", "bedrock:"+defaultModelID)
	p.PublicBaseURL = str("publicBaseUrl", "")
	p.APIKeySecretArn = str("apiKeySecretArn", "")
	p.ToolSourcesFile = str("toolSources", "")
	p.DirectoryFile = str("directory", "")
	p.PolicyFile = str("policy", "")
	p.StageName = str("stageName", stack.DefaultStageName)
	p.PurgeRateMinutes = integer("purgeRateMinutes", stack.DefaultPurgeRateMinutes)
	p.Tracing = boolean("tracing", true)
	p.StartRunConcurrency = optionalInteger("startRunConcurrency")
	p.ResumeConcurrency = optionalInteger("resumeConcurrency")
	p.ApprovalRateLimit = integer("approvalRateLimit", stack.DefaultApprovalRateLimit)
	p.ApprovalThrottleRateLimit = float64(integer("approvalThrottleRate", stack.DefaultApprovalThrottleRateLimit))
	p.ApprovalThrottleBurstLimit = float64(integer("approvalThrottleBurst", stack.DefaultApprovalThrottleBurstLimit))
	p.AlarmEmail = str("alarmEmail", "")
	days := integer("logRetentionDays", 30)
	if r, ok := retentionDays[days]; ok {
		p.LogRetention = r
	} else {
		errs = append(errs, fmt.Sprintf("context logRetentionDays=%d: not a CloudWatch Logs retention period", days))
	}
	p.ApprovalTTL = str("approvalTtl", stack.DefaultApprovalTTL)
	p.Retention = str("retention", stack.DefaultRetention)
	p.DueShards = integer("dueShards", stack.DefaultDueShards)
	p.StateBlobDays = integer("stateBlobDays", stack.DefaultStateBlobDays)
	p.NoncurrentDays = integer("noncurrentDays", stack.DefaultNoncurrentDays)
	p.ThrottleRateLimit = float64(integer("throttleRate", stack.DefaultThrottleRateLimit))
	p.ThrottleBurstLimit = float64(integer("throttleBurst", stack.DefaultThrottleBurstLimit))
	p.SkipAPIGatewayAccountRole = boolean("skipApiGatewayAccountRole", false)
	p.SESAPI = str("sesApi", "")
	p.QuorumCheck = str("quorumCheck", "")
	p.QuorumCheckEvery = str("quorumCheckEvery", "")

	if arns := str("modelArns", ""); arns != "" {
		for _, a := range strings.Split(arns, ",") {
			if a = strings.TrimSpace(a); a != "" {
				p.ModelArns = append(p.ModelArns, a)
			}
		}
	} else if id, ok := strings.CutPrefix(p.Model, "bedrock:"); ok {
		arn, err := foundationModelArn(id)
		if err != nil {
			errs = append(errs, err.Error())
		}
		p.ModelArns = []string{arn}
	}

	if err := checkAssetProviders(p.AssetDir, p.Model); err != nil {
		errs = append(errs, err.Error())
	}
	if err := checkAssetFeatures(p.AssetDir, p.ToolSourcesFile, p.PolicyFile); err != nil {
		errs = append(errs, err.Error())
	}
	if err := p.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return config{}, fmt.Errorf("invalid settings:\n  %s", strings.Join(errs, "\n  "))
	}
	return cfg, nil
}

// assetProvidersFile is the file `make build` writes next to the zips: the
// model providers the startrun and resume binaries link (build tags), one a
// line. Providers are opt-in per build, so zips built for one provider cannot
// run a model of another.
const assetProvidersFile = "providers"

// checkAssetProviders fails when the zips in dir were built without the
// provider of model. A folder without the file (zips built by hand, the CDK
// tests' placeholders) is not checked.
func checkAssetProviders(dir, model string) error {
	data, err := os.ReadFile(filepath.Join(dir, assetProvidersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("assetDir %s: %w", dir, err)
	}
	want, _, _ := strings.Cut(model, ":")
	built := strings.Fields(string(data))
	if slices.Contains(built, want) || want == "scripted" {
		return nil
	}
	return fmt.Errorf("context model=%q: the function zips in %s link only the %s provider(s); rebuild with `make build LAMBDA_PROVIDER=%s`",
		model, dir, strings.Join(built, ", "), want)
}

// assetFeaturesFile is the file `make build` writes next to the zips: the
// opt-in features the workers link, one a line (`make build
// LAMBDA_FEATURES="mcp cel"`: mcp for MCP tool sources, cel for policy
// conditions).
const assetFeaturesFile = "features"

// checkAssetFeatures fails when the configuration needs an opt-in feature
// the zips in dir were built without: MCP for a tool-sources file, CEL for
// a policy with `when` conditions (a worker built without cel-go refuses
// such a policy at start-up, so the deployment could never run a call).
// The error names the missing features, the rules that need CEL and the
// `make build` that fixes it. A folder without the file (zips built by
// hand or before the file existed, the CDK tests' placeholders) is not
// checked; the functions still refuse a policy they cannot evaluate.
func checkAssetFeatures(dir, toolSources, policyFile string) error {
	var why []string
	need := map[string]bool{}
	if toolSources != "" {
		need["mcp"] = true
		why = append(why, fmt.Sprintf("context toolSources=%q needs MCP tool sources (mcp)", toolSources))
	}
	if policyFile != "" {
		// An unreadable or malformed policy is reported by Validate.
		if rules, err := stack.PolicyConditions(policyFile); err == nil && len(rules) > 0 {
			need["cel"] = true
			why = append(why, fmt.Sprintf("context policy=%q needs CEL (cel): rule(s) %s have a when condition", policyFile, quoteAll(rules)))
		}
	}
	if len(need) == 0 {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, assetFeaturesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("assetDir %s: %w", dir, err)
	}
	built := strings.Fields(string(data))
	var missing []string
	for _, f := range []string{"mcp", "cel"} {
		if need[f] && !slices.Contains(built, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	features := strings.Join(append(slices.Clone(built), missing...), " ")
	if strings.Contains(features, " ") {
		features = strconv.Quote(features)
	}
	return fmt.Errorf("%s; the function zips in %s were built without %s; rebuild with `make build LAMBDA_FEATURES=%s`",
		strings.Join(why, "; "), dir, strings.Join(missing, " and "), features)
}

// quoteAll quotes each string and joins them with commas.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// inferenceProfileGeos are the prefixes of Bedrock cross-region inference
// profile ids (us.anthropic.…), which are not foundation-model ids.
var inferenceProfileGeos = []string{"us.", "us-gov.", "eu.", "apac.", "ca.", "jp.", "au.", "global."}

// foundationModelArn is the ARN of a Bedrock foundation model in the stack's
// region. Inference profiles span several regions and need modelArns set
// explicitly.
func foundationModelArn(id string) (string, error) {
	for _, geo := range inferenceProfileGeos {
		if strings.HasPrefix(id, geo) {
			return "", fmt.Errorf("model bedrock:%s is an inference profile: set context modelArns to the profile and foundation-model ARNs", id)
		}
	}
	return "arn:" + *awscdk.Aws_PARTITION() + ":bedrock:" + *awscdk.Aws_REGION() + "::foundation-model/" + id, nil
}

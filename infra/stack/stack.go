package stack

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/service"
)

// FunctionNames are the three Lambda functions, in the order they are built
// and deployed; each is shipped as <AssetDir>/<name>.zip.
var FunctionNames = []string{"startrun", "resume", "purge"}

// Defaults for the optional fields of AgentgateStackProps.
const (
	DefaultAssetDir           = "../dist/lambda/arm64"
	DefaultAssetDirX86        = "../dist/lambda/amd64"
	DefaultStageName          = "v1"
	DefaultApprovalTTL        = "24h"
	DefaultRetention          = "720h"
	DefaultDueShards          = 8
	DefaultPurgeRateMinutes   = 1
	DefaultStateBlobDays      = 90
	DefaultNoncurrentDays     = 7
	DefaultThrottleRateLimit  = 50
	DefaultThrottleBurstLimit = 100
	// The approval routes (no AWS credentials, the token is the credential)
	// get their own, lower method throttles and a per-IP rate rule.
	DefaultApprovalThrottleRateLimit  = 10
	DefaultApprovalThrottleBurstLimit = 20
	DefaultApprovalRateLimit          = 300 // requests per client IP in ApprovalRateWindow
	// ApprovalRateWindow is the WAF evaluation window of the per-IP rate rule.
	ApprovalRateWindow = 5 * time.Minute
	// WAF accepts per-IP rate limits from 10 to 2,000,000,000 per window.
	minApprovalRateLimit = 10
)

// AgentgateStackProps configures NewAgentgateStack. The zero value of every
// field but StackProps is a usable default, documented on the field.
type AgentgateStackProps struct {
	awscdk.StackProps

	// AssetDir holds startrun.zip, resume.zip and purge.zip, each with a
	// linux `bootstrap` for Architecture at its root (`make build`).
	// Default DefaultAssetDir (DefaultAssetDirX86 for x86_64), relative to
	// the working directory of the CDK app.
	AssetDir string

	// Architecture of the functions: "arm64" (the default, what AWS runs
	// cheapest) or "x86_64" (for an emulator that executes the functions on
	// an x86 host, such as LocalStack with Docker).
	Architecture string

	// DeletionProtection turns on DynamoDB deletion protection and keeps the
	// table, the bucket, the KMS key and the log groups when the stack is
	// deleted. Off (the zero value) suits throwaway and emulator stacks only.
	DeletionProtection bool

	// Model is AGENTGATE_MODEL, e.g. "bedrock:anthropic.claude-3-haiku-20240307-v1:0".
	// Empty leaves the variable unset (the functions' own default applies).
	Model string

	// ModelArns are the only resources bedrock:InvokeModel is allowed on
	// (foundation-model or inference-profile ARNs). None: no Bedrock access.
	ModelArns []string

	// APIKeySecretArn is the Secrets Manager secret holding the API key of an
	// openai: or anthropic: model. The workers get its ARN in
	// AGENTGATE_OPENAI_API_KEY_SECRET or AGENTGATE_ANTHROPIC_API_KEY_SECRET
	// and may read only that secret; the key never sits in the environment.
	APIKeySecretArn string

	// PublicBaseURL is AGENTGATE_PUBLIC_BASE_URL, the base of approval links:
	// an absolute http(s) URL without query or fragment, in which
	// PublicBaseURLAPIID stands for the REST API's id (known only once the
	// stack is deployed) and PublicBaseURLStage for StageName, e.g.
	// http://{apiId}.execute-api.localhost.localstack.cloud:4566/{stage} on
	// LocalStack (scripts/infra-local.sh sets that). Empty: the stage URL of
	// the REST API, https://<api>.execute-api.<region>.<suffix>/<stage>.
	PublicBaseURL string

	// StageName is the REST API stage. Default DefaultStageName.
	StageName string

	// PurgeRateMinutes is how often the purge function runs. Default
	// DefaultPurgeRateMinutes.
	PurgeRateMinutes int

	// Tracing turns on X-Ray for the functions and the API stage (on in
	// the production settings of the CDK app, see config.go).
	Tracing bool

	// StartRunConcurrency and ResumeConcurrency, when positive, reserve (and
	// so cap) that many concurrent executions for startrun and resume. A cap
	// bounds a runaway self-dispatch loop and the model spend behind it; it
	// is carved out of the account's concurrency pool, and a cap on resume
	// also caps the API routes it serves. Zero (the default): no cap. Purge
	// always runs with reserved concurrency 1, so sweeps never overlap.
	StartRunConcurrency int
	ResumeConcurrency   int

	// ApprovalRateLimit is the per-IP rate rule of the web ACL on the
	// approval routes: requests per client IP in ApprovalRateWindow, beyond
	// which WAF answers 403. Default DefaultApprovalRateLimit.
	ApprovalRateLimit int

	// ApprovalThrottleRateLimit and ApprovalThrottleBurstLimit throttle each
	// approval method (GET and POST /approvals/{token}) below the stage.
	// Defaults DefaultApprovalThrottleRateLimit and
	// DefaultApprovalThrottleBurstLimit.
	ApprovalThrottleRateLimit  float64
	ApprovalThrottleBurstLimit float64

	// AlarmEmail, when set, subscribes this address to the alarm topic
	// (the subscription must be confirmed from the mail AWS sends).
	AlarmEmail string

	// LogRetention applies to the function and access log groups. Default
	// one month.
	LogRetention awslogs.RetentionDays

	// ApprovalTTL is AGENTGATE_APPROVAL_TTL (Go duration). Default DefaultApprovalTTL.
	ApprovalTTL string

	// Retention is AGENTGATE_RETENTION (Go duration). Default DefaultRetention.
	Retention string

	// DueShards is AGENTGATE_DUE_SHARDS. Default DefaultDueShards.
	DueShards int

	// StateBlobDays expires objects under runs/ this many days after they
	// were written: a backstop for blobs that purge missed, so it must
	// exceed Retention plus the longest wait a run may ask for
	// (LongestWait: 7 days, whatever ApprovalTTL is). Default
	// DefaultStateBlobDays.
	StateBlobDays int

	// NoncurrentDays removes overwritten or deleted object versions (state
	// blobs hold prompts) this many days after they became noncurrent.
	// Default DefaultNoncurrentDays.
	NoncurrentDays int

	// ThrottleRateLimit and ThrottleBurstLimit throttle the API stage
	// (requests per second, burst). Defaults DefaultThrottleRateLimit and
	// DefaultThrottleBurstLimit.
	ThrottleRateLimit  float64
	ThrottleBurstLimit float64

	// ToolSourcesFile is the tool-sources file of the deployment's MCP
	// servers (see the README). It is validated at synth time, shipped to
	// startrun and resume in a layer (AGENTGATE_TOOL_SOURCES names it), and
	// the two workers may read exactly the secrets it names. Empty: no MCP
	// servers.
	ToolSourcesFile string

	// DirectoryFile and PolicyFile are the deployment's directory (persons,
	// aliases, groups, service accounts) and policy (rules per tool) files
	// (see the README). They are validated at synth time and shipped to
	// every function in a layer (AGENTGATE_DIRECTORY, AGENTGATE_POLICY name
	// them). Empty: none.
	DirectoryFile string
	PolicyFile    string

	// WebhookSecretArn is the Secrets Manager secret of the webhook signing
	// secrets (whsec_..., white-space separated; encrypted with the
	// aws/secretsmanager key). Set, it turns webhooks on: every function
	// gets AGENTGATE_WEBHOOK_SECRET and may read exactly this secret
	// (startrun accepts webhook_url, the workers send first attempts, purge
	// the retries; see addWebhooks). Empty: no webhooks.
	WebhookSecretArn string
	// WebhookAllow is the allow-list of internal address prefixes webhooks
	// may go to (AGENTGATE_WEBHOOK_ALLOW); needs WebhookSecretArn.
	WebhookAllow string
	// WebhookConcurrency is how many runs' webhook deliveries a sweep makes
	// at the same time (AGENTGATE_WEBHOOK_CONCURRENCY on purge, 1 to
	// webhook.MaxConcurrency); needs WebhookSecretArn. Zero: the
	// function's default (service.DefaultDeliveryConcurrency).
	WebhookConcurrency int

	// SESAPI is AGENTGATE_SES_API of the three functions, the SES API their
	// approval mail goes through: "v1" (SendEmail of SES's first API, for
	// LocalStack Community, which has no SES v2) or "v2". Empty (the
	// default) leaves the variable unset: SES v2. Either is the IAM action
	// ses:SendEmail the roles allow.
	SESAPI string

	// QuorumCheck is AGENTGATE_QUORUM_CHECK of the two workers (startrun
	// and resume), "on" or "off": whether a suspension schedules the
	// sweep's quorum checks against the directory. Empty (the default)
	// leaves the variable unset: off in this release. Turn it on once no
	// function of a release before the one that reads it runs (README,
	// "quorum check").
	QuorumCheck string

	// QuorumCheckEvery is AGENTGATE_QUORUM_CHECK_EVERY of the three
	// functions (the workers schedule a hold's first check by it, purge
	// the later checks and the confirmation of a lost call), a Go duration
	// from 1s to 24h. Empty (the default) leaves the variable unset: the
	// functions check every hour (service.DefaultQuorumCheckEvery). For
	// test deployments that need checks to come due soon.
	QuorumCheckEvery string

	// SkipAPIGatewayAccountRole leaves the account-wide API Gateway
	// CloudWatch role alone (set it when the account already has one);
	// access logging needs that role to exist.
	SkipAPIGatewayAccountRole bool
}

// Placeholders of PublicBaseURL.
const (
	PublicBaseURLAPIID = "{apiId}"
	PublicBaseURLStage = "{stage}"
)

// withDefaults returns a copy of p with every unset optional field filled in.
func (p AgentgateStackProps) withDefaults() AgentgateStackProps {
	if p.Architecture == "" {
		p.Architecture = "arm64"
	}
	if p.AssetDir == "" {
		p.AssetDir = DefaultAssetDir
		if p.Architecture == "x86_64" {
			p.AssetDir = DefaultAssetDirX86
		}
	}
	if p.StageName == "" {
		p.StageName = DefaultStageName
	}
	if p.PurgeRateMinutes == 0 {
		p.PurgeRateMinutes = DefaultPurgeRateMinutes
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if p.ApprovalTTL == "" {
		p.ApprovalTTL = DefaultApprovalTTL
	}
	if p.Retention == "" {
		p.Retention = DefaultRetention
	}
	if p.DueShards == 0 {
		p.DueShards = DefaultDueShards
	}
	if p.StateBlobDays == 0 {
		p.StateBlobDays = DefaultStateBlobDays
	}
	if p.NoncurrentDays == 0 {
		p.NoncurrentDays = DefaultNoncurrentDays
	}
	if p.ThrottleRateLimit == 0 {
		p.ThrottleRateLimit = DefaultThrottleRateLimit
	}
	if p.ThrottleBurstLimit == 0 {
		p.ThrottleBurstLimit = DefaultThrottleBurstLimit
	}
	if p.ApprovalRateLimit == 0 {
		p.ApprovalRateLimit = DefaultApprovalRateLimit
	}
	if p.ApprovalThrottleRateLimit == 0 {
		p.ApprovalThrottleRateLimit = DefaultApprovalThrottleRateLimit
	}
	if p.ApprovalThrottleBurstLimit == 0 {
		p.ApprovalThrottleBurstLimit = DefaultApprovalThrottleBurstLimit
	}
	return p
}

// LongestWait is the longest a suspended run may wait on its state blob: the
// largest approval window (approval_ttl_seconds) and client-tool results
// window (tool_results_ttl_seconds) a start request may ask for, whatever
// the deployment's default approval TTL. A suspension writes the blob, and
// the decision or the results read it back up to this long after.
var LongestWait = max(service.MaxApprovalTTL, service.MaxToolResultsTTL)

// Validate reports settings that cannot be deployed: durations that do not
// parse and a state-blob backstop that would delete blobs of runs still
// waiting (up to LongestWait, not only the deployment's default approval
// TTL) or retained.
func (p AgentgateStackProps) Validate() error {
	p = p.withDefaults()
	var errs []error
	ttl, err := time.ParseDuration(p.ApprovalTTL)
	if err != nil || ttl < service.MinApprovalTTL || ttl > service.MaxApprovalTTL {
		errs = append(errs, fmt.Errorf("approval TTL %q: want a Go duration from %s to %s", p.ApprovalTTL, service.MinApprovalTTL, service.MaxApprovalTTL))
	}
	retention, err := time.ParseDuration(p.Retention)
	if err != nil || retention < time.Hour {
		errs = append(errs, fmt.Errorf("retention %q: want a Go duration of at least 1h", p.Retention))
	}
	if backstop := time.Duration(p.StateBlobDays) * 24 * time.Hour; backstop <= LongestWait+retention {
		errs = append(errs, fmt.Errorf("state blob backstop of %d days must exceed the longest wait a run may ask for (%s: approval_ttl_seconds, tool_results_ttl_seconds) plus retention (%s)",
			p.StateBlobDays, LongestWait, p.Retention))
	}
	if p.DueShards > 64 {
		errs = append(errs, fmt.Errorf("due shards %d: at most 64", p.DueShards))
	}
	if p.DueShards < 1 || p.PurgeRateMinutes < 1 || p.StateBlobDays < 1 || p.NoncurrentDays < 1 {
		errs = append(errs, errors.New("due shards, purge rate, state blob days and noncurrent days must be positive"))
	}
	if p.Architecture != "arm64" && p.Architecture != "x86_64" {
		errs = append(errs, fmt.Errorf("architecture %q: want arm64 or x86_64", p.Architecture))
	}
	if p.APIKeySecretArn != "" {
		if !strings.HasPrefix(p.APIKeySecretArn, "arn:") || !strings.Contains(p.APIKeySecretArn, ":secretsmanager:") {
			errs = append(errs, fmt.Errorf("API key secret %q: want a Secrets Manager secret ARN", p.APIKeySecretArn))
		}
		if apiKeySecretEnv(p.Model) == "" {
			errs = append(errs, fmt.Errorf("an API key secret goes with an openai: or anthropic: model, not %q", p.Model))
		}
	}
	if p.StartRunConcurrency < 0 || p.ResumeConcurrency < 0 {
		errs = append(errs, errors.New("startrun and resume concurrency must not be negative (0: no cap)"))
	}
	if p.ApprovalRateLimit < minApprovalRateLimit || p.ApprovalRateLimit > 2_000_000_000 {
		errs = append(errs, fmt.Errorf("approval rate limit %d: WAF accepts %d to 2000000000 requests per window", p.ApprovalRateLimit, minApprovalRateLimit))
	}
	if p.ApprovalThrottleRateLimit > p.ThrottleRateLimit || p.ApprovalThrottleBurstLimit > p.ThrottleBurstLimit {
		errs = append(errs, fmt.Errorf("approval throttles (%g rps, burst %g) must not exceed the stage's (%g rps, burst %g)",
			p.ApprovalThrottleRateLimit, p.ApprovalThrottleBurstLimit, p.ThrottleRateLimit, p.ThrottleBurstLimit))
	}
	if p.AlarmEmail != "" && !strings.Contains(p.AlarmEmail, "@") {
		errs = append(errs, fmt.Errorf("alarm e-mail %q: want an e-mail address", p.AlarmEmail))
	}
	if err := validateToolSources(p.ToolSourcesFile); err != nil {
		errs = append(errs, err)
	}
	if err := validateGovernance(p); err != nil {
		errs = append(errs, err)
	}
	if p.SESAPI != "" {
		if _, err := approval.ParseSESAPI(p.SESAPI); err != nil {
			errs = append(errs, fmt.Errorf("SES API %w", err))
		}
	}
	switch strings.ToLower(strings.TrimSpace(p.QuorumCheck)) {
	case "", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("quorum check %q: want on or off", p.QuorumCheck))
	}
	if p.QuorumCheckEvery != "" {
		if d, err := time.ParseDuration(strings.TrimSpace(p.QuorumCheckEvery)); err != nil || d < service.MinQuorumCheckEvery || d > service.MaxQuorumCheckEvery {
			errs = append(errs, fmt.Errorf("quorum check interval %q: want a Go duration from %s to %s", p.QuorumCheckEvery, service.MinQuorumCheckEvery, service.MaxQuorumCheckEvery))
		}
	}
	if err := validateWebhooks(p); err != nil {
		errs = append(errs, err)
	}
	if err := validatePublicBaseURL(p.PublicBaseURL); err != nil {
		errs = append(errs, err)
	}
	if !stageNamePattern.MatchString(p.StageName) {
		errs = append(errs, fmt.Errorf("stage name %q: want letters, digits, - or _", p.StageName))
	}
	return errors.Join(errs...)
}

// apiKeySecretEnv is the variable that names the API key secret of model's provider.
func apiKeySecretEnv(model string) string {
	switch {
	case strings.HasPrefix(model, "openai:"):
		return "AGENTGATE_OPENAI_API_KEY_SECRET"
	case strings.HasPrefix(model, "anthropic:"):
		return "AGENTGATE_ANTHROPIC_API_KEY_SECRET"
	}
	return ""
}

// validatePublicBaseURL refuses a public base URL the functions would
// refuse at start-up (internal/config: an absolute http(s) URL without
// user, query or fragment) and one with a placeholder other than
// PublicBaseURLAPIID and PublicBaseURLStage.
func validatePublicBaseURL(base string) error {
	if base == "" {
		return nil
	}
	filled := strings.NewReplacer(PublicBaseURLAPIID, "a1b2c3d4e5", PublicBaseURLStage, "v1").Replace(base)
	u, err := url.Parse(filled)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(filled, "{}") {
		return fmt.Errorf("public base URL %q: want an absolute http(s) URL without user, query or fragment; %s and %s are the only placeholders",
			base, PublicBaseURLAPIID, PublicBaseURLStage)
	}
	return nil
}

var stageNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// CheckAssets reports the first function zip missing from dir, with the
// command that builds it.
func CheckAssets(dir string) error {
	for _, name := range FunctionNames {
		zip := filepath.Join(dir, name+".zip")
		if _, err := os.Stat(zip); err != nil {
			return fmt.Errorf("function asset %s is missing: run `make build` in the repository root first", zip)
		}
	}
	return nil
}

// NewAgentgateStack defines the whole agentgate deployment in a new stack.
// It panics (as CDK constructs do) on invalid props or a missing function
// asset; call Validate and CheckAssets first for readable errors.
func NewAgentgateStack(scope constructs.Construct, id string, props *AgentgateStackProps) awscdk.Stack {
	var p AgentgateStackProps
	if props != nil {
		p = *props
	}
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		panic(fmt.Sprintf("agentgate stack %s: %v", id, err))
	}

	sprops := p.StackProps
	if sprops.Description == nil {
		sprops.Description = jsii.String("agentgate: human approval for LLM agent tool calls")
	}
	st := awscdk.NewStack(scope, &id, &sprops)

	mail := newMailParameters(st)
	data := newDataStore(st, p)
	ops := newOperations(st, p)
	api := newRestAPI(st, p)
	fns := newFunctions(st, p, data, mail, ops, api.RestApiId())
	methods := addRoutes(api, fns)
	addToolSources(p, fns)
	addGovernance(p, fns)
	addWebhooks(p, fns)
	schedule := newPurgeSchedule(st, p, fns.purge, ops)
	acl := newWebACL(st, p, api)
	suppressAcceptedFindings(st, p, built{
		data: data, ops: ops, api: api, fns: fns, methods: methods, schedule: schedule, acl: acl,
	})

	output(st, "ApiUrl", jsii.String(*stageURL(p, api.RestApiId())+"/"), "Base URL of the REST API stage")
	output(st, "TableName", data.table.TableName(), "DynamoDB table (AGENTGATE_TABLE)")
	output(st, "BucketName", data.bucket.BucketName(), "S3 bucket (AGENTGATE_BUCKET)")
	output(st, "KmsKeyArn", data.key.KeyArn(), "KMS key of the bucket (AGENTGATE_KMS_KEY_ID)")
	output(st, "StartRunFunctionName", fns.startrun.FunctionName(), "startrun function")
	output(st, "ResumeFunctionName", fns.resume.FunctionName(), "resume function")
	output(st, "PurgeFunctionName", fns.purge.FunctionName(), "purge function")
	output(st, "FailedEventsQueueUrl", ops.failures.QueueUrl(), "SQS queue of failed async invocations and purge deliveries")
	output(st, "AlarmTopicArn", ops.alarms.TopicArn(), "SNS topic the stack's alarms notify (subscribe to it)")
	return st
}

func output(st awscdk.Stack, id string, value *string, description string) {
	awscdk.NewCfnOutput(st, jsii.String(id), &awscdk.CfnOutputProps{
		Value:       value,
		Description: jsii.String(description),
	})
}

// removalPolicy is RETAIN for data when deletion protection is on, DESTROY otherwise.
func (p AgentgateStackProps) removalPolicy() awscdk.RemovalPolicy {
	if p.DeletionProtection {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}

func itoa(n int) string { return strconv.Itoa(n) }

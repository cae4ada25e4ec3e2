package stack

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/agentgate/agentgate/internal/routes"
)

// The stack is checked with three cdk-nag rule packs. Every finding is
// either fixed in the stack or accepted below, in this file alone, with the
// rule, the resource it is reported on and the reason; nothing is
// suppressed stack-wide. CheckCompliance adds the packs, and the CDK app
// refuses to synthesize a stack with an unaccepted finding.

// NagPacks are the names of the rule packs CheckCompliance applies (the
// prefixes of their rule ids and of their report files).
var NagPacks = []string{"AwsSolutions", "Serverless", "NIST.800.53.R5"}

// CheckCompliance adds the AwsSolutions, Serverless and NIST 800-53 R5 rule
// packs to scope (an app or a stack). With reports, each pack writes a CSV
// report (NagReportFile) into the cloud assembly.
func CheckCompliance(scope constructs.IConstruct, reports bool) {
	props := &cdknag.NagPackProps{Reports: jsii.Bool(reports), Verbose: jsii.Bool(false)}
	for _, pack := range []awscdk.IAspect{
		cdknag.NewAwsSolutionsChecks(props),
		cdknag.NewServerlessChecks(props),
		cdknag.NewNIST80053R5Checks(props),
	} {
		awscdk.Aspects_Of(scope).Add(pack, nil)
	}
}

// NagReportFile is the name of the CSV report pack writes for a stack into
// the assembly directory (columns: Rule ID, Resource ID, Compliance,
// Exception Reason, Rule Level, Rule Info).
func NagReportFile(pack, stackName string) string {
	return pack + "--" + stackName + "-NagReport.csv"
}

// Finding is a cdk-nag message on a construct.
type Finding struct {
	Level, Path, Message string
}

func (f Finding) String() string { return f.Level + " " + f.Path + ": " + f.Message }

// UnacceptedFindings returns the cdk-nag errors and warnings (findings no
// suppression accepts) of a synthesized stack, sorted.
func UnacceptedFindings(asm cxapi.CloudAssembly, stackName string) []Finding {
	var out []Finding
	for _, m := range *asm.GetStackByName(jsii.String(stackName)).Messages() {
		if m.Level != cxapi.SynthesisMessageLevel_ERROR && m.Level != cxapi.SynthesisMessageLevel_WARNING {
			continue
		}
		msg := fmt.Sprint(m.Entry.Data)
		for _, pack := range NagPacks {
			if strings.HasPrefix(msg, pack+"-") {
				out = append(out, Finding{Level: string(m.Level), Path: *m.Id, Message: msg})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// built are the constructs the suppressions name.
type built struct {
	data     dataStore
	ops      operations
	api      restAPI
	fns      functions
	methods  map[string]awsapigateway.Method
	schedule awsevents.Rule
	acl      webACL
}

// suppression accepts the findings of one rule on some resources.
type suppression struct {
	rule string
	// on are the constructs whose CloudFormation resource (the construct
	// itself or its default child) the findings are reported on.
	on []constructs.IConstruct
	// appliesTo limits the suppression to these findings of the rule (IAM5
	// and IAM4 name the wildcard resource or the managed policy); empty:
	// every finding of the rule on the resources.
	appliesTo []string
	reason    string
}

// acceptedFindings is the table of accepted findings for a stack built
// with p.
func acceptedFindings(st awscdk.Stack, p AgentgateStackProps, b built) []suppression {
	bucket := st.Resolve(b.data.bucket.Node().DefaultChild().(awscdk.CfnResource).LogicalId()).(string)
	objects := func(prefix string) string { return "Resource::<" + bucket + ".Arn>/" + prefix }
	// A role's statements are in its DefaultPolicy, where the IAM findings are.
	role := func(fn string) constructs.IConstruct {
		return b.fns.roles[fn].Node().FindChild(jsii.String("DefaultPolicy"))
	}
	fn := func(name string) constructs.IConstruct {
		return map[string]constructs.IConstruct{"startrun": b.fns.startrun, "resume": b.fns.resume, "purge": b.fns.purge}[name]
	}
	fns := []constructs.IConstruct{b.fns.startrun, b.fns.resume, b.fns.purge}
	roles := []constructs.IConstruct{role("startrun"), role("resume"), role("purge")}
	var signed, approval []constructs.IConstruct
	for _, r := range routes.Deployed() {
		m := b.methods[r.String()]
		if r.Authenticated {
			signed = append(signed, m)
		} else {
			approval = append(approval, m)
		}
	}
	logGroups := []constructs.IConstruct{b.api.accessLogs, b.api.executionLogs, b.acl.logs}
	for _, l := range b.fns.logs {
		logGroups = append(logGroups, l)
	}
	stage := b.api.DeploymentStage()

	const (
		runIDs   = "run ids (and the SHA-256 names of state blobs) are created at run time, so one prefix of the one bucket is as narrow as a role can be written; which run a call touches is decided by the run row the function holds a lease on"
		noVPC    = "the functions reach only AWS service endpoints (DynamoDB, S3, KMS, SES, Lambda, Bedrock, Secrets Manager) and, for an openai:/anthropic: model, the provider over the internet; a VPC would add NAT gateways or seven interface endpoints and cold-start time and protect no private resource"
		noDLQ    = "failed asynchronous invocations go to the on-failure destination of the function's event-invoke config (the FailedEvents queue, alarmed), which AWS recommends over a dead-letter queue: its records carry the error and the request context, a DLQ's only the event; both would record every failure twice"
		noCMKLog = "CloudWatch Logs encrypts these groups at rest with AWS-owned keys; they hold no prompts, tool arguments or tokens (functions log run ids and outcomes, access logs the route template, execution logs run at ERROR, WAF logs redact the path, credentials and idempotency keys), so a customer managed key would add a key and a key policy without protecting secret data"
	)
	out := []suppression{
		// IAM: the policies are written statement by statement in iam.go.
		{rule: "AwsSolutions-IAM5", on: roles, appliesTo: []string{objects("runs/*")},
			reason: "state blobs live under runs/<run id>/state/<sha256>: " + runIDs},
		{rule: "AwsSolutions-IAM5", on: []constructs.IConstruct{role("startrun"), role("resume")}, appliesTo: []string{objects("runs/*/state/*")},
			reason: "startrun and resume delete the state blob of a run they settled (runs/<run id>/state/<sha256>): " + runIDs},
		{rule: "AwsSolutions-IAM5", on: []constructs.IConstruct{role("startrun"), role("resume")}, appliesTo: []string{objects("content/*")},
			reason: "the builtin document tools read and write documents under content/ in both workers (a write the policy lets run unasked runs in startrun, an approved one in resume); the document path is a tool argument, so the prefix is the narrowest resource"},
		{rule: "NIST.800.53.R5-IAMNoInlinePolicy", on: roles,
			reason: "each function's policy belongs to its role alone and lives and dies with it (AWS documents inline policies for a strict one-to-one policy-identity relationship); a managed policy could be attached to other principals, which least privilege does not want; iam_test.go checks every statement"},

		// API: authorization, caching, backend certificates.
		{rule: "AwsSolutions-COG4", on: signed,
			reason: "callers of /runs authenticate with SigV4 against IAM (AWS_IAM authorization) and the handlers record the signed principal as the actor; there are no end users in a Cognito user pool to authorize"},
		{rule: "AwsSolutions-COG4", on: approval,
			reason: "an approver opening a mailed link has no AWS or Cognito identity: the credential of /approvals/{token} is the token in the path (256-bit, stored hashed, single use, bound to run, suspension and approver, expiring with the approval)"},
		{rule: "AwsSolutions-APIG4", on: approval,
			reason: "the approval link carries its credential in the path by design (the token, see DESIGN.md); the handler authorizes every request by it, and the web ACL's per-IP rate rule and the method throttles bound unauthenticated floods"},
		{rule: "NIST.800.53.R5-APIGWCacheEnabledAndEncrypted", on: []constructs.IConstruct{stage},
			reason: "responses are per caller and change with every step of a run; a stage cache keyed by path would serve one caller's run or approval page to another, and stale states"},
		{rule: "NIST.800.53.R5-APIGWSSLEnabled", on: []constructs.IConstruct{stage},
			reason: "a stage client certificate authenticates API Gateway to an HTTP backend; every integration here is a Lambda proxy invocation, signed by API Gateway with IAM, so there is no backend to present it to"},

		// Functions.
		{rule: "NIST.800.53.R5-LambdaInsideVPC", on: fns, reason: noVPC},
		{rule: "Serverless-LambdaDLQ", on: fns, reason: noDLQ},
		{rule: "NIST.800.53.R5-LambdaDLQ", on: fns, reason: noDLQ},

		// Data and logs.
		{rule: "NIST.800.53.R5-CloudWatchLogGroupEncrypted", on: logGroups, reason: noCMKLog},
		{rule: "NIST.800.53.R5-DynamoDBInBackupPlan", on: []constructs.IConstruct{b.data.table},
			reason: "point-in-time recovery is on (any second of the last 35 days can be restored) and deletion protection in production; an AWS Backup plan (vault, schedule, copies) is an account-level choice the operator adds by tag or ARN"},
		{rule: "AwsSolutions-S1", on: []constructs.IConstruct{b.data.bucket},
			reason: "only the three function roles read and write the bucket; object-level audit belongs to CloudTrail data events of the account trail, and a server-access-log bucket would need this same exemption itself"},
		{rule: "NIST.800.53.R5-S3BucketLoggingEnabled", on: []constructs.IConstruct{b.data.bucket},
			reason: "only the three function roles read and write the bucket; object-level audit belongs to CloudTrail data events of the account trail, and a server-access-log bucket would need this same exemption itself"},
		{rule: "NIST.800.53.R5-S3BucketReplicationEnabled", on: []constructs.IConstruct{b.data.bucket},
			reason: "state blobs hold prompts and live only until their run settles (deleted then, lifecycle backstop); replicating them would copy prompt data to a second region for no recovery gain, since a run's state is useless without its table row; versioning covers deletion"},

		// The failed-events queue is itself the dead end.
		{rule: "AwsSolutions-SQS3", on: []constructs.IConstruct{b.ops.failures},
			reason: "this queue is the on-failure destination and dead-letter queue of the stack's asynchronous invocations; a DLQ of it would only move the same records, which stay 14 days (or the deployment's retention when shorter) and raise the FailedEvents alarm"},
		{rule: "Serverless-SQSRedrivePolicy", on: []constructs.IConstruct{b.ops.failures},
			reason: "this queue is the on-failure destination and dead-letter queue of the stack's asynchronous invocations; nothing consumes it, so there is nothing to redrive from; its records raise the FailedEvents alarm"},
	}
	if p.Tracing {
		out = append(out, suppression{rule: "AwsSolutions-IAM5", on: roles, appliesTo: []string{"Resource::*"},
			reason: "X-Ray's PutTraceSegments and PutTelemetryRecords, the two actions CDK adds with active tracing, support no resource-level permissions (AWS service authorization reference); every other statement names its resources"})
	}
	if !p.SkipAPIGatewayAccountRole {
		out = append(out, suppression{rule: "AwsSolutions-IAM4", on: []constructs.IConstruct{b.api.Node().TryFindChild(jsii.String("CloudWatchRole"))},
			appliesTo: []string{"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"},
			reason:    "the account-wide role API Gateway writes access and execution logs with; AmazonAPIGatewayPushToCloudWatchLogs is the policy AWS documents for it (API Gateway names the log groups per API and stage, so there is no narrower resource); skipApiGatewayAccountRole leaves an existing account role in place"})
	}
	if !p.Tracing {
		const off = "tracing is off in this deployment by the deployer's choice (context tracing=false, e.g. on an emulator); the production settings turn X-Ray on for the functions and the stage"
		out = append(out,
			suppression{rule: "Serverless-LambdaTracing", on: fns, reason: off},
			suppression{rule: "Serverless-APIGWXrayEnabled", on: []constructs.IConstruct{stage}, reason: off})
	}
	if p.AlarmEmail != "" {
		out = append(out, suppression{rule: "Serverless-SNSRedrivePolicy", on: []constructs.IConstruct{b.ops.alarms.Node().FindChild(jsii.String(p.AlarmEmail))},
			reason: "SNS retries an e-mail delivery for hours on its own; a redrive queue for alarm mails that still fail would need an alarm of its own, whose notifications would take the same undeliverable path"})
	}
	for name, cap := range map[string]int{"startrun": p.StartRunConcurrency, "resume": p.ResumeConcurrency} {
		if cap == 0 {
			out = append(out, suppression{rule: "NIST.800.53.R5-LambdaConcurrency", on: []constructs.IConstruct{fn(name)},
				reason: "a cap is opt-in (context startRunConcurrency / resumeConcurrency, README production settings): reserved concurrency is carved out of the account pool and throttles legitimate runs, and a cap on resume also caps its API routes; API throttles and WAF bound the entry points"})
		}
	}
	return out
}

// suppressAcceptedFindings applies the table to the stack's resources.
func suppressAcceptedFindings(st awscdk.Stack, p AgentgateStackProps, b built) {
	for _, s := range acceptedFindings(st, p, b) {
		ns := &cdknag.NagPackSuppression{Id: jsii.String(s.rule), Reason: jsii.String(s.reason)}
		if len(s.appliesTo) > 0 {
			applies := make([]any, len(s.appliesTo))
			for i, a := range s.appliesTo {
				applies[i] = a
			}
			ns.AppliesTo = &applies
		}
		on := make([]constructs.IConstruct, len(s.on))
		for i, c := range s.on {
			on[i] = cfnResource(c)
		}
		cdknag.NagSuppressions_AddResourceSuppressions(&on, &[]*cdknag.NagPackSuppression{ns}, jsii.Bool(false))
	}
}

// cfnResource is c's CloudFormation resource: c itself or its default child.
func cfnResource(c constructs.IConstruct) constructs.IConstruct {
	if child := c.Node().DefaultChild(); child != nil {
		return child
	}
	return c
}

package stack

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// mailParameters are the CloudFormation parameters naming the SES sender.
type mailParameters struct {
	// from is the sender address (AGENTGATE_MAIL_FROM).
	from awscdk.CfnParameter
	// identity is the verified SES identity (domain or address) that from
	// belongs to; ses:SendEmail is allowed on it alone.
	identity awscdk.CfnParameter
}

func newMailParameters(st awscdk.Stack) mailParameters {
	return mailParameters{
		from: awscdk.NewCfnParameter(st, jsii.String("MailFrom"), &awscdk.CfnParameterProps{
			Type:                  jsii.String("String"),
			Description:           jsii.String("Sender address of approval mails (AGENTGATE_MAIL_FROM), e.g. approvals@example.com"),
			AllowedPattern:        jsii.String(`[^@\s]+@[^@\s]+`),
			ConstraintDescription: jsii.String("must be an e-mail address"),
		}),
		identity: awscdk.NewCfnParameter(st, jsii.String("SesIdentity"), &awscdk.CfnParameterProps{
			Type:        jsii.String("String"),
			Description: jsii.String("Verified SES identity the sender belongs to: its domain (example.com) or the address itself"),
			MinLength:   jsii.Number(3),
		}),
	}
}

// functions are the three Lambda functions, their roles, log groups and
// event-invoke configurations (by asset name: startrun, resume, purge).
type functions struct {
	startrun, resume, purge awslambda.Function
	roles                   map[string]awsiam.Role
	logs                    []awslogs.LogGroup
	asyncConfigs            map[string]awslambda.CfnEventInvokeConfig
}

// functionNames derives the physical function names from the stack name, so
// that a function's own ARN is known before the function exists (a worker
// dispatches itself; referencing its ARN from its role would be a cycle).
type functionNames struct {
	startrun, resume, purge string
}

func newFunctionNames(st awscdk.Stack) functionNames {
	base := *st.StackName()
	return functionNames{startrun: base + "-startrun", resume: base + "-resume", purge: base + "-purge"}
}

// functionArn is the ARN of the function called name in this stack's account
// and region, built without referencing the function resource.
func functionArn(st awscdk.Stack, name string) *string {
	return st.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("lambda"),
		Resource:     jsii.String("function"),
		ResourceName: jsii.String(name),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// stageURL is the invoke URL of the API stage (no trailing slash), built from
// the RestApi id and the stage name alone: the stage resource depends on the
// methods and so on the functions, which need this URL (and moto does not
// resolve a Ref to a stage).
func stageURL(p AgentgateStackProps, restAPIID *string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://"), restAPIID, jsii.String(".execute-api."), awscdk.Aws_REGION(),
		jsii.String("."), awscdk.Aws_URL_SUFFIX(), jsii.String("/" + p.StageName),
	})
}

// publicBaseURL is the base of approval links: the prop, with
// PublicBaseURLAPIID replaced by the REST API's id and PublicBaseURLStage
// by the stage name, else the stage URL.
func publicBaseURL(p AgentgateStackProps, restAPIID *string) *string {
	if p.PublicBaseURL == "" {
		return stageURL(p, restAPIID)
	}
	parts := strings.Split(strings.ReplaceAll(p.PublicBaseURL, PublicBaseURLStage, p.StageName), PublicBaseURLAPIID)
	if len(parts) == 1 {
		return jsii.String(parts[0])
	}
	var joined []*string
	for i, part := range parts {
		if i > 0 {
			joined = append(joined, restAPIID)
		}
		if part != "" {
			joined = append(joined, jsii.String(part))
		}
	}
	return awscdk.Fn_Join(jsii.String(""), &joined)
}

// functionSpec is what differs between the three functions.
type functionSpec struct {
	id          string
	name        string
	asset       string
	description string
	memoryMB    float64
	timeout     awscdk.Duration
	env         map[string]*string
	statements  []awsiam.PolicyStatement
	// reserved is the reserved concurrency (0: none).
	reserved int
	async    asyncSettings
}

func newFunctions(st awscdk.Stack, p AgentgateStackProps, data dataStore, mail mailParameters, ops operations, restAPIID *string) functions {
	names := newFunctionNames(st)
	if n := len(names.startrun); n > 64 {
		panic(fmt.Sprintf("stack name %q too long: function name %q has %d characters, Lambda allows 64", *st.StackName(), names.startrun, n))
	}
	arns := accessArns{
		table:        data.table.TableArn(),
		dueIndex:     jsii.String(*data.table.TableArn() + "/index/" + DueIndexName),
		bucket:       data.bucket.BucketArn(),
		stateObjects: data.bucket.ArnForObjects(jsii.String(StatePrefix + "*")),
		stateBlobs:   data.bucket.ArnForObjects(jsii.String(StatePrefix + "*/state/*")),
		documents:    data.bucket.ArnForObjects(jsii.String(ContentPrefix + "*")),
		key:          data.key.KeyArn(),
		startrun:     functionArn(st, names.startrun),
		resume:       functionArn(st, names.resume),
		sesIdentity: st.FormatArn(&awscdk.ArnComponents{
			Service:      jsii.String("ses"),
			Resource:     jsii.String("identity"),
			ResourceName: mail.identity.ValueAsString(),
			ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}),
		mailFrom:     mail.from.ValueAsString(),
		failedEvents: ops.failures.QueueArn(),
	}
	for _, m := range p.ModelArns {
		arns.models = append(arns.models, jsii.String(m))
	}
	if p.APIKeySecretArn != "" {
		arns.apiKeySecret = jsii.String(p.APIKeySecretArn)
	}

	common := map[string]*string{
		"AGENTGATE_TABLE":      data.table.TableName(),
		"AGENTGATE_BUCKET":     data.bucket.BucketName(),
		"AGENTGATE_KMS_KEY_ID": data.key.KeyArn(),
		"AGENTGATE_RETENTION":  jsii.String(p.Retention),
		"AGENTGATE_DUE_SHARDS": jsii.String(itoa(p.DueShards)),
	}
	env := func(extra map[string]*string) map[string]*string {
		out := make(map[string]*string, len(common)+len(extra))
		for k, v := range common {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	base := publicBaseURL(p, restAPIID)
	workerEnv := map[string]*string{
		"AGENTGATE_PUBLIC_BASE_URL": base,
		"AGENTGATE_MAIL_FROM":       mail.from.ValueAsString(),
		"AGENTGATE_APPROVAL_TTL":    jsii.String(p.ApprovalTTL),
	}
	// sharedEnv is what all three functions are given alike.
	sharedEnv := map[string]*string{}
	if p.SESAPI != "" {
		// All three mail: the workers the first mails, purge the reminders.
		sharedEnv["AGENTGATE_SES_API"] = jsii.String(strings.ToLower(strings.TrimSpace(p.SESAPI)))
	}
	if p.QuorumCheckEvery != "" {
		// All three: the workers schedule a hold's first check, purge the
		// later ones, by the same interval.
		sharedEnv["AGENTGATE_QUORUM_CHECK_EVERY"] = jsii.String(strings.TrimSpace(p.QuorumCheckEvery))
	}
	maps.Copy(workerEnv, sharedEnv)
	if p.Model != "" {
		workerEnv["AGENTGATE_MODEL"] = jsii.String(p.Model)
	}
	if p.APIKeySecretArn != "" {
		workerEnv[apiKeySecretEnv(p.Model)] = jsii.String(p.APIKeySecretArn)
	}
	if p.QuorumCheck != "" {
		// The workers schedule the checks at a suspension; purge makes
		// the checks a row has, whatever the setting.
		workerEnv["AGENTGATE_QUORUM_CHECK"] = jsii.String(strings.ToLower(strings.TrimSpace(p.QuorumCheck)))
	}
	startEnv := env(workerEnv)
	startEnv["AGENTGATE_STARTRUN_FUNCTION"] = jsii.String(names.startrun)
	resumeEnv := env(workerEnv)
	resumeEnv["AGENTGATE_RESUME_FUNCTION"] = jsii.String(names.resume)
	purgeEnv := env(map[string]*string{
		"AGENTGATE_PUBLIC_BASE_URL":   base,
		"AGENTGATE_MAIL_FROM":         mail.from.ValueAsString(),
		"AGENTGATE_STARTRUN_FUNCTION": jsii.String(names.startrun),
		"AGENTGATE_RESUME_FUNCTION":   jsii.String(names.resume),
	})
	maps.Copy(purgeEnv, sharedEnv)

	worker := awscdk.Duration_Minutes(jsii.Number(15))
	workerAsync := asyncSettings{retryAttempts: WorkerRetryAttempts, maxEventAge: WorkerMaxEventAge}
	fns := functions{roles: map[string]awsiam.Role{}, asyncConfigs: map[string]awslambda.CfnEventInvokeConfig{}}
	fns.startrun = newFunction(st, p, ops, &fns, functionSpec{
		id: "StartRun", name: names.startrun, asset: "startrun",
		description: "agentgate POST /runs and the async run worker",
		memoryMB:    512, timeout: worker, env: startEnv,
		statements: startRunStatements(arns),
		reserved:   p.StartRunConcurrency, async: workerAsync,
	})
	fns.resume = newFunction(st, p, ops, &fns, functionSpec{
		id: "Resume", name: names.resume, asset: "resume",
		description: "agentgate /runs/{id}/..., /approvals/{token} and the async resume worker",
		memoryMB:    512, timeout: worker, env: resumeEnv,
		statements: resumeStatements(arns),
		reserved:   p.ResumeConcurrency, async: workerAsync,
	})
	fns.purge = newFunction(st, p, ops, &fns, functionSpec{
		id: "Purge", name: names.purge, asset: "purge",
		description: "agentgate scheduled sweep: approval expiry, stale leases, lost dispatches, retention",
		memoryMB:    256, timeout: awscdk.Duration_Minutes(jsii.Number(5)), env: purgeEnv,
		statements: purgeStatements(arns),
		reserved:   PurgeReservedConcurrency,
		async:      asyncSettings{retryAttempts: PurgeRetryAttempts, maxEventAge: PurgeMaxEventAge},
	})
	return fns
}

func newFunction(st awscdk.Stack, p AgentgateStackProps, ops operations, fns *functions, s functionSpec) awslambda.Function {
	logs := awslogs.NewLogGroup(st, jsii.String(s.id+"Logs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: p.removalPolicy(),
	})
	role := awsiam.NewRole(st, jsii.String(s.id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Execution role of " + s.name + " (least privilege, explicit statements)"),
	})
	statements := append([]awsiam.PolicyStatement{logStatement(logs.LogGroupArn())}, s.statements...)
	for _, stmt := range statements {
		role.AddToPolicy(stmt)
	}
	tracing := awslambda.Tracing_DISABLED
	if p.Tracing {
		tracing = awslambda.Tracing_ACTIVE
	}
	arch := awslambda.Architecture_ARM_64()
	if p.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	env := s.env
	var reserved *float64
	if s.reserved > 0 {
		reserved = jsii.Number(s.reserved)
	}
	fn := awslambda.NewFunction(st, jsii.String(s.id), &awslambda.FunctionProps{
		FunctionName: jsii.String(s.name),
		Description:  jsii.String(s.description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: arch,
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetDir, s.asset+".zip")), nil),
		MemorySize:   jsii.Number(s.memoryMB),
		Timeout:      s.timeout,
		Environment:  &env,
		Role:         role,
		LogGroup:     logs,
		Tracing:      tracing,

		ReservedConcurrentExecutions: reserved,
	})
	fns.roles[s.asset] = role
	fns.logs = append(fns.logs, logs)
	fns.asyncConfigs[s.asset] = configureAsync(st, s.id, fn, role, ops, s.async)
	return fn
}

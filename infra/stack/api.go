package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// newRestAPI creates the REST API (v1) and its stage, without routes: the
// functions need the API id for their approval-link base URL first.
func newRestAPI(st awscdk.Stack, p AgentgateStackProps) awsapigateway.RestApi {
	accessLogs := awslogs.NewLogGroup(st, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: p.removalPolicy(),
	})
	api := awsapigateway.NewRestApi(st, jsii.String("Api"), &awsapigateway.RestApiProps{
		Description:    jsii.String("agentgate runs and approvals"),
		EndpointTypes:  &[]awsapigateway.EndpointType{awsapigateway.EndpointType_REGIONAL},
		CloudWatchRole: jsii.Bool(!p.SkipAPIGatewayAccountRole),
		DeployOptions: &awsapigateway.StageOptions{
			StageName:            jsii.String(p.StageName),
			ThrottlingRateLimit:  jsii.Number(p.ThrottleRateLimit),
			ThrottlingBurstLimit: jsii.Number(p.ThrottleBurstLimit),
			AccessLogDestination: awsapigateway.NewLogGroupLogDestination(accessLogs),
			AccessLogFormat: awsapigateway.AccessLogFormat_JsonWithStandardFields(&awsapigateway.JsonWithStandardFieldProps{
				Caller: jsii.Bool(true), HttpMethod: jsii.Bool(true), Ip: jsii.Bool(true),
				Protocol: jsii.Bool(true), RequestTime: jsii.Bool(true), ResourcePath: jsii.Bool(true),
				ResponseLength: jsii.Bool(true), Status: jsii.Bool(true), User: jsii.Bool(true),
			}),
			TracingEnabled: jsii.Bool(p.Tracing),
			MetricsEnabled: jsii.Bool(true),
		},
	})
	// RestApi adds its own "Endpoint" output built from a Ref to the stage;
	// the stack's ApiUrl output replaces it (and resolves on moto too).
	api.Node().TryRemoveChild(jsii.String("Endpoint"))
	return api
}

// Route is one method of the REST API and the function that serves it.
type Route struct {
	Method, Path string
	// Function is "startrun" or "resume".
	Function string
	// IAM is true when callers must sign with SigV4 (AWS_IAM authorization);
	// the approval routes carry their credential in the token instead.
	IAM bool
}

// Routes are the methods of the REST API (DESIGN.md, HTTP API).
var Routes = []Route{
	{"POST", "/runs", "startrun", true},
	{"GET", "/runs/{id}", "resume", true},
	{"GET", "/runs/{id}/events", "resume", true},
	{"POST", "/runs/{id}/decision", "resume", true},
	{"POST", "/runs/{id}/cancel", "resume", true},
	{"GET", "/approvals/{token}", "resume", false},
	{"POST", "/approvals/{token}", "resume", false},
}

// addRoutes adds Routes to api as Lambda proxy integrations.
func addRoutes(api awsapigateway.RestApi, fns functions) {
	integrations := map[string]awsapigateway.LambdaIntegration{}
	for name, fn := range map[string]awslambda.Function{"startrun": fns.startrun, "resume": fns.resume} {
		integrations[name] = awsapigateway.NewLambdaIntegration(fn, &awsapigateway.LambdaIntegrationOptions{
			Proxy:           jsii.Bool(true),
			AllowTestInvoke: jsii.Bool(false),
		})
	}
	for _, r := range Routes {
		auth := awsapigateway.AuthorizationType_NONE
		if r.IAM {
			auth = awsapigateway.AuthorizationType_IAM
		}
		api.Root().ResourceForPath(jsii.String(r.Path)).AddMethod(jsii.String(r.Method), integrations[r.Function],
			&awsapigateway.MethodOptions{AuthorizationType: auth})
	}
}

// newPurgeSchedule runs purge every PurgeRateMinutes. A failed sweep is not
// retried: the next tick sweeps again.
func newPurgeSchedule(st awscdk.Stack, p AgentgateStackProps, purge awslambda.Function) awsevents.Rule {
	return awsevents.NewRule(st, jsii.String("PurgeSchedule"), &awsevents.RuleProps{
		Description: jsii.String("agentgate purge sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(p.PurgeRateMinutes))),
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(purge, &awseventstargets.LambdaFunctionProps{
				RetryAttempts: jsii.Number(0),
			}),
		},
	})
}

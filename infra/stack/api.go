package stack

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/requestschema"
)

// restAPI is the REST API with the log group API Gateway writes its
// execution logs to.
type restAPI struct {
	awsapigateway.RestApi
	executionLogs awslogs.LogGroup
	accessLogs    awslogs.LogGroup
}

// newRestAPI creates the REST API (v1) and its stage, without routes: the
// functions need the API id for their approval-link base URL first.
//
// Execution logs are on at ERROR for every method and never carry request
// data (INFO and data tracing would log the request path, and with it the
// approval token of /approvals/{token}). The approval methods get their own,
// lower throttles.
func newRestAPI(st awscdk.Stack, p AgentgateStackProps) restAPI {
	accessLogs := awslogs.NewLogGroup(st, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: p.removalPolicy(),
	})
	methods := map[string]*awsapigateway.MethodDeploymentOptions{}
	for _, r := range Routes {
		if !r.IAM {
			methods[r.Path+"/"+r.Method] = &awsapigateway.MethodDeploymentOptions{
				ThrottlingRateLimit:  jsii.Number(p.ApprovalThrottleRateLimit),
				ThrottlingBurstLimit: jsii.Number(p.ApprovalThrottleBurstLimit),
				LoggingLevel:         awsapigateway.MethodLoggingLevel_ERROR,
				DataTraceEnabled:     jsii.Bool(false),
				MetricsEnabled:       jsii.Bool(true),
			}
		}
	}
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
			LoggingLevel:     awsapigateway.MethodLoggingLevel_ERROR,
			DataTraceEnabled: jsii.Bool(false),
			TracingEnabled:   jsii.Bool(p.Tracing),
			MetricsEnabled:   jsii.Bool(true),
			MethodOptions:    &methods,
		},
	})
	// RestApi adds its own "Endpoint" output built from a Ref to the stage;
	// the stack's ApiUrl output replaces it (and resolves on moto too).
	api.Node().TryRemoveChild(jsii.String("Endpoint"))

	// API Gateway creates the execution log group on first use, without
	// retention; created here, it keeps LogRetention like the others.
	executionLogs := awslogs.NewLogGroup(st, jsii.String("ApiExecutionLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("API-Gateway-Execution-Logs_" + *api.RestApiId() + "/" + p.StageName),
		Retention:     p.LogRetention,
		RemovalPolicy: p.removalPolicy(),
	})

	// A body the request validator refuses gets the API's error shape, with
	// the status and code the handler would answer it with (see package
	// requestschema).
	api.AddGatewayResponse(jsii.String("BadRequestBody"), &awsapigateway.GatewayResponseOptions{
		Type:       awsapigateway.ResponseType_BAD_REQUEST_BODY(),
		StatusCode: jsii.String("400"),
		Templates: &map[string]*string{
			"application/json": jsii.String(badRequestBodyTemplate),
		},
	})
	return restAPI{RestApi: api, executionLogs: executionLogs, accessLogs: accessLogs}
}

// badRequestBodyTemplate is the body of API Gateway's answer to a request
// body its model refuses. The validator's own error string is not used: it
// holds unescaped quotes and would break the JSON.
var badRequestBodyTemplate = mustJSON(map[string]any{"error": map[string]string{
	"code":    httpapi.CodeBadRequest,
	"message": "the body does not match the JSON schema of this route (field types, unknown fields)",
}})

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
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

// addRoutes adds Routes to api as Lambda proxy integrations. Routes with a
// JSON body (requestschema.Bodies) validate it against a model generated
// from the Go type their handler decodes it into. It returns the methods by
// "METHOD /path".
func addRoutes(api restAPI, fns functions) map[string]awsapigateway.Method {
	integrations := map[string]awsapigateway.LambdaIntegration{}
	for name, fn := range map[string]awslambda.Function{"startrun": fns.startrun, "resume": fns.resume} {
		integrations[name] = awsapigateway.NewLambdaIntegration(fn, &awsapigateway.LambdaIntegrationOptions{
			Proxy:           jsii.Bool(true),
			AllowTestInvoke: jsii.Bool(false),
		})
	}
	validator := api.AddRequestValidator(jsii.String("BodyValidator"), &awsapigateway.RequestValidatorOptions{
		RequestValidatorName:      jsii.String("json-body"),
		ValidateRequestBody:       jsii.Bool(true),
		ValidateRequestParameters: jsii.Bool(true),
	})
	models := map[string]awsapigateway.Model{}
	for _, b := range requestschema.Bodies {
		models[b.Method+" "+b.Path] = bodyModel(api, b)
	}
	methods := map[string]awsapigateway.Method{}
	for _, r := range Routes {
		key := r.Method + " " + r.Path
		opts := &awsapigateway.MethodOptions{AuthorizationType: awsapigateway.AuthorizationType_NONE}
		if r.IAM {
			opts.AuthorizationType = awsapigateway.AuthorizationType_IAM
		}
		if m, ok := models[key]; ok {
			opts.RequestValidator = validator
			opts.RequestModels = &map[string]awsapigateway.IModel{"application/json": m}
			opts.RequestParameters = pathParameters(r.Path)
			delete(models, key)
		}
		methods[key] = api.Root().ResourceForPath(jsii.String(r.Path)).AddMethod(jsii.String(r.Method), integrations[r.Function], opts)
	}
	for key := range models {
		panic(fmt.Sprintf("requestschema.Bodies names %s, which is not in Routes", key))
	}
	return methods
}

// pathParameters declares the {name} segments of path as required request
// parameters (the validator checks them with the body).
func pathParameters(path string) *map[string]*bool {
	params := map[string]*bool{}
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			params["method.request.path."+strings.TrimSuffix(name, "}")] = jsii.Bool(true)
		}
	}
	return &params
}

// bodyModel is the API Gateway model of b: its JSON schema document, set on
// the CloudFormation resource as generated (CDK's typed JsonSchema cannot
// carry a type list such as ["string","null"]).
func bodyModel(api restAPI, b requestschema.Body) awsapigateway.Model {
	m := api.AddModel(jsii.String(b.Name+"Model"), &awsapigateway.ModelOptions{
		ModelName:   jsii.String(b.Name),
		ContentType: jsii.String("application/json"),
		Description: jsii.String(fmt.Sprintf("body of %s %s (generated from %s)", b.Method, b.Path, strings.TrimPrefix(b.Type.String(), "*"))),
		Schema:      &awsapigateway.JsonSchema{},
	})
	m.Node().DefaultChild().(awsapigateway.CfnModel).SetSchema(b.Document())
	return m
}

// newPurgeSchedule runs purge every PurgeRateMinutes. A failed sweep is not
// retried and an overdue tick is dropped: the next tick sweeps again (see
// operations.go). A tick EventBridge cannot deliver goes to the
// failed-events queue.
func newPurgeSchedule(st awscdk.Stack, p AgentgateStackProps, purge awslambda.Function, ops operations) awsevents.Rule {
	return awsevents.NewRule(st, jsii.String("PurgeSchedule"), &awsevents.RuleProps{
		Description: jsii.String("agentgate purge sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(p.PurgeRateMinutes))),
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(purge, &awseventstargets.LambdaFunctionProps{
				RetryAttempts:   jsii.Number(0),
				MaxEventAge:     PurgeMaxEventAge,
				DeadLetterQueue: ops.failures,
			}),
		},
	})
}

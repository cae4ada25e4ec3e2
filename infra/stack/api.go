package stack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
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
	for _, r := range routes.Deployed() {
		if !r.Authenticated {
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
	// the status and code the handler would answer it with (see
	// apispec.Draft4Shape).
	api.AddGatewayResponse(jsii.String("BadRequestBody"), &awsapigateway.GatewayResponseOptions{
		Type:            awsapigateway.ResponseType_BAD_REQUEST_BODY(),
		StatusCode:      jsii.String("400"),
		ResponseHeaders: gatewayResponseHeaders(),
		Templates: &map[string]*string{
			"application/json": jsii.String(badRequestBodyTemplate),
		},
	})
	// API Gateway's own answers (a request AWS_IAM refuses, an unknown
	// route, throttling, an integration failure) carry the headers of the
	// functions' answers too, so no cache keeps a refusal.
	api.AddGatewayResponse(jsii.String("Default4xx"), &awsapigateway.GatewayResponseOptions{
		Type: awsapigateway.ResponseType_DEFAULT_4XX(), ResponseHeaders: gatewayResponseHeaders(),
	})
	api.AddGatewayResponse(jsii.String("Default5xx"), &awsapigateway.GatewayResponseOptions{
		Type: awsapigateway.ResponseType_DEFAULT_5XX(), ResponseHeaders: gatewayResponseHeaders(),
	})
	return restAPI{RestApi: api, executionLogs: executionLogs, accessLogs: accessLogs}
}

// gatewayResponseHeaders are the headers every answer of the API carries
// (httpapi's: no-store and nosniff), as gateway response header values:
// static values in single quotes.
func gatewayResponseHeaders() *map[string]*string {
	return &map[string]*string{
		"Cache-Control":          jsii.String("'no-store'"),
		"X-Content-Type-Options": jsii.String("'nosniff'"),
	}
}

// badRequestBodyTemplate is the body of API Gateway's answer to a request
// body its model refuses. The validator's own error string is not used: it
// holds unescaped quotes and would break the JSON.
var badRequestBodyTemplate = mustJSON(map[string]any{"error": map[string]string{
	"code":    runs.EBadRequest,
	"message": "the body does not match the JSON schema of this route (field types, unknown fields)",
}})

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// addRoutes adds the deployed routes of the route table (routes.Deployed)
// to api as Lambda proxy integrations, AWS_IAM on the authenticated ones. Routes whose
// operation in openapi.yaml requires a JSON body validate it against the
// shape of that body's component schema (RequestBodies). It returns the
// methods by "METHOD /path".
func addRoutes(api restAPI, fns functions) map[string]awsapigateway.Method {
	integrations := map[routes.Function]awsapigateway.LambdaIntegration{}
	for name, fn := range map[routes.Function]awslambda.Function{routes.StartRun: fns.startrun, routes.Resume: fns.resume} {
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
	bodies, err := RequestBodies()
	if err != nil {
		panic(fmt.Sprintf("request models from openapi.yaml: %v", err))
	}
	for _, b := range bodies {
		models[b.Method+" "+b.Path] = bodyModel(api, b)
	}
	methods := map[string]awsapigateway.Method{}
	for _, r := range routes.Deployed() {
		key := r.String()
		opts := &awsapigateway.MethodOptions{AuthorizationType: awsapigateway.AuthorizationType_NONE}
		if r.Authenticated {
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
	return methods
}

// RequestBody is an operation of openapi.yaml (planned parts left out) that
// requires a JSON body: its route, the component schema of the body, and the
// API Gateway model of it.
type RequestBody struct {
	Method, Path string
	// Component names the schema in components/schemas (StartRequest...).
	Component string
	// Model is apispec.Draft4Shape(Component): the shape of the body only,
	// so that the gateway refuses what the handler would refuse as
	// malformed (400) and leaves the value rules (422) to the handler.
	Model map[string]any
}

// RequestBodies lists the operations of the current spec that require a
// JSON body, sorted by path and method. An optional body (cancel) is not
// validated: API Gateway would judge its absence against the model.
func RequestBodies() ([]RequestBody, error) {
	doc, err := apispec.Current()
	if err != nil {
		return nil, err
	}
	var out []RequestBody
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil || !op.RequestBody.Value.Required {
				continue
			}
			media := op.RequestBody.Value.Content.Get("application/json")
			if media == nil || media.Schema == nil {
				continue
			}
			name, ok := strings.CutPrefix(media.Schema.Ref, "#/components/schemas/")
			if !ok {
				return nil, fmt.Errorf("%s %s: the JSON body is not a component schema $ref", method, path)
			}
			raw, err := apispec.Draft4Shape(name)
			if err != nil {
				return nil, err
			}
			var model map[string]any
			if err := json.Unmarshal(raw, &model); err != nil {
				return nil, err
			}
			out = append(out, RequestBody{Method: method, Path: path, Component: name, Model: model})
		}
	}
	slices.SortFunc(out, func(a, b RequestBody) int { return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method) })
	return out, nil
}

// pathParameters declares the {name} segments of path as required request
// parameters (the validator checks them with the body).
func pathParameters(path string) *map[string]*bool {
	params := map[string]*bool{}
	for _, name := range routes.Params(path) {
		params["method.request.path."+name] = jsii.Bool(true)
	}
	return &params
}

// bodyModel is the API Gateway model of b: its JSON schema document, set on
// the CloudFormation resource as exported (CDK's typed JsonSchema would
// rename and filter keywords).
func bodyModel(api restAPI, b RequestBody) awsapigateway.Model {
	m := api.AddModel(jsii.String(b.Component+"Model"), &awsapigateway.ModelOptions{
		ModelName:   jsii.String(b.Component),
		ContentType: jsii.String("application/json"),
		Description: jsii.String(fmt.Sprintf("shape of the body of %s %s (openapi.yaml %s)", b.Method, b.Path, b.Component)),
		Schema:      &awsapigateway.JsonSchema{},
	})
	m.Node().DefaultChild().(awsapigateway.CfnModel).SetSchema(b.Model)
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

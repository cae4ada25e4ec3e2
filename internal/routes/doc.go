// Package routes is the one table of agentgate's REST API: every route's
// method, path template, operation (openapi.yaml's operationId), the
// function that serves it, whether callers must authenticate and the
// largest body its handler reads.
//
// The table drives the API handler's routing (internal/httpapi), the local
// gateway (internal/gateway: which function, authenticate or not) and the
// CDK REST API (infra/stack: resources, methods, AWS_IAM or none). Tests
// compare it with openapi.yaml (internal/apispec) and with the synthesized
// CloudFormation template (infra/stack), so a route is added here once.
//
// The package imports only the standard library: the CDK app imports it.
package routes

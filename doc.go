// Package agentgate holds the contract of agentgate's REST API: openapi.yaml
// (OpenAPI 3.1), the one description of every route, body, header and
// error. The route table (internal/routes) and the README are tested
// against it (internal/apispec), the CDK REST API against the table, API
// test suites validate their traffic with it, and the public client
// (client/) and the CLI are built on it.
package agentgate

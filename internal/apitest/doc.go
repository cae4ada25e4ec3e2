// Package apitest starts a local agentgate server for API tests: the
// embedded-default application behind the local gateway (bearer tokens),
// on 127.0.0.1:0, with every request and response validated against
// openapi.yaml (internal/apispec). A response the spec does not describe
// fails the test.
package apitest

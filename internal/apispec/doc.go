// Package apispec is the test side of openapi.yaml: it loads the spec (whole,
// or without its planned parts), lists its operations for the tests that
// compare the route table, the README and the CDK REST API with it, and
// validates API traffic against it with kin-openapi's openapi3filter (the
// bodies with the JSON Schema library openapi3filter compiles with, each
// schema compiled once: see bodySchemas).
//
// A Validator wraps an API Gateway proxy handler (Handler) or an HTTP
// client's transport (Transport). Every exchange is checked: the request
// against the operation it names, the response against the responses the
// operation declares (an undeclared status, header, content type or field
// fails), and the two against each other: a request the spec refuses must
// get a 4xx, and a request the spec accepts must not be refused as
// malformed. Unseen lists the declared responses a suite never saw.
//
// CheckWebhook validates a webhook delivery (headers and body, as its
// receiver gets them) against the spec's webhooks entry of its event type;
// internal/webhook's tests send every event type through the real sender
// and check each request with it.
//
// Draft4 exports a component schema as a self-contained JSON Schema draft 4
// document: the API Gateway request models are built from it, so the
// deployed API refuses exactly the bodies the spec refuses.
package apispec

// Package requestschema derives the JSON schemas of the API's request bodies
// from the Go types the handlers decode them into (service.StartRequest for
// POST /runs, loop.Decision for POST /runs/{id}/decision), so that the body
// models of the deployed REST API (infra/) are never written by hand.
//
// A schema describes exactly the shape the handlers' strict decoder accepts:
// JSON types, nesting and no unknown fields. Whatever it rejects, the handler
// would reject as malformed (400) too, so validating at API Gateway changes
// where a bad body is refused, never whether or with which status. Rules on
// values (required fields, ranges, tool names, digests) stay in the handlers
// and answer 422 there. One deliberate difference: field names are matched
// exactly, while encoding/json also accepts them in another letter case.
package requestschema

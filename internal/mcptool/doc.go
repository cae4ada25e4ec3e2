// Package mcptool makes every tool of a configured remote MCP server
// (streamable HTTP) a loop.Tool, behind the same approval gate as the
// builtin tools.
//
// A deployment lists its servers in a tool-sources file (ParseFile; the
// schema is in the README). Open connects to each server with the official
// MCP Go SDK, lists its tools (all pages) once, and returns a Catalog whose
// tools are exposed to the model as "<server>__<tool>". A server that
// cannot be reached at start-up does not stop the function: its tools are
// absent and Catalog.Absent says why.
//
// Approval by default: a tool runs at once only when its server is marked
// trust_annotations and the tool says readOnlyHint: true; every other tool
// is a write (fenced, needs approval). Missing annotations take the MCP
// spec defaults (not read-only, destructive, not idempotent, open world).
// Per-tool overrides in the file win: "always" asks even for a read,
// "never" runs a write without asking (still fenced), "default" keeps the
// rule above. The definition hash of a tool covers its exposed and original
// names, input schema, the hints, the trust flag and the effective rule;
// CurrentDefinition lists the server again at resume, so a tool that
// changed while a run waited is refused and nothing runs.
//
// Calls send the (possibly edited) arguments with the call's idempotency
// key in _meta under IdempotencyKeyMeta. A read is retried on transport
// errors; a write only when the request provably never left (no connection
// could be made); when a write's outcome is unknown, Call returns a Go
// error and the write fence ends the run interrupted_write — never a second
// call. A 404 on a session id re-initializes the session once.
package mcptool

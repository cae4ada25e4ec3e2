// Package mcptool makes every tool of a configured remote MCP server
// (streamable HTTP) a loop.Tool, behind the same approval gate as the
// builtin tools.
//
// A deployment lists its servers in a tool-sources file (ParseFile; the
// schema is in the README). Open connects to each server with the official
// MCP Go SDK, lists its tools (all pages), and returns a Catalog whose
// tools are exposed to the model as "<server>__<tool>". A server that
// cannot be reached at start-up does not stop the function: its tools are
// absent and Catalog.Absent says why. The Catalog is a loop.ToolSource:
// an absent server is tried again when a run needs its tools (Seek; at
// most once per retry interval, each attempt bounded by the connect
// timeout: the server's retry_interval_seconds and
// connect_timeout_seconds, else Options.RetryInterval and
// Options.ConnectTimeout), and a toolbox made with
// loop.NewToolboxWithSource offers its tools to the runs that start once
// it answered. A server that sets list_every_seconds is also listed (or,
// absent, tried) that often with no run asking: Relist, called between
// invocations on Lambda, or KeepListed, the local server's background
// loop; what such a listing adds is offered to the runs that start after
// it, gated by the file as at start-up.
//
// Approval by default: a tool runs at once only when its server is marked
// trust_annotations and the tool says readOnlyHint: true; every other tool
// is a write (fenced, needs approval). Missing annotations take the MCP
// spec defaults (not read-only, destructive, not idempotent, open world).
// Per-tool overrides in the file win: "always" asks even for a read,
// "never" runs a write without asking (still fenced), "default" keeps the
// rule above. The definition hash of a tool covers its exposed and original
// names, input schema, the hints, the trust flag and the effective rule.
// CurrentDefinition lists the server again (the loop asks when a turn is
// about to be held and before a held call runs) and refreshes the
// process's copy of every tool of that server, so a turn is held on the
// definition the server has now, a tool that changed while a run waited is
// refused with nothing run, and later runs use the new definition; a tool
// the listing offers that the process did not joins the catalog, gated by
// the same rules as one listed at start-up. A
// listing that fails returns a loop.DefinitionUnavailableError: why (never
// the transport's message) and when the definition the process still has
// was listed, which a turn held meanwhile shows its approvers.
//
// Calls send the (possibly edited) arguments with the call's idempotency
// key in _meta under IdempotencyKeyMeta. A read is retried on transport
// errors; a write only when the request provably never left (no connection
// could be made); when a write's outcome is unknown, Call returns a
// loop.OutcomeUnknownError (its Cause says why, never the server's address)
// and the write fence ends the run interrupted_write — never a second call.
// A 404 or 400 answer to a request on a session drops the session; a
// listing or a read then runs once more on a new session, a write only
// after a 404 (conn.withSession says why).
package mcptool

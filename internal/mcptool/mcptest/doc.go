// Package mcptest is an in-process MCP server for tests, built with the
// official Go SDK and served over streamable HTTP from httptest. It counts
// the tools/call requests each tool receives, records their arguments and
// idempotency keys, and can misbehave on purpose: expire its sessions, drop
// the connection after a call arrived, change a tool's schema.
package mcptest

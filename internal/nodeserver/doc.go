// Package nodeserver starts, for the integration tier, the servers nobody
// here wrote that are pinned as npm packages in tools/npm (package.json and
// package-lock.json): the MCP reference server
// (@modelcontextprotocol/server-everything) and an OpenAI-compatible mock
// model (@dwmkerr/mock-llm). scripts/test.sh installs them with `npm ci`.
//
// Without node or the installed packages a test is skipped with a message
// saying how to install them, except under CI=true, where it fails.
package nodeserver

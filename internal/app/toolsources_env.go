package app

import "fmt"

// EnvToolSources names the tool-sources file of a deployment (on Lambda
// the CDK stack ships it in a layer at mcptool.LayerPath). It is
// mcptool.EnvFile (a test compares them), written here too so that a
// Lambda built without MCP knows the variable without linking the MCP SDK.
const EnvToolSources = "AGENTGATE_TOOL_SOURCES"

// errToolSourcesLeftOut is the start-up error of a Lambda built without MCP
// whose environment names a tool-sources file (nil when none is named).
func errToolSourcesLeftOut(getenv func(string) string) error {
	if path := getenv(EnvToolSources); path != "" {
		return fmt.Errorf("%s=%s: this build leaves out MCP tool sources (rebuild with `make build LAMBDA_FEATURES=mcp`, i.e. -tags mcp)", EnvToolSources, path)
	}
	return nil
}

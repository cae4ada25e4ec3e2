package app

import (
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptool"
)

func TestToolSourcesVariable(t *testing.T) {
	if EnvToolSources != mcptool.EnvFile {
		t.Errorf("EnvToolSources = %q, mcptool.EnvFile = %q: one variable", EnvToolSources, mcptool.EnvFile)
	}
	if err := errToolSourcesLeftOut(func(string) string { return "" }); err != nil {
		t.Errorf("no tool-sources file: %v, want nil", err)
	}
	err := errToolSourcesLeftOut(func(k string) string { return map[string]string{EnvToolSources: "/opt/x.json"}[k] })
	if err == nil || !strings.Contains(err.Error(), "LAMBDA_FEATURES=mcp") || !strings.Contains(err.Error(), "/opt/x.json") {
		t.Errorf("a tool-sources file in a build without MCP: %v, want an error naming the file and how to rebuild", err)
	}
}

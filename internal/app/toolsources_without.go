//go:build !mcp && (bedrock || openai || anthropic || scripted)

package app

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/lambdaentry"
)

// MCP tool sources are opt-in for the Lambdas, like the model providers: a
// build with a provider tag (bedrock, openai, anthropic, scripted) links
// the MCP SDK only with the tag mcp (`make build LAMBDA_FEATURES=mcp`); a build
// without provider tags (the CLI, the tests) always links it. A deployment
// without tool sources saves the MCP SDK's 1.5 MB in each worker.

// lambdaToolSources refuses a tool-sources file this build cannot open.
func lambdaToolSources(context.Context, aws.Config, *slog.Logger) (ToolSources, error) {
	return nil, errToolSourcesLeftOut(os.Getenv)
}

// relistAtJobEnd has nothing to list in a build without MCP tool sources.
func relistAtJobEnd(*lambdaentry.Entry, ToolSources, *slog.Logger) {}

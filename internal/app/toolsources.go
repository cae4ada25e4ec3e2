//go:build mcp || !(bedrock || openai || anthropic || scripted)

package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/mcptool"
)

// lambdaConnectTimeout bounds connecting to one MCP server in a Lambda's
// init phase (which Lambda limits to 10 s); servers are opened in parallel.
const lambdaConnectTimeout = 4 * time.Second

// ToolSourceOptions configure OpenToolSources.
type ToolSourceOptions struct {
	// Local allows header values from environment variables (the local
	// server); Lambdas read header values from Secrets Manager only.
	Local bool
	// AWS builds the Secrets Manager client for secret_arn headers; it is
	// called only when the file names a secret.
	AWS func(ctx context.Context) (aws.Config, error)
	// ConnectTimeout bounds connecting to one server, at start-up and
	// when a run needs the tools of one that was absent (0: the mcptool
	// default).
	ConnectTimeout time.Duration
	Logger         *slog.Logger
	// Now is the clock that spaces the attempts to reach an absent server
	// (nil: the wall clock; tests only).
	Now func() time.Time
}

// OpenToolSources reads the tool-sources file at path and opens its MCP
// servers. An unreachable server does not fail it (its tools are absent);
// an invalid file or tools that cannot be exposed as configured do.
func OpenToolSources(ctx context.Context, path string, o ToolSourceOptions) (*mcptool.Catalog, error) {
	f, err := mcptool.ReadFile(path, mcptool.ParseOptions{AllowEnvHeaders: o.Local})
	if err != nil {
		return nil, err
	}
	opts := mcptool.Options{ConnectTimeout: o.ConnectTimeout, Logger: o.Logger, Version: "wave2", Now: o.Now}
	if o.Local {
		opts.Getenv = os.Getenv
	}
	if len(f.SecretARNs()) > 0 && o.AWS != nil {
		cfg, err := o.AWS(ctx)
		if err != nil {
			return nil, fmt.Errorf("tool sources %s: load AWS configuration for the header secrets: %w", path, err)
		}
		if opts.Secrets, err = awscall.NewSecrets(cfg); err != nil {
			return nil, fmt.Errorf("tool sources %s: %w", path, err)
		}
	}
	c, err := mcptool.Open(ctx, f, opts)
	if err != nil {
		return nil, fmt.Errorf("tool sources %s: %w", path, err)
	}
	return c, nil
}

// lambdaToolSources opens the deployment's tool sources for the startrun
// and resume functions, or returns nil when AGENTGATE_TOOL_SOURCES is unset.
func lambdaToolSources(ctx context.Context, awsCfg aws.Config, logger *slog.Logger) (ToolSources, error) {
	path := os.Getenv(EnvToolSources)
	if path == "" {
		return nil, nil
	}
	loaded := func(context.Context) (aws.Config, error) { return awsCfg, nil }
	return OpenToolSources(ctx, path, ToolSourceOptions{AWS: loaded, ConnectTimeout: lambdaConnectTimeout, Logger: logger})
}

package main

// The parts of `serve` that bring the outside in: --tools (MCP servers
// behind the approval gate) and --model with the providers the Lambdas use.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/provider"
	"github.com/agentgate/agentgate/internal/provider/scripted"
)

// serveModel builds the model of `serve --model`: the built-in demo script
// when spec is empty, otherwise any spec the Lambdas take (scripted:<file>,
// bedrock:<id>, openai:<model>, anthropic:<model>), built by the same
// constructor (provider.New) with the same environment (OPENAI_API_KEY,
// AGENTGATE_OPENAI_BASE_URL, ANTHROPIC_API_KEY, the *_SECRET variables, and
// the AWS configuration for Bedrock and Secrets Manager).
func serveModel(ctx context.Context, spec string, logger *slog.Logger) (loop.Model, error) {
	if spec == "" {
		return scripted.Parse(demoScript)
	}
	// The spec is the flag's, not AGENTGATE_MODEL's: the errors name the
	// flag, and the variable is not read.
	cfg, err := provider.LoadSettings(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	cfg.Model = strings.TrimSpace(spec)
	if err := cfg.Check(cfg.Model); err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	deps := provider.Deps{Config: cfg}
	if p, _ := provider.ParseSpec(spec); p.Provider == provider.ProviderBedrock || cfg.OpenAIAPIKeySecret != "" || cfg.AnthropicAPIKeySecret != "" {
		if deps.AWS, err = loadAWSConfig(ctx, logger); err != nil {
			return nil, fmt.Errorf("--model %s: load AWS configuration: %w", spec, err)
		}
	}
	m, err := provider.New(ctx, spec, deps)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	return m, nil
}

// serveToolOptions are the options of `serve --tools`: header values may
// come from environment variables here; secret_arn values are read with
// the default AWS configuration; now spaces the attempts to reach a
// server that was down (nil: the wall clock).
func serveToolOptions(logger *slog.Logger, now func() time.Time) app.ToolSourceOptions {
	return app.ToolSourceOptions{Local: true, Logger: logger, Now: now,
		AWS: func(ctx context.Context) (aws.Config, error) { return loadAWSConfig(ctx, logger) }}
}

// readServeTools reads and validates the tool-sources file of `serve
// --tools` (nil when the flag is not given), connecting to nothing, so a
// broken file is reported before the port is taken.
func readServeTools(path string, logger *slog.Logger, now func() time.Time) (*mcptool.File, error) {
	if path == "" {
		return nil, nil
	}
	return app.ReadToolSources(path, serveToolOptions(logger, now))
}

// openServeTools opens the MCP servers of the file readServeTools read at
// path (nil when there is none).
func openServeTools(ctx context.Context, path string, f *mcptool.File, logger *slog.Logger, now func() time.Time) (*mcptool.Catalog, error) {
	if f == nil {
		return nil, nil
	}
	return app.OpenReadToolSources(ctx, path, f, serveToolOptions(logger, now))
}

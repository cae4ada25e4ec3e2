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
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/service"
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
	f, err := ReadToolSources(path, o)
	if err != nil {
		return nil, err
	}
	return OpenReadToolSources(ctx, path, f, o)
}

// ReadToolSources reads and validates the tool-sources file at path,
// connecting to nothing: the first half of OpenToolSources, for a caller
// that reports a broken file before it does anything else.
func ReadToolSources(path string, o ToolSourceOptions) (*mcptool.File, error) {
	return mcptool.ReadFile(path, mcptool.ParseOptions{AllowEnvHeaders: o.Local})
}

// OpenReadToolSources opens the MCP servers of f, the tool-sources file
// ReadToolSources read at path with the same o: the second half of
// OpenToolSources.
func OpenReadToolSources(ctx context.Context, path string, f *mcptool.File, o ToolSourceOptions) (*mcptool.Catalog, error) {
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

// relistMargin is the least time an invocation must have left after its
// job for the listings of list_every_seconds: the longest
// connect_timeout_seconds, and slack to return.
const relistMargin = mcptool.MaxConnectTimeoutSeconds*time.Second + 5*time.Second

// relistAtJobEnd makes a worker function list again, once a run or resume
// job is over, the servers of tools that set list_every_seconds and have
// fallen due (mcptool.Catalog.Relist), so a tool a server added reaches
// the runs this container serves next, gated by the file, without a run
// bringing a listing about. The job's run never waits for it, API
// requests never make it (they answer a caller), and it ends within the
// invocation: a Lambda has no background goroutine that outlives one (the
// container is frozen between invocations), so a container that serves no
// job lists nothing. An invocation near its deadline leaves it to the
// next job.
func relistAtJobEnd(entry *lambdaentry.Entry, tools ToolSources, logger *slog.Logger) {
	c, ok := tools.(*mcptool.Catalog)
	if !ok || c == nil || entry.Worker == nil {
		return
	}
	worker := entry.Worker
	entry.Worker = func(ctx context.Context, job service.Job) error {
		err := worker(ctx, job)
		if job.Kind != service.JobRun && job.Kind != service.JobResume {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < relistMargin {
			logger.InfoContext(ctx, "mcp: listing left to a later job (the invocation is near its deadline)", "run_id", job.RunID)
			return err
		}
		c.Relist(ctx)
		return err
	}
}

package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/awsenv"
	"github.com/agentgate/agentgate/internal/awswire"
	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
)

// Function names a worker Lambda (the purge function is wired by
// awswire.Purge).
type Function string

// The worker functions.
const (
	StartRun Function = "startrun"
	Resume   Function = "resume"
)

// required lists the variables each function cannot start without; the
// ModelFactory checks the model's (provider.LoadConfig: AGENTGATE_MODEL).
var required = map[Function][]string{
	StartRun: {config.EnvTable, config.EnvBucket, config.EnvStartRunFunction},
	Resume:   {config.EnvTable, config.EnvBucket, config.EnvResumeFunction},
}

// ModelFactory builds the configured model once at start-up (provider.New).
type ModelFactory func(ctx context.Context, awsCfg aws.Config) (loop.Model, error)

// LambdaEntry reads the environment once, loads the AWS configuration from
// it once (awsenv: the function's credentials and region, no default
// chain), builds the adapters and returns the handler the function's main
// starts: the API routes of fn and its worker jobs.
func LambdaEntry(ctx context.Context, fn Function, newModel ModelFactory) (*lambdaentry.Entry, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(fn))
	slog.SetDefault(logger)
	if _, ok := required[fn]; !ok || newModel == nil {
		return nil, fmt.Errorf("app: %q is not a worker function with a model", fn)
	}
	cfg, err := config.Load(os.Getenv, required[fn]...)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsenv.Load(os.Getenv)
	if err != nil {
		return nil, err
	}
	model, err := newModel(ctx, awsCfg)
	if err != nil {
		return nil, err
	}
	tools, err := lambdaToolSources(ctx, awsCfg, logger)
	if err != nil {
		return nil, err
	}
	served := routes.All().ServedBy(routes.Function(fn))
	var hooks *Webhooks
	if sc, err := awswire.Webhooks(os.Getenv, awsCfg); err != nil {
		return nil, err
	} else if sc != nil {
		hooks = &Webhooks{Signer: sc.Signer, Policy: sc.Policy}
	}
	a, err := NewAWS(AWSOptions{Config: cfg, AWS: awsCfg, Model: model, Routes: served, ToolSources: tools,
		Owner: string(fn) + "/" + os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"), Logger: logger, Webhooks: hooks})
	if err != nil {
		return nil, err
	}
	return &lambdaentry.Entry{API: a.API.Handle, Worker: a.Worker.Handle}, nil
}

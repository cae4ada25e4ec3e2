package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/agentgate/agentgate/internal/config"
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/webhook"
)

// Function names the three Lambdas.
type Function string

// The functions.
const (
	StartRun Function = "startrun"
	Resume   Function = "resume"
	Purge    Function = "purge"
)

// required lists the variables each function cannot start without; the
// ModelFactory checks the model's (provider.LoadConfig: AGENTGATE_MODEL).
var required = map[Function][]string{
	StartRun: {config.EnvTable, config.EnvBucket, config.EnvStartRunFunction},
	Resume:   {config.EnvTable, config.EnvBucket, config.EnvResumeFunction},
	Purge:    {config.EnvTable, config.EnvBucket, config.EnvStartRunFunction, config.EnvResumeFunction},
}

// ModelFactory builds the configured model once at start-up. The startrun
// and resume mains pass one (provider.New); purge runs no model, so its
// binary links no provider SDK.
type ModelFactory func(ctx context.Context, awsCfg aws.Config) (loop.Model, error)

// LambdaEntry reads the environment once, loads the AWS configuration once,
// builds the adapters and returns the handler the function's main starts.
func LambdaEntry(ctx context.Context, fn Function, newModel ModelFactory) (*lambdaentry.Entry, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(fn))
	slog.SetDefault(logger)
	cfg, err := config.Load(os.Getenv, required[fn]...)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	var model loop.Model = loop.ModelFunc(func(context.Context, loop.ModelRequest) (loop.ModelResponse, error) {
		return loop.ModelResponse{}, fmt.Errorf("the purge function runs no model")
	})
	if newModel != nil {
		if model, err = newModel(ctx, awsCfg); err != nil {
			return nil, err
		}
	}
	tools, err := lambdaToolSources(ctx, fn, awsCfg, logger)
	if err != nil {
		return nil, err
	}
	served := routes.All().ServedBy(routes.Function(fn)) // none for purge
	hooks, err := lambdaWebhooks(awsCfg)
	if err != nil {
		return nil, err
	}
	a, err := NewAWS(AWSOptions{Config: cfg, AWS: awsCfg, Model: model, Routes: served, ToolSources: tools,
		Owner: string(fn) + "/" + os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"), Logger: logger, Webhooks: hooks})
	if err != nil {
		return nil, err
	}
	switch fn {
	case Purge:
		return &lambdaentry.Entry{Sweep: a.Sweeper.Sweep}, nil
	default:
		return &lambdaentry.Entry{API: a.API.Handle, Worker: a.Worker.Handle}, nil
	}
}

// lambdaWebhooks reads the webhook configuration (AGENTGATE_WEBHOOK_SECRET,
// AGENTGATE_WEBHOOK_ALLOW): nil when webhooks are off. The secret is read
// from Secrets Manager only when a delivery is signed (the purge function),
// and re-read after webhook.SecretRefresh.
func lambdaWebhooks(awsCfg aws.Config) (*Webhooks, error) {
	wc, err := webhook.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !wc.Enabled() {
		return nil, nil
	}
	return &Webhooks{Signer: webhook.NewSecretsManagerSource(secretsmanager.NewFromConfig(awsCfg), wc.SecretID, nil), Policy: wc.Policy}, nil
}

// Command resume is the agentgate resume Lambda function. It only wires: the
// environment, one AWS configuration, the model and the adapters are read
// and built once, outside the handler.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider"
)

func main() {
	entry, err := app.LambdaEntry(context.Background(), app.Resume, newModel)
	if err != nil {
		slog.Error("start-up failed", "function", "resume", "err", err)
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

// newModel builds the model AGENTGATE_MODEL names (bedrock, openai, anthropic, scripted).
func newModel(ctx context.Context, awsCfg aws.Config) (loop.Model, error) {
	cfg, err := provider.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	return provider.New(ctx, cfg.Model, provider.Deps{Config: cfg, AWS: awsCfg})
}

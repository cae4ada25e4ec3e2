// Command resume is the agentgate resume Lambda function. It only wires: the
// environment, one AWS configuration, the model (provider.FromEnv) and the
// adapters are read and built once, outside the handler.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/provider"
)

func main() {
	entry, err := app.LambdaEntry(context.Background(), app.Resume, provider.FromEnv)
	if err != nil {
		slog.Error("start-up failed", "function", "resume", "err", err)
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

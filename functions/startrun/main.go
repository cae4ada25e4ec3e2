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
	entry, err := app.LambdaEntry(context.Background(), app.StartRun, provider.FromEnv)
	if err != nil {
		slog.Error("start-up failed", "err", err) // the default logger names the function
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentgate/agentgate/internal/awswire"
)

func main() {
	entry, err := awswire.Purge(context.Background(), os.Getenv)
	if err != nil {
		slog.Error("start-up failed", "err", err) // the default logger names the function
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

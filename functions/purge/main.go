// Command purge is the agentgate purge Lambda function: the scheduled sweep.
// It only wires: the environment, one AWS configuration and the sweep's
// adapters are read and built once, outside the handler, in awswire.Purge,
// which links no model, tools, HTTP API or approval pages.
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
		slog.Error("start-up failed", "function", "purge", "err", err)
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

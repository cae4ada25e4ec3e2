// Command purge is the agentgate purge Lambda function. It only wires: the
// environment, one AWS configuration and the adapters are read and built
// once, outside the handler, in app.LambdaEntry.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentgate/agentgate/internal/app"
)

func main() {
	entry, err := app.LambdaEntry(context.Background(), app.Purge, nil)
	if err != nil {
		slog.Error("start-up failed", "function", "purge", "err", err)
		os.Exit(1)
	}
	lambda.Start(entry.Handle)
}

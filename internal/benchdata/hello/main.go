package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

// handle answers every event with a constant string.
func handle(ctx context.Context, in json.RawMessage) (string, error) {
	return "hello", nil
}

func main() {
	lambda.Start(handle)
}

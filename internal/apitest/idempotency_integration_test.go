//go:build integration

package apitest_test

import "testing"

// The idempotent start through the API on DynamoDB+S3 (AWS_ENDPOINT_URL:
// moto or LocalStack): the key item written in the run's transaction, read
// back for a replay, refused for another body.
func TestIdempotentStartOnAWS(t *testing.T) { runIdempotentStart(t, onAWS(t)) }
func TestConcurrentIdempotentStartsOnAWS(t *testing.T) {
	runConcurrentIdempotentStarts(t, onAWS(t))
}

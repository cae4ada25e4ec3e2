//go:build integration

package apitest_test

import "testing"

// The conditional GET on DynamoDB+S3 (AWS_ENDPOINT_URL: moto or
// LocalStack): the run read back from the table is sent as the same bytes
// while it is unchanged, so its tag holds and If-None-Match gets 304.
func TestConditionalGetOnAWS(t *testing.T) { runConditionalGet(t, onAWS(t)) }

//go:build integration

package apitest_test

import "testing"

// The client-tool tests on DynamoDB+S3 (AWS_ENDPOINT_URL: moto or
// LocalStack): the hand-over and the results travel on the DynamoDB run row
// and S3 blobs, the deadline through the due index. On moto the DynamoDB
// requests are put on the wire one at a time (awstest: moto's
// TransactWriteItems is not atomic under concurrent requests), so the 20
// concurrent submissions still race read, check and conditional write
// against each other, but each request reaches the emulator alone.
func TestClientToolsStoryOnAWS(t *testing.T)  { runClientToolsStory(t, onAWS(t)) }
func TestClientToolsExpireOnAWS(t *testing.T) { runClientToolsExpire(t, onAWS(t)) }

// The large client calls on DynamoDB+S3: the row keeps the summary, the
// state blob in S3 the whole inputs.
//
//agentgate:megabytes
func TestClientCallOf1MiBOnAWS(t *testing.T) { runLargeClientCall(t, 1<<20, onAWS(t)) }

// Group tool executors on DynamoDB+S3: the run row keeps the group entry,
// and membership is read from the directory at submission, also by a
// server started after the run with another directory.
func TestClientToolsGroupExecutorsOnAWS(t *testing.T) { runClientToolsGroupExecutors(t, onAWS(t)) }
func TestClientToolsGroupExecutorsMembershipAtSubmissionOnAWS(t *testing.T) {
	runClientToolsGroupExecutorsMembershipAtSubmission(t, onAWS(t))
}

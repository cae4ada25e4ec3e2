//go:build integration

package service_test

import "testing"

// The quick decision between the approval mail and its record, on
// DynamoDB+S3 (the emulator at AWS_ENDPOINT_URL): the late notified event
// is the event-only write (runs/dynamo PutEvent).
func TestANotificationAfterAQuickDecisionIsOnRecordDynamoDB(t *testing.T) {
	testNotificationAfterAQuickDecision(t, awsStore)
}

// The first approval mail its worker never sent, sent by the sweep, on
// DynamoDB+S3: its notified event takes the number the suspension kept,
// with the fresh tokens, in one transaction conditional on the row.
func TestAFirstMailItsWorkerNeverSentIsSentByTheSweepDynamoDB(t *testing.T) {
	testFirstMailRecovered(t, awsStore)
}

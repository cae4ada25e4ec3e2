//go:build integration

package service_test

import "testing"

// The quick decision between the approval mail and its record, on
// DynamoDB+S3 (the emulator at AWS_ENDPOINT_URL): the late notified event
// is the event-only write (runs/dynamo PutEvent).
func TestANotificationAfterAQuickDecisionIsOnRecordDynamoDB(t *testing.T) {
	testNotificationAfterAQuickDecision(t, awsStore)
}

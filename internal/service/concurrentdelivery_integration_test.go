//go:build integration

package service_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// TestOtherRunsDeliveredWhileOneReceiverHangsDynamoDB is
// TestOtherRunsDeliveredWhileOneReceiverHangs on DynamoDB+S3 (the emulator
// at AWS_ENDPOINT_URL): the sweep's goroutines record their runs' attempts
// at the same time. On moto the DynamoDB requests go on the wire one at a
// time (awstest: moto's writes are not atomic under concurrent requests);
// the goroutines still interleave freely between requests, and the
// receiver that hangs holds no request.
func TestOtherRunsDeliveredWhileOneReceiverHangsDynamoDB(t *testing.T) {
	env := awstest.New(t)
	runOtherRunsDeliveredWhileOneHangs(t, env.Table, env.Bucket)
}

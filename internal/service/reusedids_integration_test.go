//go:build integration

package service_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// TestAReusedCallIDGetsItsFenceCheckpointDynamoDB is
// TestAReusedCallIDGetsItsFenceCheckpoint on DynamoDB and S3.
func TestAReusedCallIDGetsItsFenceCheckpointDynamoDB(t *testing.T) {
	for _, second := range []string{"c2", "c1"} {
		t.Run("second turn's id "+second, func(t *testing.T) {
			env := awstest.New(t)
			runReusedID(t, env.Table, env.Bucket, second)
		})
	}
}

//go:build integration

package service_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// The crash-point test and the long-run test on DynamoDB+S3 (the emulator
// at AWS_ENDPOINT_URL). One table and bucket serve every crash point; each
// point purges its run when it ends (moto's TransactWriteItems copies the
// whole table, so a table that kept every point's runs would slow the later
// points down). On moto the DynamoDB requests go on the wire one at a time
// (awstest); the test drives one worker at a time anyway.
//
// Emulator memory: moto 5.2 keeps every model object it ever created
// (BaseModel.instances_tracked, emptied only by /moto-api/reset), including
// the copy of the whole table each TransactWriteItems makes, so a
// transaction leaks as many items as the table holds. Purging each point's
// run keeps that to one run's items: the whole test leaves moto about
// 550 MB larger (76 points, measured 2026-12-03), freed when moto restarts.

func awsStore(t *testing.T) (runs.RowStore, runs.StateStore) {
	env := awstest.New(t)
	return env.Table, env.Bucket
}

func TestCrashPointsDynamoDB(t *testing.T) {
	env := awstest.New(t)
	clock := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	n := runCrashPoints(t, func(*testing.T) (runs.RowStore, runs.StateStore) { return env.Table, env.Bucket }, clock)
	require.Greater(t, n, minCrashPoints)
}

func TestLongRunCrossesSegmentsDynamoDB(t *testing.T) {
	testLongRunCrossesSegments(t, awsStore)
}

func TestPoisonStepEndsWorkerLostDynamoDB(t *testing.T) {
	env := awstest.New(t)
	runPoisonStep(t, env.Table, env.Bucket, clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)))
}

//agentgate:megabytes
func TestOversizedCheckpointEndsStateTooLargeDynamoDB(t *testing.T) {
	testOversizedCheckpoint(t, awsStore)
}

func TestReadOutlivingSegmentsDynamoDB(t *testing.T) {
	testReadOutlivingSegments(t, awsStore)
}

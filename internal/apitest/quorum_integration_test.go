//go:build integration

package apitest_test

import "testing"

// TestQuorumUnderConcurrencyOnDynamoDB is TestQuorumUnderConcurrency on
// DynamoDB + S3 (the emulator at AWS_ENDPOINT_URL). On moto the DynamoDB
// requests are put on the wire one at a time (awstest serializes them,
// moto's TransactWriteItems is not atomic under concurrent requests); the
// 50 votes still race freely between requests: read, conditional write,
// re-read, retry.
func TestQuorumUnderConcurrencyOnDynamoDB(t *testing.T) {
	runQuorumRace(t, onAWS(t))
}

// TestQuorumPerCallVotesOnDynamoDB is TestQuorumPerCallVotes on DynamoDB + S3.
func TestQuorumPerCallVotesOnDynamoDB(t *testing.T) {
	runQuorumPerCallVotes(t, onAWS(t))
}

// TestQuorumCallsDecidedApartOnDynamoDB is TestQuorumCallsDecidedApart on
// DynamoDB + S3.
func TestQuorumCallsDecidedApartOnDynamoDB(t *testing.T) {
	runQuorumCallsDecidedApart(t, onAWS(t))
}

// TestQuorumLostWhileWaitingOnDynamoDB is TestQuorumLostWhileWaitingEndToEnd
// on DynamoDB + S3: the sweep's end of a run whose approval can no longer
// be given is a conditional write on the row its check read, which a vote
// landing first refuses.
func TestQuorumLostWhileWaitingOnDynamoDB(t *testing.T) {
	runQuorumLostWhileWaiting(t, onAWS(t))
}

// TestSplitDecisionOnDynamoDB is TestSplitDecision on DynamoDB + S3.
func TestSplitDecisionOnDynamoDB(t *testing.T) {
	runSplitDecision(t, onAWS(t))
}

// TestSwitchToVotesWhileWaitingOnDynamoDB is TestSwitchToVotesWhileWaiting
// on DynamoDB + S3: the quorum check's switch to per-call votes, with the
// new deciders' inbox entries and tokens, is one transaction.
func TestSwitchToVotesWhileWaitingOnDynamoDB(t *testing.T) {
	runSwitchToVotesWhileWaiting(t, onAWS(t))
}

// TestAFirstMailItsWorkerNeverSentIsSentByTheSweepOnDynamoDB is
// TestAFirstMailItsWorkerNeverSentIsSentByTheSweep on DynamoDB + S3.
func TestAFirstMailItsWorkerNeverSentIsSentByTheSweepOnDynamoDB(t *testing.T) {
	runFirstMailRecovered(t, onAWS(t))
}

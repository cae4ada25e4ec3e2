//go:build integration

package apitest_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs/runstest/awstest"
)

// The webhook tests on DynamoDB+S3 (AWS_ENDPOINT_URL: moto or LocalStack):
// the outbox travels on the DynamoDB run row, the due index is the GSI.
func onAWS(t *testing.T) func(*apitest.Options) {
	env := awstest.New(t)
	return func(o *apitest.Options) { o.Rows, o.States = env.Table, env.Bucket }
}

func TestWebhookRetriesWithTheSameIDOnAWS(t *testing.T) { runWebhookRetriesWithTheSameID(t, onAWS(t)) }
func TestWebhookRefusedTargetsOnAWS(t *testing.T)       { runWebhookRefusedTargets(t, onAWS(t)) }
func TestWebhookRedirectNotFollowedOnAWS(t *testing.T)  { runWebhookRedirectNotFollowed(t, onAWS(t)) }

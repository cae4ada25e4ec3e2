//go:build integration

package apitest_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/docstore"
)

// The large-write stories on DynamoDB+S3 (AWS_ENDPOINT_URL: moto or
// LocalStack): the bounded summary on the DynamoDB row, the whole inputs
// and previews in the S3 state blob.
func TestWrite60KBOnAWS(t *testing.T) { runLargeWrite(t, 60<<10, onAWS(t)) }

//agentgate:megabytes
func TestWriteOfTheLargestDocumentOnAWS(t *testing.T) {
	runLargeWrite(t, docstore.MaxDocumentBytes, onAWS(t))
}

//agentgate:megabytes
func TestStateOverTheLimitOnAWS(t *testing.T) { runStateTooLarge(t, onAWS(t)) }

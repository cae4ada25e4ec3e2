package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentgate/agentgate/internal/runs"
)

// NewInboxItemForTest exposes the stored form of an inbox entry to the
// seeding of the cost tests.
func NewInboxItemForTest(e runs.InboxEntry) any { return newInboxItem(e) }

// LegacyRowForTest returns r as run rows were written before the compact
// row (one attribute per field), for the tests that read and upgrade them.
func LegacyRowForTest(r *runs.Run) (map[string]types.AttributeValue, error) {
	it, err := newRunItem(r, DefaultDueShards)
	if err != nil {
		return nil, err
	}
	return attributevalue.MarshalMap(it)
}

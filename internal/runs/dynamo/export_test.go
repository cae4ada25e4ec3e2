package dynamo

import "github.com/agentgate/agentgate/internal/runs"

// NewInboxItemForTest exposes the stored form of an inbox entry to the
// seeding of the cost tests.
func NewInboxItemForTest(e runs.InboxEntry) any { return newInboxItem(e) }

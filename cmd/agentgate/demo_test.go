package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoSaysTheLinkWasMailedAndTheTrailRecordsIt runs the demo twice on
// one folder. Each time the approval mail to ops@example.com is reported
// from its notified event and the audit trail printed at the end lists
// it. (The demo used to look at the mail as soon as the run waited, before
// the worker had sent it, and bob's quick approval could keep the notified
// event off the trail.) The second run sets the page the first one wrote
// back to its demo text, so that its story holds.
func TestDemoSaysTheLinkWasMailedAndTheTrailRecordsIt(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		var out bytes.Buffer
		require.NoError(t, runDemo(context.Background(), []string{"-dir", dir}, &out), "demo %d", i+1)
		assert.Contains(t, out.String(), "ops@example.com was mailed an approval link", "demo %d:\n%s", i+1, out.String())
		trail := out.String()[strings.Index(out.String(), "the audit trail"):]
		assert.Equal(t, 1, strings.Count(trail, " notified "), "demo %d: the trail lists the mail once:\n%s", i+1, trail)
		assert.Contains(t, out.String(), "demo complete")
		// The second run's story starts from the demo text again, not
		// from the page the first one wrote.
		assert.Contains(t, out.String(), `nothing was written yet: pricing.md still says "- Team: 10 EUR per user and month"`, "demo %d", i+1)
		assert.Contains(t, out.String(), `pricing.md now says "- Team: 12 EUR per user and month"`, "demo %d", i+1)
		assert.Equal(t, i == 1, strings.Contains(out.String(), "pricing.md was set back to its demo text"), "demo %d", i+1)
	}
}

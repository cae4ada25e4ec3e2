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
// event off the trail.)
func TestDemoSaysTheLinkWasMailedAndTheTrailRecordsIt(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		var out bytes.Buffer
		require.NoError(t, runDemo(context.Background(), []string{"-dir", dir}, &out), "demo %d", i+1)
		assert.Contains(t, out.String(), "ops@example.com was mailed an approval link", "demo %d:\n%s", i+1, out.String())
		trail := out.String()[strings.Index(out.String(), "the audit trail"):]
		assert.Equal(t, 1, strings.Count(trail, " notified "), "demo %d: the trail lists the mail once:\n%s", i+1, trail)
		assert.Contains(t, out.String(), "demo complete")
	}
}

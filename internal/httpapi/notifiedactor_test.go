package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNotifiedEventNamesItsActor: the notified event of a suspension's
// first approval mail names who sent it, the worker that suspended the
// run, as every other event names its actor.
func TestNotifiedEventNamesItsActor(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	status, out := f.call(req("GET", "/runs/"+r.ID+"/events", alice, ""))
	require.Equal(t, 200, status)
	actors := map[string]string{}
	for _, e := range out["events"].([]any) {
		ev := e.(map[string]any)
		actor, _ := ev["actor"].(string)
		actors[ev["type"].(string)] = actor
	}
	require.Contains(t, actors, "notified")
	assert.NotEmpty(t, actors["suspended"])
	assert.Equal(t, actors["suspended"], actors["notified"], "the worker that suspended the run mailed the approvers")
}

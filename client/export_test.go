package client

import (
	"context"
	"time"
)

// RecordStartPauses has c's StartRun record each pause between its
// attempts in *pauses instead of waiting it out (a test never waits on the
// clock); a pause ends early only when ctx does.
func RecordStartPauses(c *Client, pauses *[]time.Duration) {
	c.pause = func(ctx context.Context, d time.Duration) error {
		*pauses = append(*pauses, d)
		return ctx.Err()
	}
}

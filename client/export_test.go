package client

import (
	"context"
	"time"
)

// RecordPauses has c's StartRun and Wait record each pause between their
// requests in *pauses instead of waiting it out (a test never waits on the
// clock); a pause ends early only when ctx does.
func RecordPauses(c *Client, pauses *[]time.Duration) {
	c.pause = func(ctx context.Context, d time.Duration) error {
		*pauses = append(*pauses, d)
		return ctx.Err()
	}
}

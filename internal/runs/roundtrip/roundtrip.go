package roundtrip

import (
	"context"
	"errors"
	"maps"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Counter counts round trips (every attempt, retries included) per
// "Service.Operation", and items read by DynamoDB queries. Add it to a client
// with Counter.Register in the client's APIOptions. Safe for concurrent use.
type Counter struct {
	mu        sync.Mutex
	trips     map[string]int
	itemsRead int64
	lost      int
}

// New returns an empty Counter.
func New() *Counter { return &Counter{trips: map[string]int{}} }

// Register adds the counting middlewares to an SDK stack; pass it in
// APIOptions (aws.Config.APIOptions or a client's Options.APIOptions).
func (c *Counter) Register(stack *middleware.Stack) error {
	// Finalize runs once per attempt after the retry middleware: one call
	// there is one request on the wire.
	if err := stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("roundtrip.attempt",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.trips[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			out, md, err := next.HandleFinalize(ctx, in)
			if answerLost(err) {
				c.mu.Lock()
				c.lost++
				c.mu.Unlock()
			}
			return out, md, err
		}), middleware.After); err != nil {
		return err
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("roundtrip.items",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			var n int32
			switch o := out.Result.(type) {
			case *dynamodb.QueryOutput:
				n = o.ScannedCount
			case *dynamodb.ScanOutput:
				n = o.ScannedCount
			}
			if n > 0 {
				c.mu.Lock()
				c.itemsRead += int64(n)
				c.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
}

// Total returns the number of round trips counted.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.trips {
		n += v
	}
	return n
}

// ByOperation returns a copy of the counts per "Service.Operation".
func (c *Counter) ByOperation() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.trips)
}

// ItemsRead returns the items DynamoDB Query and Scan calls read
// (ScannedCount), which is what they are billed for.
func (c *Counter) ItemsRead() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.itemsRead
}

// Lost returns how many attempts sent their request and got no whole answer
// back: the connection failed after the request was sent, or the answer
// could not be read. The request may have taken effect; the SDK retries such
// an attempt, and the caller may then recover (a conditional write that
// finds its own write in place), so the counts hold round trips the code
// did not plan.
func (c *Counter) Lost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// answerLost reports whether an attempt's error says its answer did not
// arrive whole: the HTTP client's error (the SDK's RequestSendError) or an
// answer that could not be read or decoded (a DeserializationError, which is
// what an answer cut off mid-body gives).
func answerLost(err error) bool {
	if err == nil {
		return false
	}
	var send *smithyhttp.RequestSendError
	var decode *smithy.DeserializationError
	return errors.As(err, &send) || errors.As(err, &decode)
}

// Reset zeroes every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.trips)
	c.itemsRead = 0
	c.lost = 0
}

// Measure resets c, runs fn and returns the round trips per operation it made.
func (c *Counter) Measure(fn func()) map[string]int {
	c.Reset()
	fn()
	return c.ByOperation()
}

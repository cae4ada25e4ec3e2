package client_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// expiring is a context whose deadline passes when expire is called: a test
// ends a call's time at a chosen point (once an answer has been read) rather
// than racing a timer against the machine's speed, which failed on a loaded
// CI machine (a 30 ms deadline passed before the first answer came).
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

// expireAfter returns an HTTP client that expires ctx when the caller has
// read and closed n answers.
func expireAfter(ctx *expiring, n int) *http.Client {
	var closed atomic.Int64
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			resp.Body = &onClose{ReadCloser: resp.Body, fn: func() {
				if closed.Add(1) == int64(n) {
					ctx.expire()
				}
			}}
		}
		return resp, err
	})}
}

type onClose struct {
	io.ReadCloser
	once sync.Once
	fn   func()
}

func (o *onClose) Close() error {
	err := o.ReadCloser.Close()
	o.once.Do(o.fn)
	return err
}

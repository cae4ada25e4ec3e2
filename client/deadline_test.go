package client_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/agentgate/agentgate/internal/clocktest"
)

// expireAfter returns an HTTP client that makes ctx's deadline pass when the
// caller has read and closed n answers: a test ends a call's time there
// rather than racing a timer against the machine's speed, which failed on a
// loaded CI machine (a 30 ms deadline passed before the first answer came).
func expireAfter(ctx *clocktest.Deadline, n int) *http.Client {
	var closed atomic.Int64
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			resp.Body = &onClose{ReadCloser: resp.Body, fn: func() {
				if closed.Add(1) == int64(n) {
					ctx.Pass()
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

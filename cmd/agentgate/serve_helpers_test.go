package main

// A `serve` started in the background by the tests that restart it
// (serve_freeze_test.go, serve_quorumcheck_test.go).

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// startServe runs `serve` with args (which name the address, 127.0.0.1:0)
// until stop, and returns the URL it serves on once its banner says so,
// within linkWait. stop, also called at the test's cleanup and harmless
// twice, requires serve to end without error and, when the test failed,
// logs what serve printed.
func startServe(t *testing.T, args []string) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	served := make(chan error, 1)
	go func() { served <- runServe(ctx, args, out) }()
	banner := regexp.MustCompile(`agentgate serving on (\S+) `)
	deadline := time.Now().Add(linkWait)
	for banner.FindStringSubmatch(out.String()) == nil {
		select {
		case err := <-served:
			cancel()
			t.Fatalf("serve %v ended: %v\n%s", args, err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve %v did not start within %s\n%s", args, linkWait, out.String())
		}
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		assert.NoError(t, <-served)
		if t.Failed() {
			t.Logf("serve %v said:\n%s", args, out.String())
		}
	}
	t.Cleanup(stop)
	return banner.FindStringSubmatch(out.String())[1], stop
}

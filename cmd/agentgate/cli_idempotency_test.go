package main

import (
	"strings"
	"testing"
)

// TestCLIStartIdempotencyKey: `runs start --idempotency-key K` run again
// with the same request (a script retried after a timeout) prints the run
// the first created and starts no other; another request under K fails
// with the API's message naming that run.
func TestCLIStartIdempotencyKey(t *testing.T) {
	e := startCLIEnv(t)
	args := []string{"runs", "start", "--prompt", "update the Team price", "--approver", "bob", "--idempotency-key", "deploy-2024-06-01"}
	first := e.runJSON("alice", args...)
	again := e.runJSON("alice", args...)
	if again.ID != first.ID {
		t.Fatalf("the same start under the key: run %s, then run %s; want one run", first.ID, again.ID)
	}
	other := e.runJSON("alice", "runs", "start", "--prompt", "update the Team price", "--approver", "bob")
	if other.ID == first.ID {
		t.Fatalf("a start without the key got run %s", other.ID)
	}
	code, _, errOut := e.cli("alice", "runs", "start", "--prompt", "something else", "--approver", "bob", "--idempotency-key", "deploy-2024-06-01")
	if code != 1 || !strings.Contains(errOut, first.ID) || !strings.Contains(errOut, "different request") {
		t.Fatalf("another request under the key: exit %d, stderr %q; want 1 naming run %s", code, errOut, first.ID)
	}
}

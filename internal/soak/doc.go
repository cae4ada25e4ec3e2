// Package soak is the crash soak of agentgate: it runs the real `agentgate
// serve` binary, drives many concurrent clients through the REST API with the
// public client package, kills the server with SIGKILL at random moments
// (right after a 202 on POST /runs or on a decision, while an approved write
// is in flight, just after it returned, during start-up, or at any instant)
// and restarts it on the same folder, then checks what must hold afterwards:
//
//   - no run is left non-terminal except those legitimately waiting for a
//     human (or for a client's tool results);
//   - every approved write executed at most once, and only approved calls
//     executed, with the arguments the approver approved (an edit included);
//   - an approved write of a completed run executed exactly once;
//   - no run the API accepted (202) was lost;
//   - every run that ended FAILED/interrupted_write is justified by a kill
//     that landed while its segment ran;
//   - no 5xx answer (connection errors while the server is down are
//     expected and counted apart).
//
// Writes are made observable by a recording MCP server inside the soak
// process (it outlives every kill): the model's held calls go to its
// non-idempotent tool "append", and every execution is recorded with the
// call's idempotency key (runID/suspensionID/callID). A second execution of
// one call is a double write, whatever the server recorded about it.
//
// The package is test tooling, not part of the product: tools/soak is its
// command and scripts/soak.sh (make soak) builds and runs it.
package soak

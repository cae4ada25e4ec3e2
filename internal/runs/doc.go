// Package runs is the AgentRun domain: the Run row with its status machine,
// the append-only Event stream that is the audit record, approval tokens,
// the one error type callers branch on, and Store, which applies every
// transition as a conditional write on (status, version).
//
// Store is built from two small adapter contracts, RowStore (rows, events,
// tokens, the due index) and StateStore (suspended-state blobs), implemented
// by the subpackages dynamo and s3state on AWS and by embedded on a single
// bbolt file. The package imports no AWS SDK. It speaks the tool loop's
// vocabulary (loop.SuspendedState, loop.Decision, loop.Step, loop.Counters,
// loop.TerminationReason) and adds only what the row needs by its role: a
// CallSummary of each pending call, so the API can show a held turn and
// check a decision without loading the state blob.
//
// Store's methods are split by phase: create.go (a new run), reads.go
// (rows, events, tokens, the due index, state blobs, held calls), lease.go
// (claim, redispatch, steps and the write fence), approval.go and
// renotify.go (suspend, decide, votes, notices), toolresults.go (client-tool
// hand-overs and their results), terminal.go (settle, cancel, expire,
// purge); inbox.go and outbox.go hold the approvers' inbox and the webhook
// deliveries; authorize.go and executors.go decide, failing closed, who may
// decide and who may submit tool results; commit.go holds the
// optimistic-concurrency core every transition goes through (write, explain
// a lost condition, retry on a version-only move).
//
// Every adapter pair passes the conformance suite in runstest.
package runs

// Package runs is the AgentRun domain: the Run row with its status machine,
// the append-only Event stream that is the audit record, approval tokens,
// the one error type callers branch on, and Store, which applies every
// transition as a conditional write on (status, version).
//
// Store is built from two small adapter contracts, RowStore (rows, events,
// tokens, the due index) and StateStore (suspended-state blobs), implemented
// by the subpackages dynamo and s3state on AWS and by embedded on a single
// bbolt file. The package imports no AWS SDK and nothing from the tool loop:
// the suspended state is an opaque JSON blob and a decision an opaque JSON
// document; only the small PendingCall summary the API needs lives on the row.
//
// Every adapter pair passes the conformance suite in runstest.
package runs

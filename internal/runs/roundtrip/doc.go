// Package roundtrip counts AWS round trips per operation with an SDK
// middleware, and the items DynamoDB reads for Query and Scan, so tests can
// assert what an operation costs (suspend = 2 round trips, decide = 1) and
// benchmarks can report it.
package roundtrip

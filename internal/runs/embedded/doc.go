// Package embedded implements runs.RowStore and runs.StateStore on one bbolt
// file: the local default of agentgate, with no AWS and no emulator. Rows,
// events, approval tokens, the due index and the state blobs live in one
// database, and every runs.Write is one bbolt transaction. The same file
// keeps the local document store's idempotency markers (docstore's
// MarkerStore), written through the same group commit.
package embedded

// Package dynamo implements runs.RowStore on one DynamoDB table (see
// CONTRACTS.md): run rows at pk=RUN#<id>, sk=RUN; events under the run's
// pk, one item per write at sk=EVT#<its last seq> (the first item of a
// write that issues approval tokens lists their hashes, so purge finds
// them through the run);
// approval tokens at pk=TOKEN#<sha256>, sk=TOKEN; approvers' inbox entries
// at pk=INBOX#<approver key>; and the sparse, sharded GSI due-index (due_pk=DUE#<shard>, due_at=unix ms) that
// only run rows carry (keys only), so a sweep reads the due runs and never scans.
//
// A runs.Write is one PutItem when it touches only the row, otherwise one
// TransactWriteItems. ConditionalCheckFailed and TransactionCanceled are
// translated into runs.EConflict here, so callers never import the SDK.
package dynamo

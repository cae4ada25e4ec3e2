// Package docstore is a small document store — the content of a site or a
// knowledge base — and the five builtin loop tools over it: list_documents,
// read_document and search_documents (reads), write_document and
// delete_document (writes, which need approval and preview as a unified diff).
//
// Documents are UTF-8 text addressed by relative, slash-separated paths (see
// ValidatePath) and are at most MaxDocumentBytes long. They live in a Backend:
// S3Backend keeps them in the service bucket under "content/", DirBackend in a
// local folder for embedded mode.
//
// The write tools are idempotent under the loop's idempotency key: the store
// records every applied key in a marker (under the reserved ".applied/"
// folder, which no document path may use, or, for a DirBackend given a
// MarkerStore, in that store: the embedded database on the local server),
// and a repeated call with the same key changes nothing and returns the
// result text of the first call.
//
// Tool failures are tool results. Whatever the model can react to — a
// malformed or too long path, a missing, oversized or binary document, a
// symbolic link out of the folder or in a loop, a special file, a denied
// permission — is an error result in plain words (never a system error's
// text, in results and in approvers' previews alike); a write or delete
// that fails that way has changed nothing. A Go error means the backend
// failed or the context was cancelled; for a write tool it is marked
// loop.ErrNoEffect when the write surely did not begin (the store refused
// it, or failed before it), so the run does not end as an interrupted write.
package docstore

// Package s3state implements runs.StateStore on an S3 bucket: suspended
// states as gzip'd JSON under runs/<id>/state/<sha256>.json.gz (content
// addressed), server-side encryption requested on every put (SSE-KMS with a
// key id when one is configured, else SSE-S3), SHA-256 verified on load, and
// a run's prefix deleted with DeleteObjects in batches of 1000.
package s3state

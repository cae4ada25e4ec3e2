package docstore

import (
	"context"
	"errors"
)

// Limits on paths and documents.
const (
	// MaxPathBytes is the longest document path, in bytes.
	MaxPathBytes = 512
	// MaxDocumentBytes is the largest document, in bytes.
	MaxDocumentBytes = 1 << 20
)

// appliedDir is the reserved top-level folder that holds idempotency
// markers (and, in DirBackend, temporary files). No document path may start
// with it, and listings never show it.
const appliedDir = ".applied"

// Errors returned by Backend methods. Tools turn them into error results;
// any other error is an infrastructure failure.
var (
	// ErrNotFound means there is no document at the path.
	ErrNotFound = errors.New("document not found")
	// ErrTooLarge means the stored document is larger than MaxDocumentBytes.
	ErrTooLarge = errors.New("document too large")
	// ErrPathConflict means the path cannot hold a document because of
	// another entry (in a folder, a document where a folder is needed or the
	// other way round).
	ErrPathConflict = errors.New("path conflicts with an existing document or folder")
	// ErrInvalidPath wraps the reason a path was rejected by ValidatePath.
	ErrInvalidPath = errors.New("invalid path")
)

// DocumentInfo describes one stored document.
type DocumentInfo struct {
	// Path is the document's path, as accepted by ValidatePath.
	Path string
	// Size is the document's length in bytes.
	Size int64
}

// Backend stores documents and idempotency markers. Paths passed in have
// been checked with ValidatePath; implementations check them again and
// return an error wrapping ErrInvalidPath for a bad one. Every method returns
// the context's error when it is cancelled.
type Backend interface {
	// Get returns the text of the document at path and an opaque version
	// that changes whenever the text does. It returns ErrNotFound when there
	// is no document and ErrTooLarge when it exceeds MaxDocumentBytes.
	Get(ctx context.Context, path string) (text, version string, err error)
	// Put creates or replaces the document at path. It returns
	// ErrPathConflict when the path cannot hold a document.
	Put(ctx context.Context, path, text string) error
	// Delete removes the document at path; a missing document is not an error.
	Delete(ctx context.Context, path string) error
	// List returns at most limit documents whose paths start with prefix
	// (a plain string prefix, "" for all), in byte order of their paths, and
	// whether more documents matched. Markers are never listed.
	List(ctx context.Context, prefix string, limit int) (docs []DocumentInfo, more bool, err error)
	// Applied returns the record stored under an idempotency marker (a
	// lowercase hex SHA-256), and false when there is none.
	Applied(ctx context.Context, marker string) (record []byte, ok bool, err error)
	// MarkApplied stores record under an idempotency marker, replacing any
	// record already there.
	MarkApplied(ctx context.Context, marker string, record []byte) error
}

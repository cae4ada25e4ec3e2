package docstore

import (
	"context"
	"errors"
)

// Limits on paths and documents.
const (
	// MaxPathBytes is the longest document path, in bytes of UTF-8. The
	// tools' schemas say maxLength 512 (characters), so every path the
	// schema rejects is also too long here; S3 keys may have 1024 bytes,
	// which leaves room for the key prefix.
	MaxPathBytes = 512
	// MaxSegmentBytes is the longest folder or file name in a path, in
	// bytes: NAME_MAX of Linux file systems (ext4, xfs, tmpfs) and of APFS.
	MaxSegmentBytes = 255
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
	// ErrInvalidPath wraps the reason a path was rejected by ValidatePath
	// (or, as a second line of defence, by the file system: a name too long).
	ErrInvalidPath = errors.New("invalid path")
	// ErrOutsideStore means the path passes through a symbolic link that
	// leads outside the store's folder (DirBackend only).
	ErrOutsideStore = errors.New("path leads outside the document store through a symbolic link")
	// ErrLinkLoop means resolving the path takes too many symbolic links
	// (a loop, DirBackend only).
	ErrLinkLoop = errors.New("path passes through a loop of symbolic links")
	// ErrNotDocument means the path names something that is neither a
	// document nor a folder (a named pipe, a socket, a device, an archived
	// S3 object).
	ErrNotDocument = errors.New("path names something that is not a readable document")
	// ErrNotText means the stored document is not UTF-8 text (a binary
	// file someone put in the store); the tools neither show nor diff it.
	ErrNotText = errors.New("document is not UTF-8 text")
	// ErrPermission means the store may not read or change this document.
	ErrPermission = errors.New("permission denied")
	// ErrNotApplied is wrapped around a Put or Delete failure that provably
	// left the store as it was (the request was refused, or failed before
	// the step that commits the change), as opposed to one whose outcome is
	// unknown (a timeout, say).
	ErrNotApplied = errors.New("the document store was not changed")
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
	// is no document, ErrTooLarge when it exceeds MaxDocumentBytes and
	// ErrNotText when it is not valid UTF-8.
	Get(ctx context.Context, path string) (text, version string, err error)
	// Put creates or replaces the document at path. It returns
	// ErrPathConflict when the path cannot hold a document, and an error
	// wrapping ErrNotApplied when it failed and surely changed nothing.
	Put(ctx context.Context, path, text string) error
	// Delete removes the document at path; a missing document is not an
	// error. A failure that surely changed nothing wraps ErrNotApplied.
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

// isPathProblem reports whether err is one of the errors above that
// describe the path or the document rather than the store: the model can
// read it and choose another path.
func isPathProblem(err error) bool {
	for _, target := range []error{ErrNotFound, ErrTooLarge, ErrNotText, ErrPathConflict, ErrInvalidPath, ErrOutsideStore, ErrLinkLoop, ErrNotDocument, ErrPermission} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

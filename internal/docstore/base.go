package docstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/agentgate/agentgate/internal/loop"
)

// A write or delete held for approval is shown to the approver as a preview
// computed from the document as it was then. The preview's base (see
// loop.BasedPreviewer) records that document, so that the approved call
// acts only on what the approver saw: if the document changed in between,
// the call is refused before any effect.

// reviewedDocument is a preview's base: the document's path and its state
// when the preview was computed.
type reviewedDocument struct {
	Path string `json:"path"`
	// State is documentState of the document.
	State string `json:"state"`
}

// The states of a document that has no text to digest.
const (
	stateAbsent   = "absent"    // no document at the path
	stateTooLarge = "too_large" // over MaxDocumentBytes: neither shown nor digested
	stateNotText  = "not_text"  // not UTF-8 text: neither shown nor digested
	stateUnusable = "unusable"  // another path problem (permission, a conflict, ...)
)

// documentState names the state of a document read with Get: the SHA-256
// of its text, or one of the states above; "" when the store could not be
// read (an infrastructure error). It is computed by the tools, not taken
// from the backend's version, so it is the same for every backend.
func documentState(text string, err error) string {
	switch {
	case err == nil:
		sum := sha256.Sum256([]byte(text))
		return "sha256:" + hex.EncodeToString(sum[:])
	case errors.Is(err, ErrNotFound):
		return stateAbsent
	case errors.Is(err, ErrTooLarge):
		return stateTooLarge
	case errors.Is(err, ErrNotText):
		return stateNotText
	case isPathProblem(err):
		return stateUnusable
	}
	return ""
}

// reviewedBase returns the base of a preview computed from the document at
// p as Get returned it, or "" when the store could not be read.
func reviewedBase(p, text string, err error) string {
	state := documentState(text, err)
	if state == "" {
		return ""
	}
	b, err := json.Marshal(reviewedDocument{Path: p, State: state})
	if err != nil {
		return ""
	}
	return string(b)
}

// changedSinceReview reports whether the document at p, as Get just
// returned it (text, err), is no longer the one the approver's preview was
// computed from, and then returns the error result the call gives instead
// of its effect. A call without a base (it needed no approval, or its state
// was saved before bases existed) is not checked; nor is an edited call
// whose path the approver changed, since the approver saw no preview of the
// new path. A base that cannot be decoded refuses the call (fail closed).
//
// A document too large or not text is not digested: one that stays so
// passes, whatever its bytes.
func changedSinceReview(ctx context.Context, p, text string, err error) (loop.Result, bool) {
	raw := loop.PreviewBase(ctx)
	if raw == "" {
		return loop.Result{}, false
	}
	var base reviewedDocument
	if jerr := json.Unmarshal([]byte(raw), &base); jerr != nil || base.Path == "" || base.State == "" {
		return refusedAsChanged("the state of %q that the approver reviewed cannot be read; nothing was changed", p), true
	}
	if base.Path != p {
		return loop.Result{}, false
	}
	if documentState(text, err) == base.State {
		return loop.Result{}, false
	}
	return refusedAsChanged("document %q changed after the approver reviewed this call; nothing was changed. Read it again: a new change needs a new approval", p), true
}

func refusedAsChanged(format string, args ...any) loop.Result {
	res := loop.ErrorResult(format, args...)
	res.BaseChanged = true
	return res
}

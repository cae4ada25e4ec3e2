package runs

import (
	"errors"
	"fmt"
)

// Error codes carried by *Error. Callers branch on the code, never on the
// message; the HTTP layer maps each code to one status.
const (
	ENotFound = "not_found" // the run, token or blob does not exist
	EConflict = "conflict"  // the row is not in the state the call requires (status, version, suspension, lease, token use)
	EInvalid  = "invalid"   // the input is malformed or too large; nothing was written
	EGone     = "gone"      // it existed but is no longer usable (state blob missing, token expired)
	EInternal = "internal"  // anything unexpected (service failure, corrupted state)
)

// Error is the one error type of the domain. Adapters translate service
// errors into it so callers never import an SDK.
type Error struct {
	// Code is one of the E* constants.
	Code string
	// Message is a human-readable explanation, safe to show to API callers
	// for every code but EInternal.
	Message string
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("runs: %s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message of the first *Error in err's chain, or
// "internal error" for any other non-nil error (its detail is for logs
// only), and "" for nil.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

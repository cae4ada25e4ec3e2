package runs

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/internal/loop"
)

// Error codes carried by *Error: the one list of codes the domain, the
// validators and the API use. Callers branch on the code, never on the
// message; HTTPStatus maps each code to one status.
const (
	EBadRequest       = "bad_request"            // the body or query is malformed (not JSON, wrong type, unknown field)
	EUnauthorized     = "unauthorized"           // no authenticated caller
	EForbidden        = "forbidden"              // the caller may not do this
	ENotFound         = "not_found"              // the run, token, blob or route does not exist
	EMethodNotAllowed = "method_not_allowed"     // the path does not answer this method
	EConflict         = "conflict"               // the row is not in the state the call requires (status, version, suspension, lease, token use)
	EGone             = "gone"                   // it existed but is no longer usable (state blob missing, token expired, window closed)
	ETooLarge         = "too_large"              // over a size or count limit; nothing was written
	EUnsupportedMedia = "unsupported_media_type" // the body is not of the media type the route takes
	EInvalid          = "unprocessable"          // well-formed but invalid; nothing was written
	EInternal         = "internal"               // anything unexpected (service failure, corrupted state)
)

// EUnprocessable is EInvalid under the name of its HTTP status.
const EUnprocessable = EInvalid

// httpStatus is the one table from codes to HTTP statuses.
var httpStatus = map[string]int{
	EBadRequest:       http.StatusBadRequest,
	EUnauthorized:     http.StatusUnauthorized,
	EForbidden:        http.StatusForbidden,
	ENotFound:         http.StatusNotFound,
	EMethodNotAllowed: http.StatusMethodNotAllowed,
	EConflict:         http.StatusConflict,
	EGone:             http.StatusGone,
	ETooLarge:         http.StatusRequestEntityTooLarge,
	EUnsupportedMedia: http.StatusUnsupportedMediaType,
	EInvalid:          http.StatusUnprocessableEntity,
	EInternal:         http.StatusInternalServerError,
}

// Codes returns every error code, in no particular order.
func Codes() []string {
	out := make([]string, 0, len(httpStatus))
	for c := range httpStatus {
		out = append(out, c)
	}
	return out
}

// HTTPStatus returns the HTTP status of a code; 500 for a code it does not
// know (an unknown code is a bug, never a client's fault).
func HTTPStatus(code string) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is the one error type of the domain. Adapters translate service
// errors into it so callers never import an SDK; validators return it so the
// API can answer with its code.
type Error struct {
	// Code is one of the E* constants.
	Code string
	// Message is a human-readable explanation, safe to show to API callers
	// for every code but EInternal.
	Message string
}

// Error implements the error interface (for logs; callers see Message).
func (e *Error) Error() string {
	return e.Code + ": " + e.Message
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
// "internal error" for EInternal and any other non-nil error (its detail is
// for logs only), and "" for nil.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != EInternal && e.Message != "" {
		return e.Message
	}
	return "internal error"
}

// Public returns what an API caller may see of err: its code, HTTP status
// and message. Anything that is not an *Error, and every EInternal, is
// "internal error" with status 500.
func Public(err error) (code string, status int, message string) {
	code = ErrorCode(err)
	status = HTTPStatus(code)
	if status == http.StatusInternalServerError {
		return EInternal, status, "internal error"
	}
	return code, status, ErrorMessage(err)
}

// FromLoop translates an error of the loop's validators (which import
// nothing of the domain) into the one error type: a decision on another
// turn is EConflict, an invalid decision EInvalid, a tool that changed since
// suspension EConflict; anything else stays as it is (EInternal to callers).
// The message is the validator's own, without the sentinel's prefix.
func FromLoop(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range []struct {
		sentinel error
		code     string
	}{
		{loop.ErrDigestMismatch, EConflict},
		{loop.ErrInvalidDecision, EInvalid},
		{loop.ErrToolChanged, EConflict},
		{loop.ErrInvalidResults, EInvalid},
	} {
		if errors.Is(err, m.sentinel) {
			msg := strings.TrimPrefix(err.Error(), m.sentinel.Error()+": ")
			return &Error{Code: m.code, Message: msg}
		}
	}
	return err
}

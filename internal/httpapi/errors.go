package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentgate/agentgate/internal/runs"
)

// API error codes beyond the runs codes.
const (
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeUnprocessable    = "unprocessable"
	CodeTooLarge         = "too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeBadRequest       = "bad_request"
)

// apiError is an error with a code the caller sees and a message safe to show.
type apiError struct {
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// statusOf is the one table from codes to HTTP statuses.
var statusOf = map[string]int{
	runs.ENotFound:       http.StatusNotFound,
	runs.EConflict:       http.StatusConflict,
	runs.EInvalid:        http.StatusBadRequest,
	runs.EGone:           http.StatusGone,
	runs.EInternal:       http.StatusInternalServerError,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeUnprocessable:    http.StatusUnprocessableEntity,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeBadRequest:       http.StatusBadRequest,
}

// classify returns the code, status and caller-safe message of any error.
func classify(err error) (code string, status int, message string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code, statusOf[ae.Code], ae.Message
	}
	code = runs.ErrorCode(err)
	if code == runs.EInternal {
		return code, http.StatusInternalServerError, "internal error"
	}
	return code, statusOf[code], runs.ErrorMessage(err)
}

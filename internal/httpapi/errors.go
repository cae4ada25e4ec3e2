package httpapi

import (
	"errors"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// errorf returns the one error type (*runs.Error) with a caller-safe message.
func errorf(code, format string, args ...any) *runs.Error {
	return runs.Errorf(code, format, args...)
}

// refusal maps an error a validator marked with sentinel (its message is
// written for the caller) to EInvalid with the validator's own message,
// without the mark; anything else is returned as it is (internal to
// callers).
func refusal(err, sentinel error) error {
	if !errors.Is(err, sentinel) {
		return err
	}
	return errorf(runs.EInvalid, "%s", strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
}

// classify returns the code, status and caller-safe message of any error:
// runs.Public, the one mapping to HTTP (500 and "internal error" for
// anything unexpected).
func classify(err error) (code string, status int, message string) {
	return runs.Public(err)
}

package httpapi

import (
	"github.com/agentgate/agentgate/internal/runs"
)

// errorf returns the one error type (*runs.Error) with a caller-safe message.
func errorf(code, format string, args ...any) *runs.Error {
	return runs.Errorf(code, format, args...)
}

// classify returns the code, status and caller-safe message of any error:
// runs.Public, the one mapping to HTTP (500 and "internal error" for
// anything unexpected).
func classify(err error) (code string, status int, message string) {
	return runs.Public(err)
}

package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/apispec"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		code    string
		status  int
		message string
	}{
		{"not found", runs.Errorf(runs.ENotFound, "run r1 not found"), runs.ENotFound, 404, "run r1 not found"},
		{"wrapped", fmt.Errorf("load run: %w", runs.Errorf(runs.EConflict, "stale")), runs.EConflict, 409, "stale"},
		{"invalid", runs.Errorf(runs.EInvalid, "approvers[0] twice"), runs.EUnprocessable, 422, "approvers[0] twice"},
		{"too large", runs.Errorf(runs.ETooLarge, "21 approvers"), runs.ETooLarge, 413, "21 approvers"},
		{"forbidden", runs.Errorf(runs.EForbidden, "not an approver"), runs.EForbidden, 403, "not an approver"},
		{"unknown code is internal", runs.Errorf("bogus", "secret detail"), runs.EInternal, 500, "internal error"},
		{"empty code is internal", &runs.Error{Message: "secret detail"}, runs.EInternal, 500, "internal error"},
		{"internal keeps its detail for logs", runs.Errorf(runs.EInternal, "dynamodb: throttled"), runs.EInternal, 500, "internal error"},
		{"plain error", errors.New("openat /secret: permission denied"), runs.EInternal, 500, "internal error"},
		{"loop digest mismatch", runs.FromLoop(fmt.Errorf("%w: other turn", loop.ErrDigestMismatch)), runs.EConflict, 409, "other turn"},
		{"loop invalid decision", runs.FromLoop(fmt.Errorf("%w: calls[0]: call \"x\" is not pending", loop.ErrInvalidDecision)), runs.EInvalid, 422, `calls[0]: call "x" is not pending`},
		{"loop other error", runs.FromLoop(errors.New("boom")), runs.EInternal, 500, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, status, msg := classify(tt.err)
			if code != tt.code || status != tt.status || msg != tt.message {
				t.Errorf("classify(%v) = %q %d %q, want %q %d %q", tt.err, code, status, msg, tt.code, tt.status, tt.message)
			}
		})
	}
}

// TestErrorCodesMatchSpec: the codes of the one error type are exactly the
// ErrorCode enum of openapi.yaml (without its planned values), and each
// answers the status the spec's table gives.
func TestErrorCodesMatchSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("openapi.yaml has no ErrorCode schema")
	}
	var spec []string
	for _, v := range ref.Value.Enum {
		spec = append(spec, v.(string))
	}
	got := runs.Codes()
	slices.Sort(spec)
	slices.Sort(got)
	if !slices.Equal(got, spec) {
		t.Errorf("error codes %v, openapi.yaml ErrorCode lists %v", got, spec)
	}
	want := map[string]int{
		"bad_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
		"conflict": 409, "gone": 410, "too_large": 413, "unsupported_media_type": 415, "unprocessable": 422, "internal": 500,
	}
	for _, c := range got {
		if runs.HTTPStatus(c) != want[c] || want[c] == 0 {
			t.Errorf("code %s answers %d, want %d", c, runs.HTTPStatus(c), want[c])
		}
	}
	if s := runs.HTTPStatus("no_such_code"); s != http.StatusInternalServerError {
		t.Errorf("an unknown code answers %d, want 500", s)
	}
}

func TestRefusalKeepsUnmarkedErrorsInternal(t *testing.T) {
	err := refusal(errors.New("disk on fire"), identity.ErrInvalidApprovers)
	if code, status, msg := runs.Public(err); code != runs.EInternal || status != 500 || msg != "internal error" {
		t.Errorf("refusal(unmarked) = %s %d %q, want internal 500", code, status, msg)
	}
	err = refusal(fmt.Errorf("%w: %w", policy.ErrInvalidRun, policy.ErrLoosens), policy.ErrInvalidRun)
	if code, status, msg := runs.Public(err); code != runs.EInvalid || status != 422 || msg != policy.ErrLoosens.Error() {
		t.Errorf("refusal(marked) = %s %d %q, want invalid 422 with the message without the mark", code, status, msg)
	}
}

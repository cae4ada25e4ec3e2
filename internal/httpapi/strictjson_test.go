package httpapi

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/strictjson"
)

// v2Problem is what the handlers answered when they decoded with JSON v2's
// Unmarshal (RejectUnknownMembers): the oracle decodeStrict is held to.
func v2Problem(err error) string {
	var se *jsontext.SyntacticError
	var te *jsonv2.SemanticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "JSON ends too early"
	case errors.As(err, &se):
		switch {
		case errors.Is(se.Err, jsontext.ErrDuplicateName):
			return fmt.Sprintf("member %.80q appears twice in the same object", strictjson.Path(se.JSONPointer))
		case strings.Contains(se.Err.Error(), "after top-level value"):
			return "the body has data after the JSON object"
		case strings.Contains(se.Err.Error(), "UTF-8"), strings.Contains(se.Err.Error(), "surrogate"):
			return fmt.Sprintf("invalid UTF-8 or a lone surrogate escape in a string at byte %d", se.ByteOffset)
		}
		return fmt.Sprintf("malformed JSON at byte %d", se.ByteOffset)
	case errors.As(err, &te):
		switch {
		case errors.Is(te.Err, jsonv2.ErrUnknownName):
			return fmt.Sprintf("unknown field %.80q", strictjson.Path(te.JSONPointer))
		case te.JSONPointer == "":
			return fmt.Sprintf("the body must be a JSON object, not %s", strictjson.KindName(te.JSONKind))
		case te.GoType != nil && te.JSONKind == '0' && len(te.JSONValue) <= 40:
			return fmt.Sprintf("field %.80q must be %s, not the number %s", strictjson.Path(te.JSONPointer), jsonTypeName(te.GoType), te.JSONValue)
		case te.GoType != nil:
			return fmt.Sprintf("field %.80q must be %s, not %s", strictjson.Path(te.JSONPointer), jsonTypeName(te.GoType), strictjson.KindName(te.JSONKind))
		}
		return fmt.Sprintf("field %.80q is not valid", strictjson.Path(te.JSONPointer))
	}
	return "malformed JSON"
}

// sameAsJSONv2 decodes body into a fresh T with decodeStrict and with JSON
// v2, and fails unless both refuse it with the same answer to the caller,
// or both take it and decode the same value.
func sameAsJSONv2[T any](t *testing.T, body []byte) {
	t.Helper()
	var got, want T
	gotErr := decodeStrict(body, &got)
	wantErr := jsonv2.Unmarshal(body, &want, jsonv2.RejectUnknownMembers(true))
	switch {
	case gotErr == nil && wantErr == nil:
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T from %q:\n%+v\nJSON v2 decodes\n%+v", got, body, got, want)
		}
	case gotErr != nil && wantErr == nil && refusedNull(gotErr):
		// The one difference on purpose: JSON v2 decodes null as the
		// zero value, decodeStrict refuses it (as the spec's types do).
	case gotErr != nil && wantErr != nil && overflowV2Refuses(gotErr, wantErr):
		// The other difference on purpose: an integer beyond its type in
		// an otherwise sound body is out of range (422, decodeJSONGiven),
		// not of the wrong kind, as JSON v2 says.
	case gotErr == nil || wantErr == nil:
		t.Errorf("%T from %q: decodeStrict %v, JSON v2 %v", got, body, gotErr, wantErr)
	case refusedNull(gotErr):
		// Both refuse, JSON v2 for something after the null it takes.
	default:
		g, w := jsonProblem(gotErr), v2Problem(wantErr)
		// JSON v2 leaves the number out of some of its errors (a number in
		// a []string, a map[string]string or a string field of a struct in
		// a slice), and the old answer then read "not the number null".
		if prefix, ok := strings.CutSuffix(w, "not the number null"); ok && strings.HasPrefix(g, prefix+"not the number ") {
			return
		}
		// Malformed JSON is malformed JSON: JSON v2's decoder places some
		// syntax errors a few bytes from where its tokenizer (jsontext,
		// which decodeStrict reads with) does, or calls them an early end.
		if malformed(g) && malformed(w) {
			return
		}
		// Nor does it always read a body that breaks off or turns malformed
		// after a value of the wrong type as far as the break: either answer
		// is true of such a body.
		if (malformed(g) || malformed(w)) && !jsontext.Value(body).IsValid() {
			return
		}
		if g != w {
			t.Errorf("%T from %q: %q, JSON v2's answer was %q", got, body, g, w)
		}
	}
}

// overflowV2Refuses says whether got is decodeStrict's rangeError for an
// integer JSON v2 refused (want) as a number its type cannot hold.
func overflowV2Refuses(got, want error) bool {
	var re *rangeError
	var te *jsonv2.SemanticError
	return errors.As(got, &re) && errors.As(want, &te) && te.JSONPointer == re.Pointer && te.JSONKind == '0' && string(te.JSONValue) == re.Value
}

func refusedNull(err error) bool {
	var se *shapeError
	return errors.As(err, &se) && se.Kind == 'n'
}

func malformed(problem string) bool {
	return problem == "JSON ends too early" || strings.HasPrefix(problem, "malformed JSON at byte ")
}

var strictSeeds = []string{
	`{"prompt":"update pricing","approvers":["bob@example.com"]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"n","input":{"a":[1,{"b":null}]}}]}],"system":"s","model":"m",` +
		`"allowed_tools":["read_document"],"approvers":["bob@example.com"],"approval_ttl_seconds":600,"max_iterations":3,"max_tokens":1000,` +
		`"max_output_tokens":100,"denial_ends_run":true,"four_eyes":true,"metadata":{"ticket":"T-1"},"client_tools":[{"name":"c","effect":"write","input_schema":{"type":"object"}}]}`,
	`{"turn_digest":"abab","calls":[{"call_id":"tu_write","action":"edit","message":"m","input":{"path":"p","text":"t"}},{"call_id":"tu_read","action":"approve"}]}`,
	`{"tool_results_id":"tr_1","results":[{"call_id":"c1","content":"ok","is_error":false}]}`,
	`{"prompt":`, `{"prompt" "x"}`, `{"Prompt":"x"}`, `{"prompt":"x","prompt":"y"}`, `{"metadata":{"a":"1","a":"2"}}`,
	`[1]`, `1`, `"s"`, `null`, `true`, `{}`, `{} {}`, `{}x`, `{"max_iterations":1.5}`, `{"max_iterations":"3"}`,
	`{"max_iterations":99999999999999999999}`, `{"max_tokens":-1e3}`, `{"four_eyes":null}`, `{"four_eyes":"yes"}`, `{"prompt":null,"colour":1}`, `{"prompt":null,"prompt":"x"}`,
	`{"approvers":"bob"}`, `{"approvers":[1]}`, `{"approvers":[null]}`, `{"metadata":{"a":1}}`, `{"metadata":[]}`,
	`{"messages":[{"role":1}]}`, `{"messages":[{"content":[{"input":{"x":1,"x":2}}]}]}`, `{"prompt":"x\ud800"}`,
	"{\"prompt\":\"x\xff\"}", `{"calls":[{"call_id":"a","colour":1}]}`, `{"calls":{}}`, `{"action":true}`, `{"turn_digest":{"a":[1,2]}}`,
	`{"results":[{"call_id":"c","content":7}]}`, `{"tool_results_id":"t","results":null}`, ` {"prompt":"x"} `, `{"prompt":"x",}`, `{{`,
	`{"max_output_tokens":1e2}`, `{"max_output_tokens":-0}`, `{"max_iterations":9223372036854775808}`, `{"approval_ttl_seconds":9223372036854775807}`,
	`{"max_tokens":-9223372036854775809,"prompt":"x"}`, `{"max_iterations":9223372036854775808,"colour":1}`, `{"max_iterations":9223372036854775808} x`,
}

func TestDecodeStrictIsJSONv2(t *testing.T) {
	for _, s := range strictSeeds {
		sameAsJSONv2[service.StartRequest](t, []byte(s))
		sameAsJSONv2[DecisionBody](t, []byte(s))
		sameAsJSONv2[ToolResultsBody](t, []byte(s))
	}
}

func FuzzDecodeStrictIsJSONv2(f *testing.F) {
	for _, s := range strictSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsJSONv2[service.StartRequest](t, body)
		sameAsJSONv2[DecisionBody](t, body)
		sameAsJSONv2[ToolResultsBody](t, body)
	})
}

func TestDecodeStrictGivenNamesTheMembersGiven(t *testing.T) {
	var b ToolResultsBody
	given, err := decodeStrictGiven([]byte(`{"tool_results_id":"t","results":[{"call_id":"c1","content":""},{"call_id":"c2","is_error":false},{"call_id":"c~/3"}]}`), &b)
	require.NoError(t, err)
	assert.Equal(t, givenMembers{
		"/tool_results_id": true, "/results": true,
		"/results/0/call_id": true, "/results/0/content": true,
		"/results/1/call_id": true, "/results/1/is_error": true,
		"/results/2/call_id": true,
	}, given, "an empty string and false are given")
	require.Len(t, b.Results, 3)

	var sr service.StartRequest
	given, err = decodeStrictGiven([]byte(`{"prompt":"x","messages":[{"role":"user","content":[{"type":"tool_use","input":null}]}],"metadata":{"a/b":"1"}}`), &sr)
	require.NoError(t, err, "a raw value (a tool's input) may be null")
	assert.True(t, given["/messages/0/content/0/input"])
	assert.True(t, given["/metadata/a~1b"], "map keys are members too, escaped as JSON pointers escape them")
}

func TestNullIsNoValueOfAMember(t *testing.T) {
	for body, problem := range map[string]string{
		`{"prompt":"x","required_approvals":null}`: `field "required_approvals" must be an integer, not null`,
		`{"prompt":null}`:                          `field "prompt" must be a string, not null`,
		`{"approvers":[null]}`:                     `field "approvers.0" must be a string, not null`,
		`{"metadata":{"a":null}}`:                  `field "metadata.a" must be a string, not null`,
		`{"four_eyes":null}`:                       `field "four_eyes" must be a boolean, not null`,
		`{"messages":null}`:                        `field "messages" must be an array, not null`,
	} {
		var sr service.StartRequest
		err := decodeStrict([]byte(body), &sr)
		require.Error(t, err, body)
		assert.Equal(t, problem, jsonProblem(err), body)
	}
	var b ToolResultsBody
	err := decodeStrict([]byte(`{"tool_results_id":"t","results":[{"call_id":"c","content":null}]}`), &b)
	require.Error(t, err)
	assert.Equal(t, `field "results.0.content" must be a string, not null`, jsonProblem(err))
}

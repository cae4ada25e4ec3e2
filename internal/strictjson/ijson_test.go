package strictjson_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/strictjson"
)

// TestValueRefusesWhatIsNotIJSON: Value takes one I-JSON value with white
// space around it and refuses the rest, and Problem says why in the words
// the API's answers and the loop's tool errors use.
func TestValueRefusesWhatIsNotIJSON(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{` {"a":[1,{"b":"\u00e9"}],"c":"\ud83d\ude00"} `, ""},
		{`[1,"x",null]`, ""},
		{`{"a":1,"a":2}`, `member "a" appears twice in the same object`},
		{`{"a":{"b":[{"c":1,"c":1}]}}`, `member "a.b.0.c" appears twice in the same object`},
		{"{\"a\":\"\xff\"}", "invalid UTF-8 or a lone surrogate escape in a string at byte 6"},
		{"{\"\xc3\":1}", "invalid UTF-8 or a lone surrogate escape in a string at byte 2"},
		{`{"a":"\ud800"}`, "invalid UTF-8 or a lone surrogate escape in a string at byte 6"},
		{`{"a":"\udc00\ud800"}`, "invalid UTF-8 or a lone surrogate escape in a string at byte 6"},
		{`{"a":1} {}`, "data after the JSON value"},
		{`{"a":`, "JSON ends too early"},
		{``, "JSON ends too early"},
		{`{"a":01}`, "malformed JSON at byte 6"},
	} {
		err := strictjson.Value([]byte(tt.data))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Value(%q) = %v, want nil", tt.data, err)
		case tt.want == "":
		case err == nil:
			t.Errorf("Value(%q) = nil, want %q", tt.data, tt.want)
		default:
			if got, ok := strictjson.Problem(err); !ok || got != tt.want {
				t.Errorf("Problem(Value(%q)) = %q, %v; want %q", tt.data, got, ok, tt.want)
			}
		}
	}
}

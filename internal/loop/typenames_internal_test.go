package loop

import (
	"encoding/json"
	"testing"
)

// TestCheckTypeNames: a "type" keyword must name JSON Schema types; a
// property named type, and data (enum, const, default, examples) holding a
// member named type, are not keywords.
func TestCheckTypeNames(t *testing.T) {
	for _, tt := range []struct {
		schema string
		ok     bool
	}{
		{`{"type":"object"}`, true},
		{`{"type":["string","null"]}`, true},
		{`{"type":"object","properties":{"type":{"type":"string","enum":["a"]}}}`, true},
		{`{"type":"object","properties":{"type":true}}`, true},
		{`{"type":"object","properties":{"k":{"const":{"type":"nope"}},"d":{"default":{"type":"x"}},"e":{"examples":[{"type":"y"}]},"n":{"enum":[{"type":"z"}]}}}`, true},
		{`{"type":"object","$defs":{"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, true},
		{`{"type":"nope"}`, false},
		{`{"type":"object","properties":{"x":{"type":"nope"}}}`, false},
		{`{"type":"object","properties":{"x":{"type":["string","text"]}}}`, false},
		{`{"type":"object","properties":{"x":{"items":{"type":"float"}}}}`, false},
		{`{"allOf":[{"type":"Object"}]}`, false},
	} {
		err := checkTypeNames(json.RawMessage(tt.schema))
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.schema, err, tt.ok)
		}
	}
}

package loop

import (
	"encoding/json"
	"strings"
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
		{`{"type":"object","dependentRequired":{"type":["a"]}}`, true},
		{`{"type":"object","dependencies":{"type":["a"]}}`, true},
		{`{"type":"object","dependencies":{"a":{"type":"nope"}}}`, false},
		{`{"type":"object","x-ui":{"type":"slider"}}`, true},
		{`{"type":"object","properties":{"a":{"x-meta":{"type":"nope"}}}}`, true},
		{`{"type":"object","properties":{"a":{"type":[]}}}`, false},
		{`{"type":"object","properties":{"a":{"type":["string","string"]}}}`, false},
		{`{"type":"object","properties":{"a":{"items":[{"type":"integer"},{"type":"nope"}]}}}`, false},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"not":{"type":"nope"}}]}}}`, false},
	} {
		err := checkTypeNames(json.RawMessage(tt.schema))
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.schema, err, tt.ok)
		}
	}
}

// TestSchemaProblemNamesTheKeyword: a schema keyword with a value of the
// wrong type is named as the schema spells it, without the compiler's Go
// types.
func TestSchemaProblemNamesTheKeyword(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"object","properties":[]}`:                    `keyword "properties" cannot have a JSON array as its value`,
		`{"type":"object","required":"a"}`:                     `keyword "required" cannot have a JSON string as its value`,
		`{"type":"object","minimum":"x"}`:                      `keyword "minimum" cannot have a JSON string as its value`,
		`{"type":"object","properties":{"a":{"pattern":"("}}}`: "pattern",
	} {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "jsonschema.") || strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "map[") {
			t.Errorf("%s: %v, want it to say %q in the schema's terms", schema, err, want)
		}
	}
}

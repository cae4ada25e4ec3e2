package loop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRefCyclesAreRefused: a schema that applies itself to the same value
// again without going into it overflowed the validator's stack (a fatal
// error no recover catches: a client tool's schema took the server down);
// recursion through properties or items is a tree and stays.
func TestRefCyclesAreRefused(t *testing.T) {
	refused := map[string]string{
		"ref to itself":        `{"type":"object","properties":{"q":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#/$defs/x"}}}`,
		"two refs":             `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"properties":{"z":{"$ref":"#/$defs/a"}}}`,
		"root":                 `{"type":"object","allOf":[{"$ref":"#"}]}`,
		"anchor":               `{"$defs":{"a":{"$anchor":"loop","not":{"$ref":"#loop"}}},"properties":{"z":{"$ref":"#loop"}}}`,
		"draft-07 definitions": `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"z":{"$ref":"#/definitions/x"}},"definitions":{"x":{"anyOf":[{"$ref":"#/definitions/x"}]}}}`,
		"if then":              `{"$defs":{"x":{"if":{"$ref":"#/$defs/x"}}},"properties":{"z":{"$ref":"#/$defs/x"}}}`,
		"escaped pointer":      `{"$defs":{"a/b":{"$ref":"#/$defs/a~1b"}},"properties":{"z":{"$ref":"#/$defs/a~1b"}}}`,
		"through its own $id":  `{"$id":"https://example.com/s","$defs":{"a":{"$ref":"https://example.com/s#/$defs/a"}},"properties":{"z":{"$ref":"#/$defs/a"}}}`,
		// Found by review: keys in another case (the validator's decoder
		// matches them), draft-07 dependencies.
		"keys in another case":  `{"type":"object","properties":{"z":{"$ref":"#/$defs/x"}},"$defs":{"x":{"AllOf":[{"$REF":"#/$defs/x"}]}}}`,
		"draft-07 dependencies": `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"z":{"$ref":"#/definitions/x"}},"definitions":{"x":{"dependencies":{"a":{"$ref":"#/definitions/x"}}}}}`,
	}
	for name, schema := range refused {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		assert.ErrorContains(t, err, "refers back to itself", name)
	}
	// A nested $id would make "#" mean another schema there (the review's
	// bypass); it is refused outright.
	for _, schema := range []string{
		`{"type":"object","properties":{"z":{"$id":"https://example.com/sub","allOf":[{"$ref":"#"}]}}}`,
		`{"$defs":{"a":{"type":"string"}},"properties":{"z":{"$id":"https://example.com/sub","$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}}`,
	} {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		assert.ErrorContains(t, err, "$id is taken on the root schema only")
	}
	// anyOf fanning out level after level: exponential work per value.
	fan := `{"type":"string"}`
	for i := range 20 {
		fan = fmt.Sprintf(`{"$defs":{"l%d":%s},"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, fan, i, i)
	}
	_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(fan)})
	assert.Error(t, err, "fan-out")
	deep := strings.Repeat(`{"not":`, 200) + `{}` + strings.Repeat(`}`, 200)
	_, err = compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(deep)})
	assert.ErrorContains(t, err, "nests 201 levels deep")
	fine := map[string]string{
		"tree":          `{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
		"linked list":   `{"type":"object","properties":{"next":{"$ref":"#"}}}`,
		"shared def":    `{"properties":{"a":{"$ref":"#/$defs/s"},"b":{"allOf":[{"$ref":"#/$defs/s"},{"$ref":"#/$defs/s"}]}},"$defs":{"s":{"type":"string"}}}`,
		"no refs":       `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
		"own $id list":  `{"$id":"https://example.com/t","type":"object","properties":{"next":{"$ref":"https://example.com/t"}}}`,
		"data with ref": `{"type":"object","properties":{"a":{"const":{"$ref":"#"}}}}`,
		"pydantic":      `{"$defs":{"Item":{"properties":{"name":{"type":"string"}},"type":"object"}},"properties":{"item":{"anyOf":[{"$ref":"#/$defs/Item"},{"type":"null"}]}},"type":"object"}`,
		"zod draft-07":  `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"type":"object","properties":{"b":{"$ref":"#/definitions/A"}}}}}`,
	}
	for name, schema := range fine {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		assert.NoError(t, err, name)
	}
	tree, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(fine["tree"])})
	assert.NoError(t, err)
	assert.NoError(t, tree.Validate(map[string]any{"children": []any{map[string]any{"children": []any{}}}}))
}

package loop

import (
	"encoding/json"
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
	}
	for name, schema := range refused {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		assert.ErrorContains(t, err, "refers back to itself", name)
	}
	fine := map[string]string{
		"tree":          `{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
		"linked list":   `{"type":"object","properties":{"next":{"$ref":"#"}}}`,
		"shared def":    `{"properties":{"a":{"$ref":"#/$defs/s"},"b":{"allOf":[{"$ref":"#/$defs/s"},{"$ref":"#/$defs/s"}]}},"$defs":{"s":{"type":"string"}}}`,
		"no refs":       `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
		"own $id list":  `{"$id":"https://example.com/t","type":"object","properties":{"next":{"$ref":"https://example.com/t"}}}`,
		"data with ref": `{"type":"object","properties":{"a":{"const":{"$ref":"#"}}}}`,
	}
	for name, schema := range fine {
		_, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(schema)})
		assert.NoError(t, err, name)
	}
	tree, err := compileSchema(Definition{Name: "t", InputSchema: json.RawMessage(fine["tree"])})
	assert.NoError(t, err)
	assert.NoError(t, tree.Validate(map[string]any{"children": []any{map[string]any{"children": []any{}}}}))
}

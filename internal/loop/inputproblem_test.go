package loop_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
)

// TestInputProblemNamesNullAndStaysShort: a refused input's message names
// a null as null (the validator prints Go's "<invalid reflect.Value>") and
// does not quote a large refused value whole.
func TestInputProblemNamesNullAndStaysShort(t *testing.T) {
	tb, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "w", Effect: loop.EffectWrite,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}})
	require.NoError(t, err)
	err = tb.ValidateInput("w", json.RawMessage(`{"text":null}`))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "reflect", "Go's internals are not the caller's")
	assert.Contains(t, err.Error(), "null")
	err = tb.ValidateInput("w", json.RawMessage(`{"text":[`+strings.Repeat(`"abcdefgh",`, 20000)+`"x"]}`))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 1200, "the refused value is not quoted whole")
}

// TestSchemaMessages: a refused input's message and a schema that does not
// compile are said in the schema's terms, never the validator's (a
// rational "11/1", a limit printed "10.000000", "<anonymous schema>", "no
// loader passed to Schema.Resolve").
func TestSchemaMessages(t *testing.T) {
	inputs := []struct{ schema, input, want string }{
		{`{"type":"object","properties":{"qty":{"type":"integer","maximum":10}}}`, `{"qty":11}`,
			`input does not match the schema of "t": at /properties/qty: must be at most 10, not 11`},
		{`{"type":"object","properties":{"qty":{"type":"number","minimum":0.0000001}}}`, `{"qty":0}`,
			`at /properties/qty: must be at least 1e-07, not 0`},
		{`{"type":"object","properties":{"qty":{"type":"number","exclusiveMaximum":2.5}}}`, `{"qty":2.5}`,
			`at /properties/qty: must be less than 2.5, not 2.5`},
		{`{"type":"object","properties":{"qty":{"type":"number","exclusiveMinimum":-3}}}`, `{"qty":-3}`,
			`at /properties/qty: must be greater than -3, not -3`},
		{`{"type":"object","properties":{"qty":{"type":"number","multipleOf":0.5}}}`, `{"qty":1.3}`,
			`at /properties/qty: must be a multiple of 0.5, not 1.3`},
		{`{"type":"object","properties":{"l":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"maximum":1e21}}}`, `{"l":[1e22]}`,
			`at /$defs/n: must be at most 1e+21, not 1e+22`},
		{`{"$id":"https://example.com/s","type":"object","properties":{"q":{"maximum":3}}}`, `{"q":4}`,
			`at /properties/q: must be at most 3, not 4`},
		{`{"type":"object","properties":{"q":{"anyOf":[{"maximum":1},{"minimum":5}]}}}`, `{"q":3}`,
			`at /properties/q: matches none of the anyOf alternatives: at /properties/q/anyOf/0: must be at most 1, not 3; at /properties/q/anyOf/1: must be at least 5, not 3`},
		{`{"type":"object","properties":{"q":{"oneOf":[{"maximum":5},{"minimum":1}]}}}`, `{"q":3}`,
			`at /properties/q: matches more than one of the oneOf alternatives`},
		{`{"type":"object","additionalProperties":false}`, `{"q":3}`,
			`input does not match the schema of "t": unexpected additional properties ["q"]`},
	}
	for _, tt := range inputs {
		tb, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead, InputSchema: json.RawMessage(tt.schema)}})
		require.NoError(t, err)
		err = tb.ValidateInput("t", json.RawMessage(tt.input))
		require.Error(t, err, tt.schema)
		assert.Contains(t, err.Error(), tt.want)
		for _, internal := range []string{"validating", ".000000", "anonymous schema"} {
			assert.NotContains(t, err.Error(), internal)
		}
		assert.NotRegexp(t, `[0-9]/[0-9]`, err.Error(), "a rational")
	}
	schemas := []struct{ schema, want string }{
		{`{"$ref":"http://evil.example/x"}`, `$ref "http://evil.example/x" points outside the schema: a remote $ref is not supported`},
		{`{"type":"object","properties":{"a":{"$ref":"https://evil.example/y#/z"}}}`, `$ref "https://evil.example/y" points outside the schema`},
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`, `$ref "#/$defs/nope" points to nothing in the schema`},
	}
	for _, tt := range schemas {
		_, err := loop.NewToolbox(&loop.FuncTool{Def: loop.Definition{Name: "t", Effect: loop.EffectRead, InputSchema: json.RawMessage(tt.schema)}})
		require.Error(t, err, tt.schema)
		assert.Contains(t, err.Error(), `tool "t": input schema does not compile: `+tt.want)
		assert.NotContains(t, err.Error(), "loader")
		assert.NotContains(t, err.Error(), "in map")
	}
}

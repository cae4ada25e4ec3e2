package httpapi_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/httpapi"
)

// TestMaxJSONDepth: a well-formed body nested MaxJSONDepth levels deep is
// read (here: a tool_use input, which may hold any JSON), one level more
// is refused 413 naming the limit, not "malformed JSON". The first case
// also holds MaxJSONDepth to the tokenizer's own limit.
func TestMaxJSONDepth(t *testing.T) {
	f := newFixture(t)
	// Levels: the body, messages, a message, content, a block, input.
	const outer = 6
	body := func(depth int) string {
		inner := depth - outer
		return `{"approvers":["b@example.com"],"messages":[{"role":"user","content":[{"type":"tool_use","id":"x","name":"n","input":{"a":` +
			strings.Repeat("[", inner) + strings.Repeat("]", inner) + `}}]}]}`
	}
	status, out := f.call(req("POST", "/runs", alice, body(httpapi.MaxJSONDepth)))
	msg, _ := out["error"].(map[string]any)["message"].(string)
	assert.NotEqual(t, 413, status, msg)
	assert.NotContains(t, msg, "deep")
	assert.NotContains(t, msg, "malformed")

	for _, depth := range []int{httpapi.MaxJSONDepth + 1, 100000} {
		status, out = f.call(req("POST", "/runs", alice, body(depth)))
		e, ok := out["error"].(map[string]any)
		require.True(t, ok, "JSON error body: %v", out)
		assert.Equal(t, 413, status, e)
		assert.Equal(t, "too_large", e["code"])
		assert.Contains(t, e["message"], "body nests too deeply: its JSON goes more than 10000 levels of objects and arrays deep (at byte ")
	}
}

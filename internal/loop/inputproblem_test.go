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

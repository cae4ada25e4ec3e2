package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestBlockGoldenRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		want loop.Block
	}{
		{"text.json", loop.TextBlock("I will read the page first.")},
		{"tool_use.json", loop.ToolUseBlock("toolu_01A09q90qw90lq917835lq9", "write_document",
			json.RawMessage(`{"path":"pages/about.md","text":"Hello \"world\" <b>&</b> ünïcode"}`))},
		{"tool_result.json", loop.ToolResultBlock("toolu_01A09q90qw90lq917835lq9", loop.Result{Content: "wrote 31 bytes"})},
		{"tool_result_error.json", loop.ToolResultBlock("call_abc123", loop.Result{
			Content: `Error: tool "delete_document" was denied by the approver: keep it`, IsError: true})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", "blocks", tt.file))
			require.NoError(t, err)
			var got loop.Block
			require.NoError(t, json.Unmarshal(golden, &got))
			assert.Equal(t, tt.want, got, "decoded block")
			require.NoError(t, got.Validate())
			enc, err := loop.MarshalJSON(got)
			require.NoError(t, err)
			assert.Equal(t, string(golden), string(enc), "re-encoded bytes")
		})
	}
}

func TestBlockValidate(t *testing.T) {
	bad := []loop.Block{
		{Type: "image"},
		{Type: loop.BlockToolUse, Name: "x"},
		{Type: loop.BlockToolUse, ID: "x"},
		{Type: loop.BlockToolUse, ID: "x", Name: "y", Input: json.RawMessage(`{`)},
		{Type: loop.BlockToolResult},
	}
	for _, b := range bad {
		assert.Error(t, b.Validate(), "%+v", b)
	}
}

func TestSuspendedStateRoundTripIsByteForByte(t *testing.T) {
	_, st := heldTurn(t, &execLog{})
	st.Transcript.Messages = append([]loop.Message{loop.UserText(`quotes " <tags> & ünïcode`)}, st.Transcript.Messages...)
	first, err := st.Encode()
	require.NoError(t, err)
	decoded, err := loop.DecodeState(first)
	require.NoError(t, err)
	second, err := decoded.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(first), string(second))

	ref, gz, err := runs.EncodeBlob(st.RunID, first)
	require.NoError(t, err)
	plain, err := runs.DecodeBlob(ref, gz)
	require.NoError(t, err)
	fromGz, err := loop.DecodeState(plain)
	require.NoError(t, err)
	third, err := fromGz.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(first), string(third))
}

// TestSuspendedStateGoldenV2 keeps schema version 2 readable: a state written
// by an earlier build must still decode and resume.
func TestSuspendedStateGoldenV2(t *testing.T) {
	path := filepath.Join("testdata", "state_v2.json")
	log := &execLog{}
	r, st := heldTurn(t, log)
	if *update {
		enc, err := st.Encode()
		require.NoError(t, err)
		var pretty bytes.Buffer
		require.NoError(t, json.Indent(&pretty, enc, "", "  "))
		require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	golden, err := loop.DecodeState(raw)
	require.NoError(t, err)
	assert.Equal(t, st.TurnDigest, golden.TurnDigest, "digest algorithm unchanged")
	assert.Equal(t, st.ToolHashes, golden.ToolHashes, "definition hash algorithm unchanged")
	out, err := r.Resume(context.Background(), golden, loop.Decision{TurnDigest: golden.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
}

// TestSuspendedStateGoldenV1: a version 1 state (digest over the calls
// only, written before the digest bound run and suspension) still resumes
// with its own digest, and refuses any other.
func TestSuspendedStateGoldenV1(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "state_v1.json"))
	require.NoError(t, err)
	golden, err := loop.DecodeState(raw)
	require.NoError(t, err)
	require.Equal(t, 1, golden.SchemaVersion)
	want, err := golden.ExpectedDigest()
	require.NoError(t, err)
	assert.Equal(t, want, golden.TurnDigest, "version 1 digest algorithm unchanged")
	r, _ := heldTurn(t, &execLog{})
	bound, _ := loop.TurnDigest(golden.RunID, golden.SuspensionID, golden.PendingCalls)
	_, err = r.Resume(context.Background(), golden, loop.Decision{TurnDigest: bound, Action: loop.ActionApprove})
	assert.ErrorIs(t, err, loop.ErrDigestMismatch)
	out, err := r.Resume(context.Background(), golden, loop.Decision{TurnDigest: golden.TurnDigest, Action: loop.ActionApprove})
	require.NoError(t, err)
	assert.Equal(t, loop.ReasonCompleted, out.Reason)
}

func TestDecodeStateRefusesUnknownVersion(t *testing.T) {
	_, err := loop.DecodeState([]byte(`{"schema_version":4,"run_id":"x"}`))
	assert.ErrorIs(t, err, loop.ErrSchemaVersion)
	// Version 3 is the hand-over layout: without a hand-over it is refused,
	// and so is a hand-over in a version 2 state.
	_, err = loop.DecodeState([]byte(`{"schema_version":3,"run_id":"x"}`))
	assert.ErrorIs(t, err, loop.ErrSchemaVersion)
	_, err = loop.DecodeState([]byte(`{"schema_version":2,"run_id":"x","hand_over":{"calls":[]}}`))
	assert.ErrorIs(t, err, loop.ErrSchemaVersion)
	_, err = loop.DecodeState([]byte(`{"run_id":"x"}`))
	assert.ErrorIs(t, err, loop.ErrSchemaVersion)
	_, err = loop.DecodeState([]byte(`not json`))
	assert.Error(t, err)
	assert.NotErrorIs(t, err, loop.ErrSchemaVersion)
	// A later version may change the shape: it is still refused as a
	// version this build does not read, not as a malformed state.
	_, err = loop.DecodeState([]byte(`{"schema_version":9,"transcript":"a string now"}`))
	assert.ErrorIs(t, err, loop.ErrSchemaVersion)
	// A known version that does not decode is malformed.
	_, err = loop.DecodeState([]byte(`{"schema_version":2,"transcript":"a string"}`))
	require.Error(t, err)
	assert.NotErrorIs(t, err, loop.ErrSchemaVersion)
	assert.Contains(t, err.Error(), "decode suspended state")
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1, "a":{"d":[1,2,{"z":0,"y":1}],"c":"x"}}`, `{"a":{"c":"x","d":[1,2,{"y":1,"z":0}]},"b":1}`},
		{`{"n": 12345678901234567890.5}`, `{"n":12345678901234567890.5}`},
		{``, `{}`},
	}
	for _, tt := range tests {
		got, err := loop.CanonicalJSON(json.RawMessage(tt.in))
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(got))
	}
	_, err := loop.CanonicalJSON(json.RawMessage(`{} {}`))
	assert.Error(t, err)
}

func TestTurnDigestIgnoresKeyOrderButNotValues(t *testing.T) {
	a := []loop.PendingCall{{ID: "1", Name: "w", Input: json.RawMessage(`{"a":1,"b":2}`)}}
	b := []loop.PendingCall{{ID: "1", Name: "w", Input: json.RawMessage(`{ "b":2, "a":1 }`)}}
	c := []loop.PendingCall{{ID: "1", Name: "w", Input: json.RawMessage(`{"a":1,"b":3}`)}}
	da, _ := loop.TurnDigest("run-a", "s1", a)
	db, _ := loop.TurnDigest("run-a", "s1", b)
	dc, _ := loop.TurnDigest("run-a", "s1", c)
	assert.Equal(t, da, db)
	assert.NotEqual(t, da, dc)
	assert.Len(t, da, 64)
	// The digest binds run and suspension: the same turn in another run or
	// another suspension has another digest (issue #10 item 7).
	other, _ := loop.TurnDigest("run-b", "s1", a)
	assert.NotEqual(t, da, other, "another run")
	other, _ = loop.TurnDigest("run-a", "s2", a)
	assert.NotEqual(t, da, other, "another suspension")
	other, _ = loop.TurnDigest("run-a", "", a)
	assert.NotEqual(t, da, other)
}

func TestNewToolboxRefusesBadTools(t *testing.T) {
	ok := func(name string) loop.Tool {
		return &loop.FuncTool{Def: loop.Definition{Name: name, Effect: loop.EffectRead}}
	}
	tests := []struct {
		name  string
		tools []loop.Tool
	}{
		{"duplicate", []loop.Tool{ok("a"), ok("a")}},
		{"empty name", []loop.Tool{ok("")}},
		{"bad effect", []loop.Tool{&loop.FuncTool{Def: loop.Definition{Name: "x", Effect: "delete"}}}},
		{"schema not JSON", []loop.Tool{&loop.FuncTool{Def: loop.Definition{Name: "x", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{`)}}}},
		{"schema does not compile", []loop.Tool{&loop.FuncTool{Def: loop.Definition{Name: "x", Effect: loop.EffectRead, InputSchema: json.RawMessage(`{"type":12}`)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loop.NewToolbox(tt.tools...)
			assert.Error(t, err)
		})
	}
}

package apitest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
)

// uploadTools is a client tool whose schema takes any text: what a caller's
// upload or file-write tool looks like.
const uploadTools = `[{"name":"upload","description":"Stores a file in the caller's system","effect":"read",
 "input_schema":{"type":"object","properties":{"name":{"type":"string"},"data":{"type":"string"}},"required":["name","data"]}}]`

// uploadScript asks for two uploads in one turn, the first of text, then
// finishes.
func uploadScript(t *testing.T, text string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"content": []any{
			map[string]any{"type": "tool_use", "id": "c1", "name": "upload", "input": map[string]any{"name": "report.md", "data": text}},
			map[string]any{"type": "tool_use", "id": "c2", "name": "upload", "input": map[string]any{"name": "note.txt", "data": "short"}},
		}},
		map[string]any{"content": []any{map[string]any{"type": "text", "text": "Uploaded."}}},
	}})
	require.NoError(t, err)
	return string(b)
}

// runLargeClientCall: a client call whose input is size bytes of text is
// handed over (before, over 64 KiB of inputs ended the run
// FAILED/internal_error); GET /runs/{id} shows it shortened, marked, with
// its size and the URL of the whole input, which the API (page by page),
// the Go client and the CLI's source of truth give back to the last byte;
// the results go in and the run completes.
func runLargeClientCall(t *testing.T, size int, opts ...func(*apitest.Options)) {
	text := markdown(size)
	models := &modelLog{}
	o := apitest.Options{Script: uploadScript(t, text), Observe: models.observe, Principals: []string{"alice", "carol", "dave"}}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	status, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT,
		`{"prompt":"upload the report","approvers":["carol"],"tool_executors":["carol"],"client_tools":`+uploadTools+`}`)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	id := run["id"].(string)
	run = waitStatus(t, s, c, id, "WAITING_FOR_TOOL_RESULTS")
	tr := run["tool_results"].(map[string]any)
	calls := tr["calls"].([]any)
	require.Len(t, calls, 2)
	big, small := calls[0].(map[string]any), calls[1].(map[string]any)
	assert.Equal(t, true, big["input_truncated"])
	assert.Equal(t, "/runs/"+id+"/calls/c1?part=input", big["input_url"])
	assert.Contains(t, big["input"], "name", "the shortened input keeps the short values")
	assert.Equal(t, "report.md", big["input"].(map[string]any)["name"])
	assert.Nil(t, small["input_truncated"])
	assert.Nil(t, small["input_url"])
	assert.Equal(t, map[string]any{"name": "note.txt", "data": "short"}, small["input"])
	row, _ := json.Marshal(calls)
	assert.LessOrEqual(t, len(row), runs.MaxHandOverCallsSize+1024, "GET /runs shows a bounded summary")

	// The API: every byte of the input, page by page, for the executor.
	var got strings.Builder
	u, pages := big["input_url"].(string), 0
	for u != "" {
		st, page, _ := call(t, s, c, "GET", u, "carol", "", "")
		require.Equal(t, http.StatusOK, st, "%v", page)
		assert.Equal(t, tr["tool_results_id"], page["tool_results_id"])
		assert.Nil(t, page["suspension_id"])
		assert.Equal(t, "upload", page["tool"])
		got.WriteString(page["text"].(string))
		pages++
		u = ""
		if next, ok := page["next_offset"].(float64); ok {
			u = fmt.Sprintf("/runs/%s/calls/c1?part=input&offset=%d", id, int(next))
		}
	}
	assert.Equal(t, big["input_size"], float64(got.Len()), "input_size is the whole input's")
	var in struct{ Name, Data string }
	require.NoError(t, json.Unmarshal([]byte(got.String()), &in))
	assert.True(t, in.Data == text, "the API gives the whole input (%d bytes of text, want %d)", len(in.Data), len(text))
	t.Logf("a client call of %d bytes of text: input %d bytes in %d page(s) of the API; %d bytes of summary on the run", size, got.Len(), pages, len(row))

	// The Go client reads it whole too, and takes a short input as is.
	gc, err := client.New(s.URL, client.WithBearerToken(s.Token("carol")), client.WithHTTPClient(c))
	require.NoError(t, err)
	r, err := gc.Run(t.Context(), id)
	require.NoError(t, err)
	whole, err := gc.ClientCallInput(t.Context(), id, r.ToolResults.Calls[0])
	require.NoError(t, err)
	assert.True(t, string(whole) == got.String(), "client.ClientCallInput gives the whole input")
	short, err := gc.ClientCallInput(t.Context(), id, r.ToolResults.Calls[1])
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"note.txt","data":"short"}`, string(short))

	// Refusals: a handed-over call has no preview; an unknown call; a stranger.
	for _, tt := range []struct {
		path, who string
		want      int
	}{
		{"/runs/" + id + "/calls/c1?part=preview", "carol", http.StatusUnprocessableEntity},
		{"/runs/" + id + "/calls/c9?part=input", "carol", http.StatusNotFound},
		{"/runs/" + id + "/calls/c1?part=input", "dave", http.StatusForbidden},
	} {
		st, out, _ := call(t, s, c, "GET", tt.path, tt.who, "", "")
		assert.Equal(t, tt.want, st, "%s as %s: %v", tt.path, tt.who, out)
	}

	// The results: the largest one result may be goes in; the run completes.
	answer := strings.Repeat("r", runs.MaxToolResultSize)
	status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/tool-results", "carol", jsonCT,
		submission(tr["tool_results_id"].(string), result("c1", answer), result("c2", "stored")))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	run = waitStatus(t, s, c, id, "COMPLETED")
	assert.Equal(t, "Uploaded.", run["output"].(map[string]any)["text"])
	seen, content := models.results()
	assert.Equal(t, map[string]int{"c1": 1, "c2": 1}, seen)
	assert.True(t, content["c1"] == answer, "the model got the whole result")
	st, _, _ := call(t, s, c, "GET", "/runs/"+id+"/calls/c1?part=input", "carol", "", "")
	assert.Equal(t, http.StatusConflict, st, "a settled run holds no calls")
}

//agentgate:megabytes
func TestClientCallOf1MiBIsHandedOverShownWholeAndCompletes(t *testing.T) {
	runLargeClientCall(t, 1<<20)
}

func TestClientCallOf100KiBIsHandedOverShownWholeAndCompletes(t *testing.T) {
	runLargeClientCall(t, 100<<10)
}

// TestClientCallOverTheStateLimitEndsStateTooLarge: a client call whose
// input makes the state too large for its blob ends the run
// FAILED/state_too_large, naming the call and the limit (before:
// FAILED/internal_error, or a worker error over and over); nothing is
// handed over.
//
//agentgate:megabytes
func TestClientCallOverTheStateLimitEndsStateTooLarge(t *testing.T) {
	s := start(t, apitest.Options{Script: uploadScript(t, incompressible(3<<20))})
	c := s.Client(t)
	status, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"upload","approvers":["bob"],"client_tools":`+uploadTools+`}`)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	run = waitStatus(t, s, c, run["id"].(string), "FAILED")
	assert.Equal(t, "state_too_large", run["termination_reason"])
	assert.Nil(t, run["tool_results"])
	detail := run["output"].(map[string]any)["detail"]
	assert.Contains(t, detail, fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	assert.Contains(t, detail, "call c1 (upload) input ")
}

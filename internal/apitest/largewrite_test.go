package apitest_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/runs"
)

// markdown returns n bytes of markdown-like text (lines of words, with the
// characters that need escaping in JSON and HTML), ending in a newline.
func markdown(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Section %d\n\nThe \"Team\" plan <b>costs</b> 12 EUR & more + tax, 'per' seat; line %d of the page.\n", i, i)
	}
	s := b.String()[:n-1]
	return s + "\n"
}

// writeScript is a scripted model whose first turn writes each text to
// pages/big-<i>.md, then finishes.
func writeScript(t *testing.T, texts ...string) string {
	t.Helper()
	var uses []map[string]any
	for i, text := range texts {
		uses = append(uses, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_w%d", i), "name": docstore.ToolWriteDocument,
			"input": map[string]any{"path": fmt.Sprintf("pages/big-%d.md", i), "text": text}})
	}
	b, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"content": uses},
		map[string]any{"content": []any{map[string]any{"type": "text", "text": "Written."}}},
	}})
	require.NoError(t, err)
	return string(b)
}

// newDocDiff is the document tools' preview of creating path with text.
func newDocDiff(path, text string) string {
	lines := strings.SplitAfter(text, "\n")
	lines = lines[:len(lines)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", path, len(lines))
	for _, l := range lines {
		b.WriteString("+" + l)
	}
	return b.String()
}

// get fetches a page or JSON body as principal ("" = none).
func get(t *testing.T, s *apitest.Server, c *http.Client, method, url, principal string) (int, string) {
	t.Helper()
	caller := &apitest.Caller{HTTP: c} // url is absolute
	if principal != "" {
		caller.Token = s.Token(principal)
	}
	r := caller.Call(t, method, url, "", "")
	return r.Status, string(r.Body)
}

var (
	preRE  = regexp.MustCompile(`(?s)<pre>(.*?)</pre>`)
	nextRE = regexp.MustCompile(`<a href="(\?[^"]*)"><strong>Next part</strong>`)
)

// runLargeWrite: a write_document of size bytes suspends; GET /runs/{id}
// shows a bounded summary marked truncated; GET /runs/{id}/calls/{call_id}
// and the approval page give every byte of the preview and input; the
// approved write leaves exactly the text in the document.
func runLargeWrite(t *testing.T, size int, opts ...func(*apitest.Options)) {
	text := markdown(size)
	o := apitest.Options{Script: writeScript(t, text)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	status, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"write the page","approvers":["bob","ops@example.com"]}`)
	require.Equal(t, 202, status)
	id := run["id"].(string)
	run = waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
	pending := run["pending"].(map[string]any)
	calls := pending["calls"].([]any)
	require.Len(t, calls, 1)
	sum := calls[0].(map[string]any)
	want := newDocDiff("pages/big-0.md", text)
	assert.Equal(t, true, sum["preview_truncated"])
	assert.Equal(t, float64(len(want)), sum["preview_size"])
	assert.Equal(t, true, sum["input_truncated"])
	assert.Contains(t, sum["input"], "path", "the shortened input keeps the path")
	row, _ := json.Marshal(calls)
	assert.LessOrEqual(t, len(row), runs.MaxPendingCallsSize+1024)

	// The API: every byte of the preview and of the input, page by page.
	for part, whole := range map[string]string{"preview": want, "input": ""} {
		var got strings.Builder
		offset, pages := 0, 0
		for {
			st, page, _ := call(t, s, c, "GET", fmt.Sprintf("/runs/%s/calls/toolu_w0?part=%s&offset=%d", id, part, offset), "bob", "", "")
			require.Equal(t, 200, st, "%v", page)
			assert.Equal(t, float64(offset), page["offset"])
			got.WriteString(page["text"].(string))
			pages++
			next, ok := page["next_offset"].(float64)
			if !ok {
				break
			}
			offset = int(next)
		}
		if part == "preview" {
			assert.True(t, got.String() == whole, "the API's %s is the whole diff (%d bytes, want %d)", part, got.Len(), len(whole))
		} else {
			var in struct{ Path, Text string }
			require.NoError(t, json.Unmarshal([]byte(got.String()), &in))
			assert.True(t, in.Text == text, "the API's input holds the whole text")
		}
		t.Logf("%s of a %d-byte write: %d bytes in %d page(s) of the API", part, size, got.Len(), pages)
	}

	// The approval page: the summary links to the whole preview, which the
	// approver reads (page by page) to the last byte.
	links := s.WaitLinks(t, "ops@example.com", 1)
	require.Len(t, links, 1)
	st, page := get(t, s, c, "GET", links[0], "")
	require.Equal(t, 200, st)
	assert.Contains(t, page, fmt.Sprintf("Show the whole preview (%d bytes)", len(want)))
	u := links[0] + "?call=toolu_w0&part=preview"
	var shown strings.Builder
	pages := 0
	for u != "" {
		st, page = get(t, s, c, "GET", u, "")
		require.Equal(t, 200, st)
		m := preRE.FindStringSubmatch(page)
		require.NotNil(t, m, "the page shows the text in <pre>")
		shown.WriteString(html.UnescapeString(m[1]))
		pages++
		u = ""
		if n := nextRE.FindStringSubmatch(page); n != nil {
			u = links[0] + html.UnescapeString(n[1])
		}
	}
	assert.True(t, shown.String() == want, "the approval page shows every byte of the preview (%d bytes, want %d)", shown.Len(), len(want))
	t.Logf("preview of a %d-byte write: %d page(s) on the approval page", size, pages)

	// Approve; the document holds exactly the text.
	status, _, _ = call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+pending["turn_digest"].(string)+`","action":"approve"}`)
	require.Equal(t, 202, status)
	waitStatus(t, s, c, id, "COMPLETED")
	doc, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "big-0.md"))
	require.NoError(t, err)
	assert.True(t, string(doc) == text, "the document holds exactly the text (%d bytes, want %d)", len(doc), len(text))
}

func TestWrite60KBSuspendsShowsEveryByteAndCompletes(t *testing.T) { runLargeWrite(t, 60<<10) }

//agentgate:megabytes
func TestWriteOfTheLargestDocumentSuspendsShowsEveryByteAndCompletes(t *testing.T) {
	runLargeWrite(t, docstore.MaxDocumentBytes)
}

// incompressible returns n bytes of lines of random base64.
func incompressible(n int) string {
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	enc := base64.StdEncoding.EncodeToString(raw)
	var b strings.Builder
	for i := 0; b.Len() < n-1; i += 76 {
		b.WriteString(enc[i:min(i+76, len(enc))] + "\n")
	}
	return b.String()[:n-1] + "\n"
}

// runStateTooLarge: three writes of the largest document, of text gzip
// cannot shrink, make a state over the blob limit: the run ends
// FAILED/state_too_large naming a call and the limit; nothing is written.
func runStateTooLarge(t *testing.T, opts ...func(*apitest.Options)) {
	big := incompressible(docstore.MaxDocumentBytes)
	o := apitest.Options{Script: writeScript(t, big, big, big)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	status, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"write three pages","approvers":["bob"]}`)
	require.Equal(t, 202, status)
	run = waitStatus(t, s, c, run["id"].(string), "FAILED")
	assert.Equal(t, "state_too_large", run["termination_reason"])
	out := run["output"].(map[string]any)
	assert.Contains(t, out["detail"], fmt.Sprintf("over the %d-byte limit", runs.MaxStateSize))
	assert.Contains(t, out["detail"], "(write_document) input ")
	_, err := os.Stat(filepath.Join(s.Dir, "content", "pages", "big-0.md"))
	assert.True(t, os.IsNotExist(err), "nothing was written")
}

//agentgate:megabytes
func TestStateOverTheLimitEndsStateTooLarge(t *testing.T) { runStateTooLarge(t) }

// The sub-resource's refusals, and the approval page's.
func TestHeldCallRefusals(t *testing.T) {
	s := start(t, apitest.Options{Script: writeScript(t, markdown(30<<10))})
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"write","approvers":["bob","ops@example.com"]}`)
	id := run["id"].(string)
	waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
	path := "/runs/" + id + "/calls/toolu_w0"
	for _, tt := range []struct {
		name, path, who string
		want            int
	}{
		{"no token", path, "", 401},
		{"not a party", path, "carol", 403},
		{"no such run", "/runs/nope/calls/toolu_w0", "bob", 404},
		{"no such call", "/runs/" + id + "/calls/toolu_x", "bob", 404},
		{"bad part", path + "?part=everything", "bob", 400},
		{"offset not a number", path + "?offset=x", "bob", 400},
		{"offset past the end", path + "?offset=99999999", "bob", 422},
		{"wrong method", path, "bob", 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			method := "GET"
			if tt.want == 405 {
				method = "POST"
			}
			st, _, _ := call(t, s, c, method, tt.path, tt.who, "", "")
			assert.Equal(t, tt.want, st)
		})
	}
	link := s.WaitLinks(t, "ops@example.com", 1)[0]
	for _, m := range []string{"GET", "HEAD"} {
		st, _ := get(t, s, c, m, link+"?call=toolu_w0&part=x", "")
		assert.Equal(t, 400, st)
		st, _ = get(t, s, c, m, link+"?call=toolu_w0&offset=99999999", "")
		assert.Equal(t, 422, st)
	}
	st, _ := get(t, s, c, "GET", link+"?call=toolu_x", "")
	assert.Equal(t, 404, st)

	call(t, s, c, "POST", "/runs/"+id+"/cancel", "alice", "", "")
	st, _, _ = call(t, s, c, "GET", path, "bob", "", "")
	assert.Equal(t, 409, st, "a run that no longer waits has no held calls to show")
}

package apitest_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/loop"
)

// The outside tester's report, end to end through the local server: the
// approver reviews a write_document whose preview says "no change", someone
// else then changes the document, the approver approves. The write must not
// overwrite that change: the model is told the document changed after
// review and nothing was changed, and the run's events record the refusal.
func TestApprovedWriteOfADocumentChangedAfterReviewIsRefused(t *testing.T) {
	script := `{"turns":[
 {"content":[{"type":"tool_use","id":"toolu_w","name":"write_document","input":{"path":"pages/pricing.md","text":` + jsonString(apitest.Pricing) + `}}]},
 {"content":[{"type":"text","text":"Done."}]}]}`
	var (
		mu      sync.Mutex
		results []loop.Block
	)
	s := start(t, apitest.Options{Script: script, Observe: func(req loop.ModelRequest) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == loop.BlockToolResult && b.ToolUseID == "toolu_w" {
					results = append(results, b)
				}
			}
		}
	}})
	c := s.Client(t)
	status, run, _ := call(t, s, c, "POST", "/runs", "alice", jsonCT, `{"prompt":"make sure the page is right","approvers":["bob"]}`)
	require.Equal(t, 202, status)
	id := run["id"].(string)
	run = waitStatus(t, s, c, id, "WAITING_FOR_APPROVAL")
	pending := run["pending"].(map[string]any)
	sum := pending["calls"].([]any)[0].(map[string]any)
	require.Equal(t, "no change: pages/pricing.md already has this text", sum["preview"])

	// Someone else edits the page while the run waits.
	page := filepath.Join(s.Dir, "content", "pages", "pricing.md")
	const theirs = "# Pricing\n\n- Team: 10 EUR\n- Enterprise: ask us\n"
	require.NoError(t, os.WriteFile(page, []byte(theirs), 0o600))

	status, body, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+pending["turn_digest"].(string)+`","action":"approve"}`)
	require.Equal(t, 202, status, "%v", body)
	waitStatus(t, s, c, id, "COMPLETED")

	got, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, theirs, string(got), "the other change is kept")

	mu.Lock()
	require.NotEmpty(t, results, "the model was given the call's result")
	res := results[len(results)-1]
	mu.Unlock()
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, `document "pages/pricing.md" changed after the approver reviewed this call; nothing was changed`)

	status, evs, _ := call(t, s, c, "GET", "/runs/"+id+"/events?limit=100", "alice", "", "")
	require.Equal(t, 200, status)
	var executed []map[string]any
	for _, e := range evs["events"].([]any) {
		ev := e.(map[string]any)
		if ev["type"] == "tool_executed" {
			executed = append(executed, ev["data"].(map[string]any))
		}
	}
	require.Len(t, executed, 1)
	assert.Equal(t, "toolu_w", executed[0]["call_id"])
	assert.Equal(t, true, executed[0]["is_error"])
	assert.Equal(t, true, executed[0]["base_changed"], "the trail shows the refusal: %v", executed[0])
	assert.Equal(t, "approve", executed[0]["action"])
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

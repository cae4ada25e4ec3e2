package apitest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhook"
)

// clientScript is the turn: a server read (s1), a client read (c1)
// and a client write that needs approval (c2), then the final answer.
const clientScript = `{"turns":[
 {"content":[{"type":"text","text":"Checking the page and the stock, then ordering."},
             {"type":"tool_use","id":"s1","name":"read_document","input":{"path":"pages/pricing.md"}},
             {"type":"tool_use","id":"c1","name":"lookup_stock","input":{"sku":"X-1"}},
             {"type":"tool_use","id":"c2","name":"place_order","input":{"sku":"X-1","qty":2}}],
  "usage":{"input_tokens":100,"output_tokens":20}},
 {"content":[{"type":"text","text":"Ordered."}],"usage":{"input_tokens":150,"output_tokens":5}}
]}`

// clientTools are the caller's two tools, as POST /runs takes them.
const clientTools = `[
 {"name":"lookup_stock","description":"Stock of a SKU in the caller's warehouse","effect":"read",
  "input_schema":{"type":"object","properties":{"sku":{"type":"string","minLength":1}},"required":["sku"],"additionalProperties":false}},
 {"name":"place_order","description":"Orders from the caller's supplier","effect":"write",
  "input_schema":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"],"additionalProperties":false}}]`

// modelLog keeps every request the model got.
type modelLog struct {
	mu   sync.Mutex
	reqs []loop.ModelRequest
}

func (l *modelLog) observe(req loop.ModelRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
}

// results counts, in the last request, the tool_results per call id, and
// returns their contents.
func (l *modelLog) results() (map[string]int, map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, content := map[string]int{}, map[string]string{}
	if len(l.reqs) == 0 {
		return n, content
	}
	for _, m := range l.reqs[len(l.reqs)-1].Messages {
		for _, b := range m.Content {
			if b.Type == loop.BlockToolResult {
				n[b.ToolUseID]++
				content[b.ToolUseID] = b.Content
			}
		}
	}
	return n, content
}

func (l *modelLog) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// ctCall is call with JSON bodies and the server's own client.
func ctCall(t *testing.T, s *apitest.Server, method, path, who, body string) (int, map[string]any) {
	t.Helper()
	ct := ""
	if body != "" {
		ct = jsonCT
	}
	status, out, _ := call(t, s, s.Client(t), method, path, who, ct, body)
	return status, out
}

func getRun(t *testing.T, s *apitest.Server, id string) map[string]any {
	t.Helper()
	status, run := ctCall(t, s, "GET", "/runs/"+id, "alice", "")
	require.Equal(t, http.StatusOK, status, "%v", run)
	return run
}

// settle waits for the in-process workers and returns the run.
func settle(t *testing.T, s *apitest.Server, id string) map[string]any {
	t.Helper()
	s.App.Dispatcher.Wait()
	return getRun(t, s, id)
}

func submission(id string, results ...string) string {
	return `{"tool_results_id":"` + id + `","results":[` + strings.Join(results, ",") + `]}`
}

func result(callID, content string) string {
	b, _ := json.Marshal(map[string]any{"call_id": callID, "content": content})
	return string(b)
}

func eventCount(t *testing.T, s *apitest.Server, id string) int {
	t.Helper()
	evs, err := s.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	return len(evs)
}

// TestClientToolsStory is the story on the local server (embedded
// store): a turn with a server read, a client read and a client write that
// needs approval → approval (with an edit) → the caller gets both client
// calls → bad submissions change nothing → 20 concurrent submissions, one
// wins → the run completes and the model saw every result exactly once.
func TestClientToolsStory(t *testing.T) { runClientToolsStory(t, nil) }

func runClientToolsStory(t *testing.T, store func(*apitest.Options)) {
	_, signer, hook := newSecret(t)
	rv := &receiver{t: t, hook: hook}
	hs := httptest.NewServer(rv)
	defer hs.Close()
	models := &modelLog{}
	s := startOn(t, store, apitest.Options{
		Script: clientScript, Observe: models.observe, Validator: validator,
		Principals: []string{"alice", "bob", "carol", "dave"},
		Webhooks: &app.Webhooks{Signer: signer,
			Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}},
	})
	body := `{"prompt":"Order two X-1 if they are in stock.","approvers":["bob"],"tool_executors":["carol"],` +
		`"tool_results_ttl_seconds":600,"webhook_url":"` + hs.URL + `/hook","client_tools":` + clientTools + `}`
	status, run := ctCall(t, s, "POST", "/runs", "alice", body)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	id := run["id"].(string)
	assert.Equal(t, "/runs/"+id+"/tool-results", run["links"].(map[string]any)["tool_results"])

	// The whole turn waits for the approval of the client write.
	run = settle(t, s, id)
	require.Equal(t, "WAITING_FOR_APPROVAL", run["status"], "%v", run)
	pending := run["pending"].(map[string]any)
	needs := map[string]bool{}
	for _, c := range pending["calls"].([]any) {
		c := c.(map[string]any)
		needs[c["id"].(string)] = c["needs_approval"].(bool)
	}
	assert.Equal(t, map[string]bool{"s1": false, "c1": false, "c2": true}, needs)
	assert.Equal(t, 1, models.calls(), "nothing of the turn ran: the model was asked once")
	types := eventTypes(t, s, id)
	assert.NotContains(t, types, runs.EventToolExecuted, "the server read waits for the approval too")

	// bob approves, raising the order to three.
	status, out := ctCall(t, s, "POST", "/runs/"+id+"/decision", "bob",
		`{"turn_digest":"`+pending["turn_digest"].(string)+`","calls":[{"call_id":"c2","action":"edit","input":{"sku":"X-1","qty":3}}]}`)
	require.Equal(t, http.StatusAccepted, status, "%v", out)

	// The server read ran; both client calls are handed over.
	run = settle(t, s, id)
	require.Equal(t, "WAITING_FOR_TOOL_RESULTS", run["status"], "%v", run)
	assert.Nil(t, run["pending"])
	tr := run["tool_results"].(map[string]any)
	trID := tr["tool_results_id"].(string)
	require.NotEmpty(t, trID)
	assert.NotEmpty(t, tr["deadline"])
	calls, _ := json.Marshal(tr["calls"])
	assert.JSONEq(t, `[{"id":"c1","name":"lookup_stock","input":{"sku":"X-1"},"input_size":13},{"id":"c2","name":"place_order","input":{"qty":3,"sku":"X-1"},"input_size":21,"edited":true}]`, string(calls),
		"the caller gets both client calls with the final (edited) input")
	types = eventTypes(t, s, id)
	assert.Equal(t, 1, countOf(types, runs.EventToolExecuted), "the server read ran once")
	assert.Equal(t, 1, countOf(types, runs.EventHandedOver), "one hand-over")
	assert.Equal(t, 1, models.calls(), "the model waits for the results")
	// A tool executor may read the run; the approver too; a stranger not.
	for who, want := range map[string]int{"carol": 200, "bob": 200, "dave": 403} {
		status, _ := ctCall(t, s, "GET", "/runs/"+id, who, "")
		assert.Equal(t, want, status, who)
	}

	// The webhook tells the caller.
	sweep(t, s)
	var waiting *delivered
	for _, d := range rv.deliveries() {
		if d.Payload.Type == webhook.EventWaitingForToolResults {
			waiting = &d
		}
	}
	require.NotNil(t, waiting, "run.waiting_for_tool_results was delivered")
	assert.True(t, waiting.Verified)
	assert.Equal(t, trID, waiting.Payload.Data.ToolResultsID)
	assert.Equal(t, runs.StatusWaitingForToolResults, waiting.Payload.Data.Status)
	assert.NotContains(t, waiting.Body, "X-1", "the payload carries no tool arguments")

	// Bad submissions: each refused with its 4xx, nothing changed.
	before := settle(t, s, id)
	evBefore := eventCount(t, s, id)
	good := submission(trID, result("c1", "5 in stock"), result("c2", "order 77 placed"))
	big := strings.Repeat("x", runs.MaxToolResultSize+1)
	var seventeen, sixtyfive []string
	for i := range 17 {
		seventeen = append(seventeen, result(fmt.Sprintf("c%d", i), strings.Repeat("y", runs.MaxToolResultSize)))
	}
	for i := range 65 {
		sixtyfive = append(sixtyfive, result(fmt.Sprintf("c%d", i), "z"))
	}
	bad := []struct {
		name, who, ctype, body string
		want                   int
	}{
		{"unauthenticated", "", jsonCT, good, 401},
		{"an approver is not a tool executor", "bob", jsonCT, good, 403},
		{"a stranger", "dave", jsonCT, good, 403},
		{"malformed JSON", "alice", jsonCT, `{"tool_results_id":`, 400},
		{"unknown field", "alice", jsonCT, strings.Replace(good, `"results"`, `"colour":"red","results"`, 1), 400},
		{"results not an array", "alice", jsonCT, `{"tool_results_id":"` + trID + `","results":{}}`, 400},
		{"call id not a string", "alice", jsonCT, `{"tool_results_id":"` + trID + `","results":[{"call_id":1,"content":"x"}]}`, 400},
		{"not JSON", "alice", "text/plain", good, 415},
		{"JSON in another charset", "alice", "application/json; charset=latin1", good, 415},
		{"a result without content", "alice", jsonCT, `{"tool_results_id":"` + trID + `","results":[{"call_id":"c1"},` + result("c2", "b") + `]}`, 422},
		{"a result with null content (a wrong type)", "alice", jsonCT, `{"tool_results_id":"` + trID + `","results":[{"call_id":"c1","content":null},` + result("c2", "b") + `]}`, 400},
		{"no tool-results id", "alice", jsonCT, `{"results":[` + result("c1", "a") + `,` + result("c2", "b") + `]}`, 422},
		{"wrong tool-results id", "alice", jsonCT, submission("tr-other", result("c1", "a"), result("c2", "b")), 409},
		{"no results", "alice", jsonCT, submission(trID), 422},
		{"a result missing", "alice", jsonCT, submission(trID, result("c1", "a")), 422},
		{"a server call's id", "alice", jsonCT, submission(trID, result("s1", "x"), result("c1", "a"), result("c2", "b")), 422},
		{"an unknown call id", "alice", jsonCT, submission(trID, result("c1", "a"), result("c9", "b")), 422},
		{"a call twice", "alice", jsonCT, submission(trID, result("c1", "a"), result("c1", "a"), result("c2", "b")), 422},
		{"an empty call id", "alice", jsonCT, submission(trID, result("", "a"), result("c2", "b")), 422},
		{"a result over 64 KiB", "carol", jsonCT, submission(trID, result("c1", big), result("c2", "b")), 413},
		{"over 1 MiB of results together", "carol", jsonCT, submission(trID, seventeen...), 413},
		{"more than 64 results", "carol", jsonCT, submission(trID, sixtyfive...), 413},
		{"a body over 2 MiB", "carol", jsonCT, submission(trID, result("c1", strings.Repeat("q", 2<<20)), result("c2", "b")), 413},
		{"an unknown run", "alice", jsonCT, good, 404},
	}
	for _, tt := range bad {
		t.Run("bad submission/"+tt.name, func(t *testing.T) {
			path := "/runs/" + id + "/tool-results"
			if tt.name == "an unknown run" {
				path = "/runs/nope/tool-results"
			}
			status, out, _ := call(t, s, s.Client(t), "POST", path, tt.who, tt.ctype, tt.body)
			assert.Equal(t, tt.want, status, "%v", out)
			after := getRun(t, s, id)
			assert.Equal(t, before["version"], after["version"], "the row version is unchanged")
			assert.Equal(t, "WAITING_FOR_TOOL_RESULTS", after["status"])
			assert.Equal(t, evBefore, eventCount(t, s, id), "no event was written")
		})
	}
	t.Logf("%d kinds of bad submission refused with nothing changed", len(bad))

	// 20 concurrent submissions by the initiator and the tool executor:
	// exactly one wins.
	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		who := []string{"alice", "carol"}[i%2]
		wg.Go(func() {
			codes[i], _ = ctCall(t, s, "POST", "/runs/"+id+"/tool-results", who,
				submission(trID, result("c1", fmt.Sprintf("%d in stock", i)), result("c2", "order 77 placed")))
		})
	}
	wg.Wait()
	wins := 0
	for _, c := range codes {
		switch c {
		case http.StatusAccepted:
			wins++
		case http.StatusConflict:
		default:
			t.Errorf("a concurrent submission got %d, want 202 or 409", c)
		}
	}
	require.Equal(t, 1, wins, "exactly one submission wins: %v", codes)
	t.Logf("20 concurrent submissions: %d won, %d got 409", wins, n-wins)

	run = settle(t, s, id)
	require.Equal(t, "COMPLETED", run["status"], "%v", run)
	assert.Equal(t, "Ordered.", run["output"].(map[string]any)["text"])
	assert.Equal(t, 2, models.calls())
	seen, content := models.results()
	assert.Equal(t, map[string]int{"s1": 1, "c1": 1, "c2": 1}, seen, "the model saw every result exactly once")
	assert.Contains(t, content["s1"], "Team: 10 EUR", "the server read's result")
	assert.Regexp(t, `^\d+ in stock$`, content["c1"])
	assert.Contains(t, content["c2"], `the approver edited the arguments`)
	assert.Contains(t, content["c2"], "order 77 placed")
	types = eventTypes(t, s, id)
	assert.Equal(t, 1, countOf(types, runs.EventToolResults), "one tool_results event")
	assert.Equal(t, 1, countOf(types, runs.EventToolExecuted), "the server read never ran again")

	// After the run moved on, a submission is a conflict.
	status, _ = ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "alice", good)
	assert.Equal(t, http.StatusConflict, status)
}

// TestClientToolsExpire: a client read needs no approval and is handed over
// at once; a submission after the deadline is 410 (gone), the sweep ends the
// run EXPIRED/tool_results_expired, and a later submission is 410 as before the sweep.
func TestClientToolsExpire(t *testing.T) { runClientToolsExpire(t, nil) }

func runClientToolsExpire(t *testing.T, store func(*apitest.Options)) {
	clock := clocktest.New(time.Now().UTC())
	s := startOn(t, store, apitest.Options{Now: clock.Now, Validator: validator, Script: `{"turns":[
	 {"content":[{"type":"tool_use","id":"c1","name":"lookup_stock","input":{"sku":"A"}}]},
	 {"content":[{"type":"text","text":"never"}]}]}`})
	status, run := ctCall(t, s, "POST", "/runs", "alice",
		`{"prompt":"look","approvers":["bob"],"tool_results_ttl_seconds":60,"client_tools":`+clientTools+`}`)
	require.Equal(t, http.StatusAccepted, status, "%v", run)
	id := run["id"].(string)
	run = settle(t, s, id)
	require.Equal(t, "WAITING_FOR_TOOL_RESULTS", run["status"], "%v", run)
	trID := run["tool_results"].(map[string]any)["tool_results_id"].(string)
	deadline, err := time.Parse(time.RFC3339Nano, run["tool_results"].(map[string]any)["deadline"].(string))
	require.NoError(t, err)
	assert.Equal(t, clock.Now().Add(time.Minute).Truncate(time.Millisecond), deadline.UTC())

	clock.Advance(59 * time.Second)
	sweep(t, s)
	assert.Equal(t, "WAITING_FOR_TOOL_RESULTS", getRun(t, s, id)["status"], "not due yet")
	clock.Advance(time.Second)
	status, out := ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "alice", submission(trID, result("c1", "5")))
	assert.Equal(t, http.StatusGone, status, "%v", out)
	sweep(t, s)
	run = getRun(t, s, id)
	assert.Equal(t, "EXPIRED", run["status"])
	assert.Equal(t, "tool_results_expired", run["termination_reason"])
	assert.Nil(t, run["tool_results"])
	status, out = ctCall(t, s, "POST", "/runs/"+id+"/tool-results", "alice", submission(trID, result("c1", "5")))
	assert.Equal(t, http.StatusGone, status, "after the sweep too, a late submission is 410: %v", out)
}

// TestClientToolsRefusedAtStart: bad client_tools, tool_executors and
// windows are refused when the run is submitted, with the status rule.
func TestClientToolsRefusedAtStart(t *testing.T) {
	s := start(t, apitest.Options{})
	tool := func(name, effect, schema string) string {
		return `{"name":"` + name + `","effect":"` + effect + `","input_schema":` + schema + `}`
	}
	obj := `{"type":"object"}`
	with := func(extra string) string { return `{"prompt":"x","approvers":["bob"],` + extra + `}` }
	var many []string
	for i := range 65 {
		many = append(many, tool(fmt.Sprintf("t%d", i), "read", obj))
	}
	cases := []struct {
		name, body string
		want       int
	}{
		{"accepted", with(`"client_tools":[` + tool("lookup", "read", obj) + `],"tool_executors":["carol"],"tool_results_ttl_seconds":30`), 202},
		{"client tools not an array", with(`"client_tools":{}`), 400},
		{"unknown field in a tool", with(`"client_tools":[{"name":"a","effect":"read","input_schema":{},"colour":1}]`), 400},
		{"the name of a builtin tool", with(`"client_tools":[` + tool("read_document", "read", obj) + `]`), 422},
		{"an MCP-style name", with(`"client_tools":[` + tool("crm__add", "read", obj) + `]`), 422},
		{"a name with a dot", with(`"client_tools":[` + tool("a.b", "read", obj) + `]`), 422},
		{"an empty name", with(`"client_tools":[` + tool("", "read", obj) + `]`), 422},
		{"twice the same name", with(`"client_tools":[` + tool("a", "read", obj) + `,` + tool("a", "write", obj) + `]`), 422},
		{"an unknown effect", with(`"client_tools":[` + tool("a", "delete", obj) + `]`), 422},
		{"a schema that does not compile", with(`"client_tools":[` + tool("a", "read", `{"type":"object","properties":{"x":{"$ref":"#/nowhere"}}}`) + `]`), 422},
		{"a schema with a type that is not one", with(`"client_tools":[` + tool("a", "read", `{"type":"object","properties":{"x":{"type":"nope"}}}`) + `]`), 422},
		{"a schema with a bad type in a list", with(`"client_tools":[` + tool("a", "read", `{"type":"object","properties":{"x":{"type":["string","text"]}}}`) + `]`), 422},
		{"a schema of a string", with(`"client_tools":[` + tool("a", "read", `{"type":"string"}`) + `]`), 422},
		{"no schema", with(`"client_tools":[{"name":"a","effect":"read"}]`), 422},
		{"too many tools", with(`"client_tools":[` + strings.Join(many, ",") + `]`), 413},
		{"a description over 4 KiB", with(`"client_tools":[{"name":"a","effect":"read","input_schema":{},"description":"` + strings.Repeat("d", 4097) + `"}]`), 413},
		{"a schema over 16 KiB", with(`"client_tools":[` + tool("a", "read", `{"type":"object","description":"`+strings.Repeat("s", 16<<10)+`"}`) + `]`), 413},
		{"a group as executor, no directory", with(`"client_tools":[` + tool("a", "read", obj) + `],"tool_executors":["group:ops"]`), 422},
		{"an executor twice", with(`"client_tools":[` + tool("a", "read", obj) + `],"tool_executors":["Carol@Example.com","carol@example.com"]`), 422},
		{"executors without client tools", with(`"tool_executors":["carol"]`), 422},
		{"a window too short", with(`"client_tools":[` + tool("a", "read", obj) + `],"tool_results_ttl_seconds":5`), 422},
		{"a window too long", with(`"client_tools":[` + tool("a", "read", obj) + `],"tool_results_ttl_seconds":604801`), 422},
		{"a window that overflows", with(`"client_tools":[` + tool("a", "read", obj) + `],"tool_results_ttl_seconds":18446744134`), 422},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			status, out := ctCall(t, s, "POST", "/runs", "alice", tt.body)
			assert.Equal(t, tt.want, status, "%v", out)
		})
	}
}

func eventTypes(t *testing.T, s *apitest.Server, id string) []string {
	t.Helper()
	evs, err := s.App.Store.Events(t.Context(), id, 0, 1000)
	require.NoError(t, err)
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/httpapi"
	"github.com/agentgate/agentgate/internal/runs"
)

func loadEvent(t *testing.T, name string, replace ...string) events.APIGatewayProxyRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	s := strings.NewReplacer(replace...).Replace(string(b))
	var e events.APIGatewayProxyRequest
	require.NoError(t, json.Unmarshal([]byte(s), &e))
	return e
}

// TestStoryFromTestdataEvents drives start -> suspend -> decide -> resume ->
// complete with real-shaped API Gateway events (AWS_IAM identities).
func TestStoryFromTestdataEvents(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(loadEvent(t, "post-runs-iam.json"))
	require.Equal(t, 202, status, out)
	id := out["id"].(string)
	assert.Equal(t, "QUEUED", out["status"])
	assert.Equal(t, alice, out["initiator"])
	f.drain()

	status, out = f.call(loadEvent(t, "get-run-iam.json", "RUNID", id))
	require.Equal(t, 200, status, out)
	require.Equal(t, "WAITING_FOR_APPROVAL", out["status"])
	pending := out["pending"].(map[string]any)
	calls := pending["calls"].([]any)
	require.Len(t, calls, 2)
	write := calls[1].(map[string]any)
	assert.Equal(t, "write_document", write["tool"])
	assert.Equal(t, true, write["needs_approval"])
	assert.Contains(t, write["preview"], "+Team: 12 EUR")
	assert.Equal(t, "Team: 10 EUR\n", f.pricing(), "nothing written before the decision")

	status, out = f.call(loadEvent(t, "post-decision-iam.json", "RUNID", id, "DIGEST", pending["turn_digest"].(string)))
	require.Equal(t, 202, status, out)
	assert.Equal(t, "RESUMING", out["status"])
	assert.Equal(t, bob, out["decision"].(map[string]any)["by"])
	assert.Equal(t, "api", out["decision"].(map[string]any)["via"])
	f.drain()

	status, out = f.call(loadEvent(t, "get-run-iam.json", "RUNID", id))
	require.Equal(t, 200, status)
	assert.Equal(t, "COMPLETED", out["status"])
	assert.Equal(t, "Team: 12 EUR\n", f.pricing())

	status, out = f.call(req("GET", "/runs/"+id+"/events", bob, ""))
	require.Equal(t, 200, status)
	var types []string
	for _, e := range out["events"].([]any) {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	assert.Equal(t, []string{"run_started", "claimed", "model_turn", "suspended", "notified", "decision",
		"resumed", "tool_executed", "tool_executed", "model_turn", "settled"}, types)
}

func TestEventsPagination(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	status, out := f.call(withQuery(req("GET", "/runs/"+r.ID+"/events", alice, ""), "limit", "2"))
	require.Equal(t, 200, status)
	assert.Len(t, out["events"], 2)
	next := out["next"].(string)
	assert.Contains(t, next, "after=2")
	status, out = f.call(withQuery(req("GET", "/runs/"+r.ID+"/events", alice, ""), "after", "2", "limit", "100"))
	require.Equal(t, 200, status)
	assert.NotEmpty(t, out["events"])
	assert.Nil(t, out["next"])
}

// TestBadInput sends malformed and unauthorized requests: each gets the right
// 4xx with a JSON message, never a 5xx, and changes nothing.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	digest := r.TurnDigest
	dec := "/runs/" + r.ID + "/decision"
	big := `{"prompt":"` + strings.Repeat("x", 300<<10) + `","approvers":["b@example.com"]}`
	tests := []struct {
		name string
		req  events.APIGatewayProxyRequest
		want int
		msg  string
	}{
		{"start: no identity", req("POST", "/runs", "", `{"prompt":"x","approvers":["b@example.com"]}`), 401, "authentication required"},
		{"start: malformed JSON", req("POST", "/runs", alice, `{"prompt":`), 400, "JSON ends too early"},
		{"start: syntax error", req("POST", "/runs", alice, `{"prompt" "x"}`), 400, "malformed JSON"},
		{"start: wrong type", req("POST", "/runs", alice, `{"prompt":7,"approvers":["b@example.com"]}`), 400, `field "prompt" must be a string, not the number 7`},
		{"start: wrong type names JSON, not Go", req("POST", "/runs", alice, `{"prompt":"x","approvers":"b@example.com"}`), 400, `field "approvers" must be an array, not a string`},
		{"start: required_approvals 0 written out", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"required_approvals":0}`), 422, `required_approvals must be between 1 and`},
		{"start: unknown field", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"sudo":true}`), 400, `unknown field "sudo"`},
		{"start: empty body", req("POST", "/runs", alice, ``), 400, "body is empty"},
		{"start: trailing data", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"]} {}`), 400, "after the JSON object"},
		{"start: array body", req("POST", "/runs", alice, `[1]`), 400, "must be a JSON object"},
		{"start: null body", req("POST", "/runs", alice, ` null `), 400, "must be a JSON object, not null"},
		{"decide: null body", req("POST", dec, bob, `null`), 400, "must be a JSON object, not null"},
		{"decide: empty calls", req("POST", dec, bob, `{"turn_digest":"`+digest+`","action":"approve","calls":[]}`), 400, "calls is empty"},
		{"decide: empty calls alone", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[]}`), 400, "calls is empty"},
		{"decide: malformed digest", req("POST", dec, bob, `{"turn_digest":"xyz","action":"approve"}`), 400, "64 lowercase hex digits"},
		{"decide: uppercase digest", req("POST", dec, bob, `{"turn_digest":"`+strings.ToUpper(digest)+`","action":"approve"}`), 400, "64 lowercase hex digits"},
		{"start: huge body", req("POST", "/runs", alice, big), 413, "limit"},
		{"start: no approvers", req("POST", "/runs", alice, `{"prompt":"x"}`), 422, "approver"},
		{"start: prompt and messages", req("POST", "/runs", alice, `{"prompt":"x","messages":[{"role":"user","content":[{"type":"text","text":"y"}]}],"approvers":["b@example.com"]}`), 422, "not both"},
		{"start: no prompt", req("POST", "/runs", alice, `{"approvers":["b@example.com"]}`), 422, "prompt or messages"},
		{"start: bad approver", req("POST", "/runs", alice, `{"prompt":"x","approvers":["bob smith"]}`), 422, "approvers[0]"},
		{"start: duplicate approver", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com","b@example.com"]}`), 422, "twice"},
		{"start: duplicate webhook event type", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/a","webhook_events":["run.failed","run.completed","run.failed"]}`), 422, `webhook_events[2]: "run.failed" is listed twice`},
		{"start: empty webhook_url", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":""}`), 422, "webhook_url is empty: give an absolute https URL, or leave it out for no webhooks"},
		{"start: empty allowed_tools", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"allowed_tools":[]}`), 422, "allowed_tools is empty"},
		{"start: unknown tool", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"allowed_tools":["rm"]}`), 422, "unknown tool"},
		{"start: ttl too short", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":5}`), 422, "approval_ttl_seconds"},
		{"start: ttl overflows to 60 s", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":18446744134}`), 422, "approval_ttl_seconds"},
		{"start: negative ttl overflows to 24 h", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":-18446744013}`), 422, "approval_ttl_seconds"},
		{"start: negative ttl", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":-1}`), 422, "approval_ttl_seconds"},
		{"start: ttl too long", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":604801}`), 422, "approval_ttl_seconds"},
		// An integer beyond int64 is out of range like any other (422), with
		// the member's own range where it has one; it used to be 400 "must be
		// an integer, not the number 9223372036854775808".
		{"start: ttl beyond int64", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":99999999999999999999}`), 422, "approval_ttl_seconds must be between 60 and 604800"},
		{"start: ttl just beyond int64", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":9223372036854775808}`), 422, "approval_ttl_seconds must be between 60 and 604800"},
		{"start: ttl below int64", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":-9223372036854775809}`), 422, "approval_ttl_seconds must be between 60 and 604800"},
		{"start: max_iterations beyond int", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"max_iterations":9223372036854775808}`), 422, "max_iterations must be between 0 and 200"},
		{"start: max_tokens beyond int64 (no range of its own)", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"max_tokens":9223372036854775808}`), 422, `field "max_tokens" is out of range: 9223372036854775808 is more than the largest integer it takes, 9223372036854775807`},
		{"start: beyond int64 in a body malformed after it", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"max_tokens":9223372036854775808,"colour":1}`), 400, `field "max_tokens" must be an integer, not the number 9223372036854775808`},
		{"start: not written as an integer", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"approval_ttl_seconds":1e30}`), 400, `field "approval_ttl_seconds" must be an integer, not the number 1e30`},
		{"start: approver with display name", req("POST", "/runs", alice, `{"prompt":"x","approvers":["Bob <b@example.com>"]}`), 422, "approvers[0]"},
		{"start: approver with U+2028", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b\u2028@example.com"]}`), 422, "approvers[0]"},
		{"start: approver with U+0085", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com\u0085"]}`), 422, "approvers[0]"},
		{"start: approver with CRLF", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com\r\nBcc: eve@example.com"]}`), 422, "approvers[0]"},
		{"start: approver with bidi override", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b\u202e@example.com"]}`), 422, "approvers[0]"},
		{"start: two addresses in one", req("POST", "/runs", alice, `{"prompt":"x","approvers":["a@example.com,b@example.com"]}`), 422, "approvers[0]"},
		{"start: principal with U+2028", req("POST", "/runs", alice, `{"prompt":"x","approvers":["bob\u2028"]}`), 422, "approvers[0]"},
		{"start: messages end with assistant", req("POST", "/runs", alice, `{"messages":[{"role":"assistant","content":[{"type":"text","text":"y"}]}],"approvers":["b@example.com"]}`), 422, "end with a user message"},
		{"start: wrong content type", withHeader(req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"]}`), "Content-Type", "text/plain"), 415, "application/json"},
		{"start: a compressed body", withHeader(req("POST", "/runs", alice, "\x1f\x8b\x08\x00"), "Content-Encoding", "gzip"), 415, "send the body uncompressed"},
		{"start: identity encoding", withHeader(req("POST", "/runs", alice, `{"prompt":"x"}`), "Content-Encoding", "identity"), 422, "approvers"},
		{"start: model not allowed", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"model":"opus-max"}`), 422, "not allowed"},
		{"start: GET /runs", req("GET", "/runs", alice, ""), 405, "POST"},
		{"get: unknown run", req("GET", "/runs/nope", alice, ""), 404, "not found"},
		{"get: no identity", req("GET", "/runs/"+r.ID, "", ""), 401, "authentication"},
		{"get: stranger", req("GET", "/runs/"+r.ID, carol, ""), 403, "neither"},
		{"events: bad limit", withQuery(req("GET", "/runs/"+r.ID+"/events", alice, ""), "limit", "0"), 400, "limit"},
		{"events: bad after", withQuery(req("GET", "/runs/"+r.ID+"/events", alice, ""), "after", "x"), 400, "after"},
		{"decide: no identity", req("POST", dec, "", `{"turn_digest":"`+digest+`","action":"approve"}`), 401, "authentication"},
		{"decide: non-approver", req("POST", dec, carol, `{"turn_digest":"`+digest+`","action":"approve"}`), 403, "not an approver"},
		{"decide: initiator is not approver", req("POST", dec, alice, `{"turn_digest":"`+digest+`","action":"approve"}`), 403, "not an approver"},
		{"decide: unknown run", req("POST", "/runs/nope/decision", bob, `{"turn_digest":"`+digest+`","action":"approve"}`), 404, "not found"},
		{"decide: wrong digest", req("POST", dec, bob, `{"turn_digest":"`+strings.Repeat("0", 64)+`","action":"approve"}`), 409, "the turn digest you sent (\"" + strings.Repeat("0", 64) + "\") does not match the turn run " + r.ID + " waits on (\"" + digest + "\"): the turn you reviewed was decided already (by someone else) or changed, or the digest was never one of this run's; review the turn it waits on before you decide on it"},
		{"decide: unknown call", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"zz","action":"approve"}]}`), 422, "not pending"},
		{"decide: edit fails schema", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_write","action":"edit","input":{"path":"x"}}]}`), 422, "schema"},
		{"decide: edit input null", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_write","action":"edit","input":null}]}`), 422, "edited input must be a JSON object"},
		{"decide: edit input an array", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_write","action":"edit","input":[1]}]}`), 422, "edited input must be a JSON object"},
		{"decide: deny a read", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_write","action":"approve"},{"call_id":"tu_read","action":"deny","message":"no"}]}`), 422, `calls[1]: call "tu_read" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied`},
		{"decide: edit a read", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_read","action":"edit","input":{"path":"pages/other.md"}},{"call_id":"tu_write","action":"approve"}]}`), 422, `calls[0]: call "tu_read" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be edited`},
		{"decide: undecided write", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_read","action":"approve"}]}`), 422, "needs a decision"},
		{"decide: bad action", req("POST", dec, bob, `{"turn_digest":"`+digest+`","action":"yes"}`), 422, "turn action"},
		{"decide: unknown field", req("POST", dec, bob, `{"turn_digest":"`+digest+`","action":"approve","force":1}`), 400, "unknown field"},
		{"decide: malformed", req("POST", dec, bob, `{"turn_digest":`), 400, "JSON"},
		{"decide: GET", req("GET", dec, bob, ""), 405, "not allowed"},
		// Found by FuzzStartRun and FuzzDecision: encoding/json accepted
		// these and stored something other than what was sent (U+FFFD for
		// invalid UTF-8, the last of two equal names, a case-variant name
		// as the field).
		{"start: invalid UTF-8", req("POST", "/runs", alice, "{\"prompt\":\"x\xa2\",\"approvers\":[\"b@example.com\"]}"), 400, "invalid UTF-8"},
		{"start: lone surrogate escape", req("POST", "/runs", alice, `{"prompt":"x\ud800","approvers":["b@example.com"]}`), 400, "surrogate"},
		{"start: member twice", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"prompt":"y"}`), 400, `"prompt" appears twice`},
		{"start: metadata key twice", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"metadata":{"a":"1","a":"2"}}`), 400, `"metadata.a" appears twice`},
		{"start: case-variant member", req("POST", "/runs", alice, `{"Prompt":"x","approvers":["b@example.com"]}`), 400, `unknown field "Prompt"`},
		{"decide: action twice", req("POST", dec, bob, `{"turn_digest":"`+digest+`","action":"deny","action":"approve"}`), 400, `"action" appears twice`},
		{"decide: case-variant member", req("POST", dec, bob, `{"turn_digest":"`+digest+`","ACTION":"approve"}`), 400, `unknown field "ACTION"`},
		{"decide: edit input with a member twice", req("POST", dec, bob, `{"turn_digest":"`+digest+`","calls":[{"call_id":"tu_read","action":"approve"},{"call_id":"tu_write","action":"edit","input":{"path":"pages/pricing.md","text":"a","text":"b"}}]}`), 400, "appears twice"},
		{"decide: invalid UTF-8 in a reason", req("POST", dec, bob, "{\"turn_digest\":\""+digest+"\",\"action\":\"deny\",\"message\":\"\xff\"}"), 400, "invalid UTF-8"},
		{"start: number too large", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"max_tokens":1e400}`), 400, "max_tokens"},
		{"cancel: stranger", req("POST", "/runs/"+r.ID+"/cancel", carol, ""), 403, "neither"},
		{"cancel: with body", req("POST", "/runs/"+r.ID+"/cancel", alice, `{"why":"x"}`), 400, "no body"},
		{"unknown route", req("GET", "/nothing", alice, ""), 404, "no route"},
	}
	require.GreaterOrEqual(t, len(tests), 30)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := f.call(tt.req)
			assert.Equal(t, tt.want, status, out)
			e, ok := out["error"].(map[string]any)
			require.True(t, ok, "JSON error body: %v", out)
			assert.Contains(t, e["message"], tt.msg)
			assert.NotEmpty(t, e["code"])
		})
	}
	after, err := f.store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.StatusWaiting, after.Status, "state unchanged")
	assert.Equal(t, r.Version, after.Version, "no write happened")
	assert.Equal(t, "Team: 10 EUR\n", f.pricing())
}

func TestDecisionAfterSettleAndCancelTwice(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	status, _ := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"deny","message":"no"}`))
	require.Equal(t, 202, status)
	f.drain()
	got, _ := f.store.Get(context.Background(), r.ID)
	require.Equal(t, runs.StatusCompleted, got.Status, "denial fed to the model, which finished")
	assert.Equal(t, "Team: 10 EUR\n", f.pricing())

	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	assert.Equal(t, 409, status, out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "COMPLETED")

	r2 := f.waitingRun()
	status, out = f.call(req("POST", "/runs/"+r2.ID+"/cancel", alice, ""))
	require.Equal(t, 200, status, out)
	assert.Equal(t, "CANCELLED", out["status"])
	status, out = f.call(req("POST", "/runs/"+r2.ID+"/cancel", alice, ""))
	assert.Equal(t, 409, status, out)
	status, _ = f.call(req("POST", "/runs/"+r2.ID+"/decision", bob, `{"turn_digest":"`+r2.TurnDigest+`","action":"approve"}`))
	assert.Equal(t, 409, status)
}

// TestDecisionOnARunThatNeverSuspended: a run whose model answered without
// a tool never held a turn. An approver it names is told 409 (nothing waits
// for a decision), not 403 as if the decider were the problem; someone who
// may not see the run still learns nothing (403, as GET /runs/{id}).
func TestDecisionOnARunThatNeverSuspended(t *testing.T) {
	f := newScriptedFixture(t, `{"turns":[{"content":[{"type":"text","text":"nothing to do"}]}]}`)
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"p","approvers":["`+bob+`"]}`))
	require.Equal(t, 202, status, out)
	f.drain()
	id := out["id"].(string)
	require.Equal(t, runs.StatusCompleted, f.run(id).Status)
	body := `{"turn_digest":"` + strings.Repeat("0", 64) + `","action":"approve"}`

	status, out = f.call(req("POST", "/runs/"+id+"/decision", bob, body))
	assert.Equal(t, 409, status, out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "COMPLETED; nothing waits for a decision")

	getStatus, _ := f.call(req("GET", "/runs/"+id, carol, ""))
	status, out = f.call(req("POST", "/runs/"+id+"/decision", carol, body))
	assert.Equal(t, 403, status, out)
	assert.Equal(t, getStatus, status, "a stranger learns no more than GET tells")
}

// TestConcurrentDecisions: 50 approvers' requests race on one suspension;
// exactly one is accepted and the write runs exactly once.
func TestConcurrentDecisions(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.api.Handle(context.Background(), req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
			if err == nil {
				statuses[i] = resp.StatusCode
			}
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	assert.Equal(t, map[int]int{202: 1, 409: 49}, count)
	f.drain()
	evs, err := f.store.Events(context.Background(), r.ID, 0, 1000)
	require.NoError(t, err)
	writes := 0
	for _, e := range evs {
		if e.Type == "tool_executed" && strings.Contains(string(e.Data), `"tool":"write_document"`) {
			writes++
		}
	}
	assert.Equal(t, 1, writes, "the write executed exactly once")
	assert.Equal(t, "Team: 12 EUR\n", f.pricing())
}

func TestEditDecisionIsAuditedAndApplied(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob,
		`{"turn_digest":"`+r.TurnDigest+`","calls":[{"call_id":"tu_write","action":"edit","input":{"path":"pages/pricing.md","text":"Team: 11 EUR\n"}}]}`))
	require.Equal(t, 202, status, out)
	f.drain()
	assert.Equal(t, "Team: 11 EUR\n", f.pricing())
	evs, _ := f.store.Events(context.Background(), r.ID, 0, 1000)
	var sawEdit bool
	for _, e := range evs {
		if e.Type == "tool_executed" && strings.Contains(string(e.Data), `"action":"edit"`) {
			sawEdit = true
			assert.Contains(t, string(e.Data), `"original_input"`)
			assert.Contains(t, string(e.Data), `11 EUR`)
		}
	}
	assert.True(t, sawEdit, fmt.Sprint(evs))
}

func TestFourEyes(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"update pricing","approvers":["`+alice+`","`+bob+`"],"four_eyes":true}`))
	require.Equal(t, 202, status, out)
	f.drain()
	r, err := f.store.Get(context.Background(), out["id"].(string))
	require.NoError(t, err)
	require.Equal(t, runs.StatusWaiting, r.Status)
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", alice, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	assert.Equal(t, 403, status, out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "four-eyes")
	status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	assert.Equal(t, 202, status, out)
}

// TestStatusCodeRule is the README's one rule for status codes: a malformed
// body answers 400, a well-formed but invalid one 422, one over any limit
// 413 — whichever layer (body limit, validator, store) enforces the limit.
func TestStatusCodeRule(t *testing.T) {
	f := newFixture(t)
	// Webhooks on, hooks.example.com a public host: a webhook field's row
	// is refused for its own reason, not for want of a signing secret.
	f.api.Webhooks = &httpapi.WebhookTargets{Resolver: publicResolver{}}
	r := f.waitingRun()
	dec := "/runs/" + r.ID + "/decision"
	approvers := func(n int) string {
		var as []string
		for i := range n {
			as = append(as, fmt.Sprintf(`"a%d@example.com"`, i))
		}
		return "[" + strings.Join(as, ",") + "]"
	}
	// 130 KB of messages: under the 256 KB body limit, over the store's
	// 128 KB request limit.
	var msgs []string
	for range 3 {
		msgs = append(msgs, `{"role":"user","content":[{"type":"text","text":"`+strings.Repeat("m", 44<<10)+`"}]}`)
	}
	bigRequest := `{"messages":[` + strings.Join(msgs, ",") + `],"approvers":["b@example.com"]}`
	tests := []struct {
		name string
		req  events.APIGatewayProxyRequest
		want int
		code string
	}{
		{"malformed start", req("POST", "/runs", alice, `{"prompt":`), 400, "bad_request"},
		{"wrong type", req("POST", "/runs", alice, `{"prompt":"x","approvers":"b@example.com"}`), 400, "bad_request"},
		{"duplicate approver", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com","b@example.com"]}`), 422, "unprocessable"},
		{"20 approvers", req("POST", "/runs", alice, `{"prompt":"x","approvers":`+approvers(20)+`}`), 202, ""},
		{"21 approvers", req("POST", "/runs", alice, `{"prompt":"x","approvers":`+approvers(21)+`}`), 413, "too_large"},
		{"require_approval pattern of 128 characters", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"require_approval":["write_`+strings.Repeat("*", 128-6)+`"]}`), 202, ""},
		{"client tool whose schema refers back to itself", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"client_tools":[{"name":"ctool","effect":"write","input_schema":{"type":"object","properties":{"q":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#/$defs/x"}}}}]}`), 422, "unprocessable"},
		{"empty allowed_tools", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"allowed_tools":[]}`), 422, "unprocessable"},
		{"empty messages beside a prompt", req("POST", "/runs", alice, `{"prompt":"x","messages":[],"approvers":["b@example.com"]}`), 422, "unprocessable"},
		{"empty webhook_events", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/a","webhook_events":[]}`), 422, "unprocessable"},
		{"webhook_events, each once", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/a","webhook_events":["run.completed","run.failed"]}`), 202, ""},
		{"duplicate webhook_events", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/a","webhook_events":["run.completed","run.completed"]}`), 422, "unprocessable"},
		{"empty webhook_url", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":""}`), 422, "unprocessable"},
		{"webhook_url with a space", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/a b"}`), 422, "unprocessable"},
		{"webhook_url with a non-ASCII character", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"webhook_url":"https://hooks.example.com/café"}`), 422, "unprocessable"},
		{"require_approval pattern that matches no tool", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"require_approval":["WRITE_*"]}`), 422, "unprocessable"},
		{"require_approval pattern over 128 characters", req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"],"require_approval":["`+strings.Repeat("a", 129)+`"]}`), 413, "too_large"},
		{"prompt over 64 KB", req("POST", "/runs", alice, `{"prompt":"`+strings.Repeat("p", 65<<10)+`","approvers":["b@example.com"]}`), 413, "too_large"},
		{"request over 128 KB", req("POST", "/runs", alice, bigRequest), 413, "too_large"},
		{"start body over 256 KB", req("POST", "/runs", alice, `{"prompt":"`+strings.Repeat("p", 257<<10)+`"}`), 413, "too_large"},
		{"malformed decision", req("POST", dec, bob, `{"turn_digest":`), 400, "bad_request"},
		{"invalid decision", req("POST", dec, bob, `{"turn_digest":"`+r.TurnDigest+`","action":"maybe"}`), 422, "unprocessable"},
		{"decision over 32 KB", req("POST", dec, bob, `{"turn_digest":"`+r.TurnDigest+`","action":"deny","message":"`+strings.Repeat("d", 40<<10)+`"}`), 413, "too_large"},
		{"decision body over 64 KB", req("POST", dec, bob, `{"turn_digest":"`+r.TurnDigest+`","action":"deny","message":"`+strings.Repeat("d", 65<<10)+`"}`), 413, "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := f.call(tt.req)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %v", status, tt.want, out)
			}
			if tt.code == "" {
				return
			}
			e, _ := out["error"].(map[string]any)
			if e["code"] != tt.code {
				t.Errorf("code %v, want %s: %v", e["code"], tt.code, out)
			}
		})
	}
	after, err := f.store.Get(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, r.Version, after.Version, "no decision was recorded")
}

// publicResolver resolves every host to one public address (TEST-NET
// addresses are refused as reserved).
type publicResolver struct{}

func (publicResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

// TestFourEyesBypassThroughAPI: the initiator naming themselves by another
// spelling is still the initiator; the check reads the run's typed field.
func TestFourEyesBypassThroughAPI(t *testing.T) {
	for _, tc := range []struct{ initiator, listed, decider string }{
		{"ann@example.com", "Ann@Example.com", "Ann@Example.com"},
		{"ann@example.com", "ann+x@example.com", "ann+x@example.com"},
		{"arn:aws:sts::123456789012:assumed-role/Ops/monday", "arn:aws:iam::123456789012:role/Ops", "arn:aws:sts::123456789012:assumed-role/Ops/tuesday"},
	} {
		t.Run(tc.listed, func(t *testing.T) {
			f := newFixture(t)
			status, out := f.call(req("POST", "/runs", tc.initiator, `{"prompt":"update pricing","approvers":["`+tc.listed+`","`+bob+`"],"four_eyes":true}`))
			require.Equal(t, 202, status, out)
			f.drain()
			r, err := f.store.Get(context.Background(), out["id"].(string))
			require.NoError(t, err)
			require.Equal(t, runs.StatusWaiting, r.Status)
			require.True(t, r.FourEyes)
			status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", tc.decider, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
			assert.Equal(t, 403, status, out)
			assert.Contains(t, out["error"].(map[string]any)["message"], "four-eyes")
			after, err := f.store.Get(context.Background(), r.ID)
			require.NoError(t, err)
			assert.Equal(t, r.Version, after.Version, "a refusal changes nothing")
			status, out = f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
			assert.Equal(t, 202, status, out)
		})
	}
}

func TestStartRefusesApproversThatCannotBeCompared(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"x","approvers":["group:ops"]}`))
	assert.Equal(t, 422, status, out)
	assert.Equal(t, `approvers[0] "group:ops": no such group in the directory`, out["error"].(map[string]any)["message"],
		"the directory's own message, without the mark")
	status, out = f.call(req("POST", "/runs", alice, `{"prompt":"x","approvers":["arn:aws:sts::123456789012:assumed-role/Ops/s"]}`))
	assert.Equal(t, 422, status, out)
	status, out = f.call(req("POST", "/runs", alice, `{"prompt":"x","approvers":["bob@example.com"],"required_approvals":99}`))
	assert.Equal(t, 422, status, out)
	assert.Equal(t, "required_approvals must be between 1 and 20", out["error"].(map[string]any)["message"],
		"the policy's own message, without the mark")
}

func TestNullIsRefusedAsAWrongType(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(req("POST", "/runs", alice, `{"prompt":"x","approvers":["bob@example.com"],"required_approvals":null}`))
	assert.Equal(t, 400, status, "the spec and API Gateway's model call null a wrong type: %v", out)
	assert.Equal(t, `body is not valid: field "required_approvals" must be an integer, not null`, out["error"].(map[string]any)["message"])
	status, out = f.call(req("POST", "/runs", alice, `{"prompt":"x","approvers":["bob@example.com"],"metadata":{"a":null}}`))
	assert.Equal(t, 400, status, "a null metadata value is not stored as \"\": %v", out)
}

func TestCancelTakesNoBodyOrAnEmptyObject(t *testing.T) {
	f := newFixture(t)
	path := func() string { return "/runs/" + f.waitingRun().ID + "/cancel" }
	plain := req("POST", path(), alice, `{}`)
	plain.Headers["Content-Type"] = "text/plain"
	status, out := f.call(plain)
	assert.Equal(t, 415, status, "a body is JSON, as on every route: %v", out)
	blank := req("POST", path(), alice, "   ")
	blank.Headers["Content-Type"] = "text/plain"
	status, out = f.call(blank)
	assert.Equal(t, 415, status, "a blank body sent as text too: %v", out)
	for _, body := range []string{"", "{}", "{ }\n", " {}", "{" + strings.Repeat(" ", 1022) + "}", " \n"} {
		status, out := f.call(req("POST", path(), alice, body))
		assert.Equal(t, 200, status, "body %q: %v", body, out)
	}
	status, out = f.call(req("POST", path(), alice, `{"why":"x"}`))
	assert.Equal(t, 400, status)
	assert.Equal(t, `cancel takes no body, or an empty JSON object: unknown field "why"`, out["error"].(map[string]any)["message"])
}

func TestRoutesByTheResourceAPIGatewayMatched(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	get := req("GET", "/v1/runs/"+r.ID, alice, "")
	get.Resource, get.PathParameters = "/runs/{id}", map[string]string{"id": r.ID}
	status, out := f.call(get)
	assert.Equal(t, 200, status, "a custom domain's base path lengthens the path, not the resource: %v", out)
	assert.Equal(t, r.ID, out["id"])

	status, _ = f.call(req("POST", "/runs/", alice, `{"prompt":"x","approvers":["b@example.com"]}`))
	assert.Equal(t, 404, status, "a trailing slash is no route's")
}

func TestHeldCallOffsetMustBeWhereAPageBegins(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	get := func(offset string) (int, map[string]any) {
		q := req("GET", "/runs/"+r.ID+"/calls/tu_write", alice, "")
		q.QueryStringParameters = map[string]string{"part": "input", "offset": offset}
		return f.call(q)
	}
	status, out := get("0")
	require.Equal(t, 200, status, out)
	status, out = get("1")
	assert.Equal(t, 422, status, "a byte inside the first page: %v", out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "use 0 or a next_offset")
}

func TestAHeaderInTwoSpellingsIsReadTheSameEveryTime(t *testing.T) {
	f := newFixture(t)
	seen := map[int]int{}
	for range 20 {
		r := req("POST", "/runs", alice, `{"prompt":"x","approvers":["b@example.com"]}`)
		r.Headers = map[string]string{"content-type": "text/plain", "Content-Type": "application/json"}
		status, _ := f.call(r)
		seen[status]++
	}
	assert.Equal(t, map[int]int{202: 20}, seen, "Content-Type (first in byte order) is the one read")
}

func TestAMessageWithoutContentIsRefused(t *testing.T) {
	f := newFixture(t)
	status, out := f.call(req("POST", "/runs", alice, `{"messages":[{"role":"user","content":[]}],"approvers":["b@example.com"]}`))
	assert.Equal(t, 422, status, out)
	assert.Equal(t, "messages[0].content is empty; a message holds at least one block", out["error"].(map[string]any)["message"])
}

// TestClosedWindowNamesItsDeadlineToTheMillisecond: a decision 5 ms after
// a deadline at .989 s is told the window closed at that deadline, not at
// the whole second before it (earlier than decisions that were accepted).
func TestClosedWindowNamesItsDeadlineToTheMillisecond(t *testing.T) {
	f := newFixture(t)
	f.clock.Advance(989 * time.Millisecond)
	r := f.waitingRun()
	require.Equal(t, 989*time.Millisecond, r.ApprovalDeadline.Sub(r.ApprovalDeadline.Truncate(time.Second)), "the deadline keeps the clock's milliseconds")
	f.clock.Set(r.ApprovalDeadline.Add(5 * time.Millisecond))
	status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
	require.Equal(t, 410, status, out)
	msg := out["error"].(map[string]any)["message"].(string)
	want := "closed at " + r.ApprovalDeadline.UTC().Format("2006-01-02T15:04:05") + ".989Z"
	assert.Contains(t, msg, want, "got %q, want it to say %q", msg, want)
}

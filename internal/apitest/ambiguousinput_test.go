package apitest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/runs"
)

// orderPolicy is the outside tester's policy: small orders of the client
// tool place_order run without an approval, large ones are denied; any
// other order needs one (a write).
const orderPolicy = `{"version": 1, "rules": [
 {"id": "small-orders", "tools": ["place_order"], "when": "args.qty <= 2", "outcome": "allow"},
 {"id": "big-orders", "tools": ["place_order"], "when": "args.qty > 100", "outcome": "deny", "message": "no orders over 100"}]}`

// orderTool is the caller's place_order, with an optional shipping object.
const orderTool = `[{"name":"place_order","description":"Orders from the caller's supplier","effect":"write",
  "input_schema":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"ship":{"type":"object"}},"required":["sku","qty"]}}]`

// TestAToolInputThatIsNotIJSONIsRefusedThroughTheAPI is the security
// finding's repro: the scripted model's call of the client tool
// place_order with {"sku":"X-1","qty":2000,"qty":2} (and the same with a
// nested member twice, invalid UTF-8, a lone surrogate escape) was judged
// by the policy as qty 2, so it ran without an approval (bypassing the
// deny rule too) and was handed over to the caller with both members. Now
// the call is refused: the model gets an error result saying why, nothing
// is held or handed over, and the run completes.
func TestAToolInputThatIsNotIJSONIsRefusedThroughTheAPI(t *testing.T) {
	for _, tt := range []struct{ name, input, want string }{
		{"a member twice", `{"sku":"X-1","qty":2000,"qty":2}`, `member "qty" appears twice in the same object`},
		{"a nested member twice", `{"sku":"X-1","qty":2,"ship":{"to":"Berlin","to":"Paris"}}`, `member "ship.to" appears twice in the same object`},
		{"invalid UTF-8", "{\"sku\":\"X-\xff\",\"qty\":2}", "invalid UTF-8 or a lone surrogate escape in a string at byte 10"},
		{"a lone surrogate escape", `{"sku":"X-\ud800","qty":2}`, "invalid UTF-8 or a lone surrogate escape in a string at byte 10"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			models := &modelLog{}
			s := start(t, apitest.Options{
				Script: script(toolUse("o1", "place_order", tt.input)), Observe: models.observe,
				Principals: []string{"alice", "bob", "carol"}, Governance: governance(t, "", orderPolicy),
			})
			status, run := ctCall(t, s, "POST", "/runs", "alice",
				`{"prompt":"Order two X-1.","approvers":["bob"],"tool_executors":["carol"],"client_tools":`+orderTool+`}`)
			require.Equal(t, http.StatusAccepted, status, "%v", run)
			id := run["id"].(string)

			run = settle(t, s, id)
			require.Equal(t, "COMPLETED", run["status"], "neither held for approval nor handed over: %v", run)
			assert.Nil(t, run["pending"])
			assert.Nil(t, run["tool_results"])
			want := `Error: the input of tool "place_order" is not valid: ` + tt.want
			n, content := models.results()
			assert.Equal(t, map[string]int{"o1": 1}, n, "the model got one result for the call")
			assert.Equal(t, want, content["o1"])

			types := eventTypes(t, s, id)
			for _, never := range []string{runs.EventSuspended, runs.EventHandedOver} {
				assert.NotContains(t, types, never)
			}
			evs, err := s.App.Store.Events(t.Context(), id, 0, 1000)
			require.NoError(t, err)
			var executed []map[string]any
			for _, e := range evs {
				if e.Type == runs.EventToolExecuted {
					var d map[string]any
					require.NoError(t, json.Unmarshal(e.Data, &d))
					executed = append(executed, d)
				}
			}
			require.Len(t, executed, 1, "the trail records the call, once")
			assert.Equal(t, "o1", executed[0]["call_id"])
			assert.Equal(t, true, executed[0]["is_error"])
			assert.Equal(t, "not run: the input of tool \"place_order\" is not valid: "+tt.want, executed[0]["detail"])
			assert.Nil(t, executed[0]["effect"], "nothing took effect")
			assert.Nil(t, executed[0]["rule"], "no policy rule judged it")
		})
	}
}

package mcptool_test

// A server that forgot this process's session (it restarted, say) answers
// requests on it with 404, as the MCP transport says, or with 400, as the
// TypeScript SDK's example servers (the reference server among them) do.
// Either way the session is dropped; a listing or a read runs again on a
// new session; a write is sent again only after a 404 (see withSession).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// forgetting are the ways a server answers a session it forgot.
var forgetting = []struct {
	name   string
	status int
	echoID bool
}{
	{"400 without the request's id (the reference server)", http.StatusBadRequest, false},
	{"400 with the request's id (a JSON-RPC error the SDK reads)", http.StatusBadRequest, true},
	{"404 (the spec)", http.StatusNotFound, true},
}

func TestAnApprovalAfterTheServerForgotTheSessionRunsTheCallOnce(t *testing.T) {
	for _, tt := range forgetting {
		t.Run(tt.name, func(t *testing.T) {
			s, _, r, st := heldTicket(t)
			s.ForgetSessions(tt.status, tt.echoID)
			out, err := r.Resume(context.Background(), st, loop.Decision{TurnDigest: st.TurnDigest, Action: loop.ActionApprove})
			require.NoError(t, err)
			assert.Equal(t, loop.ReasonCompleted, out.Reason)
			res := resultText(t, out.Transcript, "c1")
			assert.False(t, res.IsError, res.Content)
			assert.Equal(t, "ticket T-1 created", res.Content)
			assert.Len(t, s.CallsOf("create_ticket"), 1, "the write went out once, on the new session")
			assert.Equal(t, 1, s.Refused(), "the listing at resume met the forgotten session, and nothing after it did")
		})
	}
}

func TestATurnHeldAfterTheServerForgotTheSessionIsVerified(t *testing.T) {
	for _, tt := range forgetting {
		t.Run(tt.name, func(t *testing.T) {
			s := crmServer(t, mcptest.Options{})
			c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
			r := runner(t, toolbox(t, c), turn(call("c1", "crm__create_ticket", `{"title":"printer on fire"}`)))
			s.ForgetSessions(tt.status, tt.echoID)
			out := start(t, r)
			require.Equal(t, loop.OutcomeSuspended, out.Kind)
			require.Len(t, out.Suspended.PendingCalls, 1)
			assert.Nil(t, out.Suspended.PendingCalls[0].DefinitionUnverified, "the server listed its tools on a new session")
			assert.Equal(t, 1, s.Refused())
		})
	}
}

func TestAReadOnAForgottenSessionRunsOnANewOne(t *testing.T) {
	for _, tt := range forgetting {
		t.Run(tt.name, func(t *testing.T) {
			s := crmServer(t, mcptest.Options{})
			c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL, TrustAnnotations: true}), mcptool.Options{})
			tl, _ := toolbox(t, c).Lookup("crm__find_customer")
			s.ForgetSessions(tt.status, tt.echoID)
			res, err := tl.Call(context.Background(), json.RawMessage(`{"query":"acme"}`))
			require.NoError(t, err)
			assert.False(t, res.IsError, res.Content)
			assert.Contains(t, res.Content, "customer 42")
			assert.Len(t, s.CallsOf("find_customer"), 1)
			assert.Equal(t, 1, s.Refused())
		})
	}
}

// A write that meets a forgotten session answered 400 is not sent again
// (a 400 does not prove that the call was not processed), but the session
// is dropped: the next call goes out on a new one.
func TestAWriteOnASessionAnswered400IsNotSentAgain(t *testing.T) {
	for _, echoID := range []bool{false, true} {
		t.Run(fmt.Sprintf("echo id %t", echoID), func(t *testing.T) {
			s := crmServer(t, mcptest.Options{})
			c := open(t, file(t, mcptool.Server{Name: "crm", URL: s.URL}), mcptool.Options{})
			tl, _ := toolbox(t, c).Lookup("crm__create_ticket")
			s.ForgetSessions(http.StatusBadRequest, echoID)
			res, err := tl.Call(context.Background(), json.RawMessage(`{"title":"a"}`))
			if echoID {
				// A JSON-RPC error in the answer: the server refused the call.
				require.NoError(t, err)
				assert.True(t, res.IsError)
				assert.Contains(t, res.Content, "refused the call of create_ticket")
			} else {
				var unknown *loop.OutcomeUnknownError
				require.ErrorAs(t, err, &unknown, "a bare 400: the write fence decides")
			}
			assert.Equal(t, 1, s.Refused(), "sent once")
			assert.Empty(t, s.CallsOf("create_ticket"))

			res, err = tl.Call(context.Background(), json.RawMessage(`{"title":"b"}`))
			require.NoError(t, err)
			assert.False(t, res.IsError, res.Content)
			assert.Len(t, s.CallsOf("create_ticket"), 1, "the next call went out on a new session")
			assert.Equal(t, 1, s.Refused())
		})
	}
}

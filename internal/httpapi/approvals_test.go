package httpapi_test

// The approval-link routes (GET, HEAD and POST /approvals/{token}) through
// the handler: the fixture's worker suspends runs and records the links it
// would mail; the tests open and post them as a mail client, a scanner or
// an attacker would.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/runs"
)

const (
	formType = "application/x-www-form-urlencoded"
	// mailbox is the fixture runs' e-mail approver: the one who gets links.
	mailbox = "ops@example.com"
)

// perCallScript reads, then proposes two writes in one turn, then finishes.
const perCallScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"tu_read","name":"read_document","input":{"path":"pages/pricing.md"}},
             {"type":"tool_use","id":"tu_w_pricing","name":"write_document","input":{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}},
             {"type":"tool_use","id":"tu_w_about","name":"write_document","input":{"path":"pages/about.md","text":"Gone.\n"}}]},
 {"content":[{"type":"text","text":"done"}]}
]}`

// twoStepScript proposes one write, then after the decision another.
const twoStepScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"tu_w1","name":"write_document","input":{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}}]},
 {"content":[{"type":"tool_use","id":"tu_w2","name":"write_document","input":{"path":"pages/about.md","text":"New.\n"}}]},
 {"content":[{"type":"text","text":"done"}]}
]}`

// linkReq is an unauthenticated request to an approval link.
func linkReq(method, path, contentType, body string) events.APIGatewayProxyRequest {
	r := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body, Headers: map[string]string{}}
	if contentType != "" {
		r.Headers["Content-Type"] = contentType
	}
	return r
}

// open GETs (or HEADs) a link.
func (f *fixture) open(method, link string) events.APIGatewayProxyResponse {
	f.t.Helper()
	return f.handle(linkReq(method, link, "", ""))
}

// post posts a raw body to a link.
func (f *fixture) post(link, contentType, body string) events.APIGatewayProxyResponse {
	f.t.Helper()
	return f.handle(linkReq(http.MethodPost, link, contentType, body))
}

// decide posts the confirm form: the digest and the action, plus fields.
func (f *fixture) decide(link, digest, action string, fields ...string) events.APIGatewayProxyResponse {
	f.t.Helper()
	form := url.Values{approvalpage.FieldDigest: {digest}, approvalpage.FieldAction: {action}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Add(fields[i], fields[i+1])
	}
	return f.post(link, formType, form.Encode())
}

// requirePage checks a link answer: its status, the page headers (HTML, no
// scripts, no Referer, no caching) and that the body holds each of wants.
func requirePage(t *testing.T, p events.APIGatewayProxyResponse, status int, wants ...string) {
	t.Helper()
	require.Equal(t, status, p.StatusCode, "page status; body:\n%s", p.Body)
	assert.Equal(t, approvalpage.Headers(), p.Headers, "page headers")
	for _, w := range wants {
		require.Contains(t, html.UnescapeString(p.Body), w, "page (status %d) lacks %q", p.StatusCode, w)
	}
}

// eventCount is the number of events of run id.
func (f *fixture) eventCount(id string) int {
	f.t.Helper()
	evs, err := f.store.Events(context.Background(), id, 0, 1000)
	require.NoError(f.t, err)
	return len(evs)
}

// requireUnchanged checks that r still waits at the same version, with no
// decision and evCount events: nothing was decided or written.
func (f *fixture) requireUnchanged(r *runs.Run, evCount int) {
	f.t.Helper()
	now := f.run(r.ID)
	require.Equal(f.t, runs.StatusWaiting, now.Status)
	require.Equal(f.t, r.Version, now.Version, "version")
	require.Nil(f.t, now.Decision)
	require.Equal(f.t, evCount, f.eventCount(r.ID), "events")
}

// executions counts the tool_executed events of tool whose call ran.
func (f *fixture) executions(id, tool string) int {
	f.t.Helper()
	evs, err := f.store.Events(context.Background(), id, 0, 1000)
	require.NoError(f.t, err)
	n := 0
	for _, e := range evs {
		var d struct{ Tool, Action string }
		if e.Type == runs.EventToolExecuted && json.Unmarshal(e.Data, &d) == nil && d.Tool == tool && d.Action != "deny" {
			n++
		}
	}
	return n
}

// TestLinkPageNeverChangesState: scanners fetch the link 20 times with GET
// and 20 with HEAD; each sees the page (HEAD without a body) and nothing
// changes. The page shows what waits and carries the turn's digest.
func TestLinkPageNeverChangesState(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)
	evCount := f.eventCount(r.ID)
	for range 20 {
		requirePage(t, f.open(http.MethodGet, link), http.StatusOK, "write_document")
		head := f.open(http.MethodHead, link)
		requirePage(t, head, http.StatusOK)
		require.Empty(t, head.Body)
	}
	f.requireUnchanged(r, evCount)
	p := f.open(http.MethodGet, link)
	requirePage(t, p, http.StatusOK, "Approve or deny", "write_document", mailbox, r.ID,
		"-Team: 10 EUR", "+Team: 12 EUR", `"path": "pages/pricing.md"`)
	assert.Contains(t, p.Body, `name="digest" value="`+r.TurnDigest+`"`, "the form carries the turn digest")
	assert.NotContains(t, p.Body, "<script")
	assert.Equal(t, "Team: 10 EUR\n", f.pricing(), "nothing written")
}

// TestLinkDecidesOnce: the form decides through the API's path, recorded as
// the approver's via link; the write runs once. The token is single use:
// a second POST, a GET and a HEAD then only say who decided.
func TestLinkDecidesOnce(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)

	requirePage(t, f.decide(link, r.TurnDigest, "approve"), http.StatusOK, "Your decision was recorded", "Approved. The run continues.", r.ID)
	decided := f.run(r.ID)
	require.Equal(t, runs.StatusResuming, decided.Status)
	assert.Equal(t, mailbox, decided.DecidedBy)
	assert.Equal(t, runs.ViaLink, decided.DecidedVia)
	f.drain()
	done := f.run(r.ID)
	require.Equal(t, runs.StatusCompleted, done.Status)
	assert.Equal(t, 1, f.executions(r.ID, "write_document"))
	assert.Equal(t, "Team: 12 EUR\n", f.pricing())

	already := []string{"Already decided", "already approved by " + mailbox, "through an approval link", "Nothing was changed."}
	requirePage(t, f.decide(link, r.TurnDigest, "approve"), http.StatusConflict, already...)
	requirePage(t, f.decide(link, r.TurnDigest, "deny"), http.StatusConflict, already...)
	requirePage(t, f.open(http.MethodGet, link), http.StatusConflict, already...)
	head := f.open(http.MethodHead, link)
	requirePage(t, head, http.StatusConflict)
	require.Empty(t, head.Body)
	assert.Equal(t, done.Version, f.run(r.ID).Version, "a used link changes nothing")
}

// TestLinkDenyWithReason: a denial's reason is stored trimmed and shown;
// the write does not happen.
func TestLinkDenyWithReason(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	const reason = "Not during the price freeze, see OPS-12."
	requirePage(t, f.decide(f.link(mailbox), r.TurnDigest, "deny", "message", "  "+reason+"\r\n"), http.StatusOK,
		"Denied. The agent is told its calls were not allowed.", "Your reason: "+reason)
	f.drain()
	done := f.run(r.ID)
	require.Equal(t, runs.StatusCompleted, done.Status)
	require.NotNil(t, done.Decision)
	assert.Equal(t, reason, done.Decision.Message)
	assert.Equal(t, 0, f.executions(r.ID, "write_document"))
	assert.Equal(t, "Team: 10 EUR\n", f.pricing())
}

// TestLinkUnusableTokens: broken tokens get the 404 page on GET, HEAD and
// POST and change nothing; the real link still works.
func TestLinkUnusableTokens(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)
	raw := strings.TrimPrefix(link, "/approvals/")
	require.Len(t, raw, approval.TokenLength)
	evCount := f.eventCount(r.ID)
	flip := func(i int) string {
		c := byte('A')
		if raw[i] == 'A' {
			c = 'B'
		}
		return raw[:i] + string(c) + raw[i+1:]
	}
	swapCase := func() string {
		i := strings.IndexFunc(raw, func(c rune) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' })
		c := raw[i : i+1]
		if strings.ToUpper(c) == c {
			return raw[:i] + strings.ToLower(c) + raw[i+1:]
		}
		return raw[:i] + strings.ToUpper(c) + raw[i+1:]
	}
	for _, tt := range []struct{ name, token string }{
		{"first character changed", flip(0)},
		{"middle character changed", flip(len(raw) / 2)},
		{"last character changed", flip(len(raw) - 1)},
		{"case of a letter changed", swapCase()},
		{"truncated by one", raw[:len(raw)-1]},
		{"truncated to half", raw[:len(raw)/2]},
		{"one character too many", raw + "A"},
		{"doubled", raw + raw},
		{"overlong", strings.Repeat(raw, 40)},
		{"padded", raw + "="},
		{"garbage", "not-a-token"},
		{"garbage of the right length", strings.Repeat("!", len(raw))},
		{"hex hash instead of the token", strings.Repeat("ab", 32)},
		{"percent-encoded bytes", "%00%ff" + raw[2:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := "/approvals/" + tt.token
			requirePage(t, f.open(http.MethodGet, bad), http.StatusNotFound, "Approval link not found")
			head := f.open(http.MethodHead, bad)
			requirePage(t, head, http.StatusNotFound)
			require.Empty(t, head.Body)
			requirePage(t, f.decide(bad, r.TurnDigest, "approve"), http.StatusNotFound, "Approval link not found")
			requirePage(t, f.decide(bad, r.TurnDigest, "deny", "message", "no"), http.StatusNotFound, "Approval link not found")
		})
	}
	f.requireUnchanged(r, evCount)
	requirePage(t, f.decide(link, r.TurnDigest, "approve"), http.StatusOK, "Your decision was recorded")
}

// TestLinkBadForms: broken forms posted to a good link each get their page
// and status and change nothing; the link still works afterwards.
func TestLinkBadForms(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)
	digest := r.TurnDigest
	good := url.Values{"digest": {digest}, "action": {"approve"}}.Encode()
	evCount := f.eventCount(r.ID)
	for _, tt := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"JSON instead of a form", "application/json", `{"digest":"` + digest + `","action":"approve"}`, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"text/plain", "text/plain", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"multipart", "multipart/form-data; boundary=x", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"no Content-Type", "", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"a charset other than UTF-8", formType + "; charset=latin1", good, http.StatusUnsupportedMediaType, "charset utf-8"},
		{"malformed Content-Type", formType + "; ;;", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"oversized form", formType, good + "&message=" + strings.Repeat("x", 65<<10), http.StatusRequestEntityTooLarge, "The form is too large."},
		{"malformed encoding", formType, "digest=%zz&action=approve", http.StatusBadRequest, "The form could not be read."},
		{"empty form", formType, "", http.StatusUnprocessableEntity, "no turn digest"},
		{"no digest", formType, "action=approve", http.StatusUnprocessableEntity, "no turn digest"},
		{"malformed digest", formType, "digest=abc&action=approve", http.StatusUnprocessableEntity, "malformed"},
		{"no action", formType, "digest=" + digest, http.StatusUnprocessableEntity, "no action"},
		{"unknown action", formType, "digest=" + digest + "&action=maybe", http.StatusUnprocessableEntity, "unknown action"},
		{"edit through the page", formType, "digest=" + digest + "&action=edit", http.StatusUnprocessableEntity, "only possible through the API"},
		{"action sent twice", formType, good + "&action=deny", http.StatusBadRequest, "more than once"},
		{"unknown field", formType, good + "&approve_all=yes", http.StatusBadRequest, "unknown field"},
		{"a call marked deny, then Approve all", formType, good + "&call." + heldCallID(r) + "=deny", http.StatusUnprocessableEntity, "is marked deny"},
		{"per-call choice for an unknown call", formType, "digest=" + digest + "&action=per_call&call.tu_nope=approve", http.StatusUnprocessableEntity, "unknown call id"},
		{"reason too long", formType, "digest=" + digest + "&action=deny&message=" + strings.Repeat("x", 2001), http.StatusUnprocessableEntity, "at most 2000"},
		{"digest of another turn", formType, "digest=" + strings.Repeat("0", 64) + "&action=approve", http.StatusConflict, "does not match the turn run " + r.ID + " waits on"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requirePage(t, f.post(link, tt.contentType, tt.body), tt.status, tt.want, "Nothing was changed.")
			f.requireUnchanged(r, evCount)
		})
	}
	requirePage(t, f.post(link, formType+"; charset=UTF-8", good), http.StatusOK, "Your decision was recorded")
}

// TestLinkExpiry: from the approval deadline on, the link answers 410 on
// GET, HEAD and POST and changes nothing, before and after the run is
// expired; a millisecond before, it still opens.
func TestLinkExpiry(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)
	evCount := f.eventCount(r.ID)
	expired := []string{"Approval link expired", "Nothing was changed."}
	for _, tt := range []struct {
		name   string
		at     time.Time
		status int
	}{
		{"a millisecond before the deadline", r.ApprovalDeadline.Add(-time.Millisecond), http.StatusOK},
		{"at the deadline", r.ApprovalDeadline, http.StatusGone},
		{"an hour after", r.ApprovalDeadline.Add(time.Hour), http.StatusGone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.Set(tt.at)
			head := f.open(http.MethodHead, link)
			requirePage(t, head, tt.status)
			require.Empty(t, head.Body)
			if tt.status == http.StatusOK {
				requirePage(t, f.open(http.MethodGet, link), http.StatusOK, "write_document")
				return
			}
			requirePage(t, f.open(http.MethodGet, link), tt.status, expired...)
			requirePage(t, f.decide(link, r.TurnDigest, "approve"), tt.status, expired...)
			f.requireUnchanged(r, evCount)
		})
	}
	_, err := f.store.Expire(context.Background(), f.run(r.ID))
	require.NoError(t, err)
	requirePage(t, f.open(http.MethodGet, link), http.StatusGone, expired...)
	requirePage(t, f.decide(link, r.TurnDigest, "approve"), http.StatusGone, expired...)
	assert.Equal(t, runs.StatusExpired, f.run(r.ID).Status)
	assert.Equal(t, 0, f.executions(r.ID, "write_document"))
}

// TestLinkOfAnotherSuspension: after a resume suspends the run again, the
// first link names who decided its own turn and cannot decide the new one,
// even with the new turn's digest; the new link can. Each link keeps naming
// the decider of its own turn.
func TestLinkOfAnotherSuspension(t *testing.T) {
	f := newScriptedFixture(t, twoStepScript)
	first := f.waitingRun()
	firstLink := f.link(mailbox)
	requirePage(t, f.decide(firstLink, first.TurnDigest, "approve"), http.StatusOK, "Your decision was recorded")
	f.drain()
	second := f.run(first.ID)
	require.Equal(t, runs.StatusWaiting, second.Status)
	require.NotEqual(t, first.SuspensionID, second.SuspensionID)
	secondLink := f.link(mailbox)
	require.NotEqual(t, firstLink, secondLink)
	evCount := f.eventCount(first.ID)

	requirePage(t, f.open(http.MethodGet, firstLink), http.StatusConflict, "already approved by "+mailbox)
	requirePage(t, f.decide(firstLink, second.TurnDigest, "approve"), http.StatusConflict, "already approved")
	f.requireUnchanged(second, evCount)
	p := f.open(http.MethodGet, secondLink)
	requirePage(t, p, http.StatusOK, "pages/about.md")
	assert.Contains(t, p.Body, `value="`+second.TurnDigest+`"`)

	status, out := f.call(req("POST", "/runs/"+first.ID+"/decision", bob, `{"turn_digest":"`+second.TurnDigest+`","action":"approve"}`))
	require.Equal(t, http.StatusAccepted, status, out)
	f.drain()
	require.Equal(t, runs.StatusCompleted, f.run(first.ID).Status)
	firstPage := f.open(http.MethodGet, firstLink)
	requirePage(t, firstPage, http.StatusConflict, "already approved by "+mailbox, "through an approval link")
	assert.NotContains(t, firstPage.Body, bob, "bob did not decide the first turn")
	requirePage(t, f.open(http.MethodGet, secondLink), http.StatusConflict, "already approved by "+bob, "through the API")
	assert.Equal(t, 2, f.executions(first.ID, "write_document"), "each approved write ran once")
}

// TestLinkOfAnotherRun: a token is bound to its run. Deciding the first of
// two waiting runs through its link leaves the second untouched, and the
// first link cannot decide the second run, even with its digest.
func TestLinkOfAnotherRun(t *testing.T) {
	f := newFixture(t)
	first := f.waitingRun()
	firstLink := f.link(mailbox)
	second := f.waitingRun()
	secondLink := f.link(mailbox)
	require.NotEqual(t, firstLink, secondLink)
	evCount := f.eventCount(second.ID)

	requirePage(t, f.open(http.MethodGet, firstLink), http.StatusOK, first.ID)
	requirePage(t, f.decide(firstLink, first.TurnDigest, "approve"), http.StatusOK, first.ID)
	f.drain()
	f.requireUnchanged(second, evCount)
	for _, action := range []string{"approve", "deny"} {
		requirePage(t, f.decide(firstLink, second.TurnDigest, action), http.StatusConflict, "already approved by "+mailbox)
	}
	f.requireUnchanged(second, evCount)
	requirePage(t, f.open(http.MethodGet, secondLink), http.StatusOK, second.ID)
	requirePage(t, f.decide(secondLink, second.TurnDigest, "deny", "message", "one change is enough"), http.StatusOK, "Denied.", "one change is enough")
	assert.Equal(t, "approve", string(f.run(first.ID).Decision.Action), "the first run's decision stands")
}

// TestLinkFourEyesBypass: under four-eyes no link is issued to the
// initiator; a link that names the initiator under another spelling (a
// case variant, a +tag) — as a token issued before a directory change
// would — is refused 403 with the run unchanged, and a real approver's
// link still decides.
func TestLinkFourEyesBypass(t *testing.T) {
	f := newFixture(t)
	start := req("POST", "/runs", "", `{"prompt":"update pricing","approvers":["Ann+ops@Example.com","bob@example.com"],"four_eyes":true}`)
	start.RequestContext.Authorizer = map[string]any{"principalId": "ann@example.com"}
	status, out := f.call(start)
	require.Equal(t, http.StatusAccepted, status, out)
	f.drain()
	r := f.run(out["id"].(string))
	require.Equal(t, runs.StatusWaiting, r.Status)
	assert.Empty(t, f.links("Ann+ops@Example.com"), "no link for the initiator's alias")
	require.Len(t, f.links("bob@example.com"), 1)

	var bypass []string
	var grants []runs.TokenGrant
	for _, who := range []string{"Ann+ops@Example.com", "ANN@example.com", "ann+x@example.com"} {
		raw, hash, err := approval.NewToken()
		require.NoError(t, err)
		bypass = append(bypass, "/approvals/"+raw)
		grants = append(grants, runs.TokenGrant{Hash: hash, Approver: who})
	}
	r, err := f.store.Renotify(context.Background(), r, runs.Notice{SuspensionID: r.SuspensionID, State: runs.NotificationSent}, grants)
	require.NoError(t, err)
	evCount := f.eventCount(r.ID)
	for i, link := range bypass {
		t.Run(fmt.Sprint(grants[i].Approver), func(t *testing.T) {
			// The page shows why (the initiator never decides), no form.
			p := f.open(http.MethodGet, link)
			requirePage(t, p, http.StatusForbidden, "four-eyes")
			assert.NotContains(t, p.Body, "<form")
			requirePage(t, f.decide(link, r.TurnDigest, "approve"), http.StatusForbidden, "Nothing was changed.")
			f.requireUnchanged(r, evCount)
		})
	}
	requirePage(t, f.decide(f.link("bob@example.com"), r.TurnDigest, "approve"), http.StatusOK, "Your decision was recorded")
	assert.Equal(t, "bob@example.com", f.run(r.ID).DecidedBy)
}

// TestLinkPerCall: a turn with two writes gets per-call choices; leaving
// one undecided is refused, as is denying the read that needs no approval;
// approving one write and denying the other (and approving the read, which
// changes nothing) runs only the approved write.
func TestLinkPerCall(t *testing.T) {
	f := newScriptedFixture(t, perCallScript)
	r := f.waitingRun()
	link := f.link(mailbox)
	p := f.open(http.MethodGet, link)
	requirePage(t, p, http.StatusOK, "Pending calls: 3 (2 need approval)", "runs without approval",
		`name="call.tu_w_pricing"`, `name="call.tu_w_about"`, `name="reason.tu_w_about"`, "Submit per-call decisions")
	assert.NotContains(t, p.Body, `name="call.tu_read"`, "no choice for the read")
	evCount := f.eventCount(r.ID)

	requirePage(t, f.decide(link, r.TurnDigest, "per_call", "call.tu_w_pricing", "approve"),
		http.StatusUnprocessableEntity, "choose approve or deny for call", "tu_w_about")
	f.requireUnchanged(r, evCount)
	// The read runs without approval: a choice posted for it may approve
	// it (changing nothing), as the API's per-call approve may, but not
	// deny it, as the API refuses that too.
	requirePage(t, f.decide(link, r.TurnDigest, "per_call", "call.tu_w_pricing", "approve", "call.tu_w_about", "approve", "call.tu_read", "deny"),
		http.StatusUnprocessableEntity, `call "tu_read" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied`)
	f.requireUnchanged(r, evCount)
	requirePage(t, f.decide(link, r.TurnDigest, "per_call", "call.tu_w_pricing", "approve", "call.tu_w_about", "deny", "reason.tu_w_about", "keep it", "call.tu_read", "approve"),
		http.StatusOK, "You decided per call:", "tu_w_pricing", "approved", "tu_w_about", "denied", "keep it")
	f.drain()
	done := f.run(r.ID)
	require.Equal(t, runs.StatusCompleted, done.Status)
	calls := map[string]string{}
	for _, c := range done.Decision.Calls {
		calls[c.CallID] = string(c.Action) + ":" + c.Message
	}
	assert.Equal(t, map[string]string{"tu_read": "approve:", "tu_w_pricing": "approve:", "tu_w_about": "deny:keep it"}, calls)
	assert.Equal(t, 1, f.executions(r.ID, "write_document"))
	assert.Equal(t, "Team: 12 EUR\n", f.pricing())
}

// TestLinkAfterTheRunMovedOn: when the run stops waiting another way (a
// decision through the API, a cancellation), the link says so and changes
// nothing.
func TestLinkAfterTheRunMovedOn(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(f *fixture, r *runs.Run)
		want []string
	}{
		{"decided through the API", func(f *fixture, r *runs.Run) {
			status, out := f.call(req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
			require.Equal(t, http.StatusAccepted, status, out)
		}, []string{"already approved by " + bob, "through the API"}},
		{"cancelled", func(f *fixture, r *runs.Run) {
			status, out := f.call(req("POST", "/runs/"+r.ID+"/cancel", alice, ""))
			require.Equal(t, http.StatusOK, status, out)
		}, []string{"Run cancelled", "This run was cancelled on", "before this request was decided"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.waitingRun()
			link := f.link(mailbox)
			tt.end(f, r)
			f.drain()
			ended := f.run(r.ID)
			requirePage(t, f.open(http.MethodGet, link), http.StatusConflict, tt.want...)
			requirePage(t, f.decide(link, r.TurnDigest, "deny"), http.StatusConflict, tt.want...)
			head := f.open(http.MethodHead, link)
			requirePage(t, head, http.StatusConflict)
			require.Empty(t, head.Body)
			assert.Equal(t, ended.Version, f.run(r.ID).Version)
		})
	}
}

// TestLinkReminder: a reminder carries a fresh link to the same
// suspension; both open the page, the first decision through either wins
// and the other then says so.
func TestLinkReminder(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	first := f.link(mailbox)
	require.NoError(t, f.worker.Remind(context.Background(), f.run(r.ID)))
	reminder := f.link(mailbox)
	require.NotEqual(t, first, reminder)
	for _, link := range []string{first, reminder} {
		requirePage(t, f.open(http.MethodGet, link), http.StatusOK, r.ID)
	}
	requirePage(t, f.decide(reminder, r.TurnDigest, "approve"), http.StatusOK, "Your decision was recorded")
	requirePage(t, f.decide(first, r.TurnDigest, "approve"), http.StatusConflict, "already approved by "+mailbox)
	f.drain()
	assert.Equal(t, 1, f.executions(r.ID, "write_document"))
}

// TestLinkConcurrentPosts: twenty simultaneous submits of the form and one
// API decision: exactly one wins, every other link POST gets the "already
// decided" page, and the write runs once.
func TestLinkConcurrentPosts(t *testing.T) {
	f := newFixture(t)
	r := f.waitingRun()
	link := f.link(mailbox)
	form := url.Values{"digest": {r.TurnDigest}, "action": {"approve"}}.Encode()
	const n = 20
	statuses := make([]int, n)
	var api int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := f.api.Handle(context.Background(), linkReq(http.MethodPost, link, formType, form))
			if err != nil {
				statuses[i] = -1
				return
			}
			statuses[i] = resp.StatusCode
		})
	}
	wg.Go(func() {
		<-start
		resp, err := f.api.Handle(context.Background(), req("POST", "/runs/"+r.ID+"/decision", bob, `{"turn_digest":"`+r.TurnDigest+`","action":"approve"}`))
		if err == nil {
			api = resp.StatusCode
		}
	})
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	wins := count[http.StatusOK]
	if api == http.StatusAccepted {
		wins++
	} else {
		assert.Equal(t, http.StatusConflict, api, "the API decision lost")
	}
	require.Equal(t, 1, wins, "exactly one decision wins: links %v, API %d", count, api)
	require.Equal(t, n, count[http.StatusOK]+count[http.StatusConflict], "every link POST answered 200 or 409: %v", count)
	f.drain()
	assert.Equal(t, runs.StatusCompleted, f.run(r.ID).Status)
	assert.Equal(t, 1, f.executions(r.ID, "write_document"))
}

// heldCallID is the id of the first call of r's held turn that needs approval.
func heldCallID(r *runs.Run) string {
	for _, c := range r.PendingCalls {
		if c.NeedsApproval {
			return c.ID
		}
	}
	return ""
}

package main

// Approval links end to end on the local server (embedded store, outbox
// mail): a suspended run mails its e-mail approver a link; GET and HEAD of
// the link never change anything (mail scanners pre-fetch every link); a
// POST of the page's form decides through the same path as the API.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/provider/scripted"
)

const formType = "application/x-www-form-urlencoded"

// perCallScript reads, then proposes two writes in one turn, then finishes.
const perCallScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"toolu_read","name":"read_document","input":{"path":"pages/pricing.md"}},
             {"type":"tool_use","id":"toolu_w_pricing","name":"write_document","input":{"path":"pages/pricing.md","text":"# Pricing\n\n- Team: 12 EUR\n"}},
             {"type":"tool_use","id":"toolu_w_about","name":"write_document","input":{"path":"pages/about.md","text":"# About us\n\nGone.\n"}}]},
 {"content":[{"type":"text","text":"done"}]}
]}`

// TestApprovalLinkApproveAfterScanners is the story of one link: the mail
// arrives, a scanner fetches the link 20 times with GET and 20 with HEAD,
// the human opens it, sees the call and its diff, approves; the run
// completes with the write done once and the decision audited as the
// approver's, via link. The link then only says "already decided".
func TestApprovalLinkApproveAfterScanners(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{})
	run, link := ls.suspend(nil)
	id := run.ID
	require.NotNil(t, run.Pending)
	docBefore := ls.documentText("pages/pricing.md")
	eventsBefore := ls.alice.events(id)

	// The scanners: nothing they do changes the run.
	for i := range 20 {
		requirePage(t, getPage(t, http.MethodGet, link), http.StatusOK, "write_document")
		head := getPage(t, http.MethodHead, link)
		requirePage(t, head, http.StatusOK)
		require.Empty(t, head.body, "HEAD %d has no body", i)
	}
	ls.requireUnchanged(run, len(eventsBefore))
	require.Equal(t, docBefore, ls.documentText("pages/pricing.md"), "nothing written by the scanners")
	ls.requireHeadHasNoBody(link, http.StatusOK)

	// The human opens the link: the confirm page shows what waits.
	p := getPage(t, http.MethodGet, link)
	requirePage(t, p, http.StatusOK, "Approve or deny", "write_document", "ops@example.com", id,
		`value="approve"`, `value="deny"`, `name="message"`)
	text := html.UnescapeString(p.body)
	assert.Contains(t, text, "-- Team: 10 EUR per user and month", "the diff's removed line")
	assert.Contains(t, text, "+- Team: 12 EUR per user and month", "the diff's added line")
	assert.Contains(t, text, `"path": "pages/pricing.md"`, "the call's arguments")
	assert.NotContains(t, p.body, "<script", "the page needs no JavaScript")
	require.Equal(t, run.Pending.TurnDigest, p.digest(), "the form carries the turn digest")
	require.Equal(t, "WAITING_FOR_APPROVAL", ls.alice.run(id).Status, "opening the page decides nothing")
	ls.requireUnchanged(run, len(eventsBefore))

	// Approve.
	requirePage(t, decideForm(t, link, p.digest(), "approve", nil), http.StatusOK,
		"Your decision was recorded", "Approved. The run continues.", id)
	done := ls.alice.waitStatus(id, "COMPLETED")
	assert.Equal(t, "completed", done.Reason)

	evs := ls.alice.events(id)
	require.Equal(t, 1, toolExecutions(t, evs, "write_document"), "the write ran exactly once")
	require.Contains(t, ls.documentText("pages/pricing.md"), "- Team: 12 EUR per user and month")
	decisions := eventsOf(evs, "decision")
	require.Len(t, decisions, 1)
	require.Equal(t, linkApprover, decisions[0].Actor, "the decision event names the approver's address")
	var data struct {
		Via        string `json:"via"`
		TurnDigest string `json:"turn_digest"`
	}
	require.NoError(t, json.Unmarshal(decisions[0].Data, &data))
	require.Equal(t, "link", data.Via)
	require.Equal(t, run.Pending.TurnDigest, data.TurnDigest)
	require.NotNil(t, done.Decision)
	assert.Equal(t, linkApprover, done.Decision.By)
	assert.Equal(t, "link", done.Decision.Via)
	assert.Equal(t, "approve", done.Decision.Decision.Action)

	// Reused: a second POST, another GET or HEAD only say who decided.
	already := []string{"Already decided", "already decided by ops@example.com", "through an approval link", "Nothing was changed."}
	requirePage(t, decideForm(t, link, p.digest(), "approve", nil), http.StatusConflict, already...)
	requirePage(t, decideForm(t, link, p.digest(), "deny", nil), http.StatusConflict, already...)
	requirePage(t, getPage(t, http.MethodGet, link), http.StatusConflict, already...)
	head := getPage(t, http.MethodHead, link)
	requirePage(t, head, http.StatusConflict)
	require.Empty(t, head.body)
	ls.requireHeadHasNoBody(link, http.StatusConflict)
	after := ls.alice.run(id)
	require.Equal(t, done.Version, after.Version, "a reused link changes nothing")
	require.Equal(t, 1, toolExecutions(t, ls.alice.events(id), "write_document"))
}

// TestApprovalLinkUnusableTokens sends broken tokens: each gets the 404
// page on GET, HEAD and POST, and nothing changes; the real link still
// works afterwards.
func TestApprovalLinkUnusableTokens(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{})
	run, link := ls.suspend(nil)
	base, raw, ok := strings.Cut(link, "/approvals/")
	require.True(t, ok)
	evCount := len(ls.alice.events(run.ID))

	tests := []struct {
		name  string
		token string
	}{
		{"first character changed", flipChar(raw, 0)},
		{"middle character changed", flipChar(raw, len(raw)/2)},
		{"last character changed", flipChar(raw, len(raw)-1)},
		{"case of a letter changed", swapCase(raw)},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, raw, tt.token)
			bad := base + "/approvals/" + tt.token
			notFound := []string{"Approval link not found"}
			requirePage(t, getPage(t, http.MethodGet, bad), http.StatusNotFound, notFound...)
			head := getPage(t, http.MethodHead, bad)
			requirePage(t, head, http.StatusNotFound)
			require.Empty(t, head.body)
			requirePage(t, decideForm(t, bad, run.Pending.TurnDigest, "approve", nil), http.StatusNotFound, notFound...)
			requirePage(t, decideForm(t, bad, run.Pending.TurnDigest, "deny", url.Values{"message": {"no"}}), http.StatusNotFound, notFound...)
		})
	}
	ls.requireUnchanged(run, evCount)

	// The real link still works.
	requirePage(t, getPage(t, http.MethodGet, link), http.StatusOK, "write_document")
	requirePage(t, decideForm(t, link, run.Pending.TurnDigest, "approve", nil), http.StatusOK, "Your decision was recorded")
	ls.alice.waitStatus(run.ID, "COMPLETED")
}

// TestApprovalLinkOtherRunsToken: a token is bound to its run. With two
// runs waiting, deciding the first through its link leaves the second
// untouched; the first link then only says "already decided", even with the
// second run's digest, and the second run's own link decides it.
func TestApprovalLinkOtherRunsToken(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{})
	first, firstLink := ls.suspend(nil)
	second, secondLink := ls.suspend(map[string]any{"metadata": map[string]string{"ticket": "second"}})
	require.NotEqual(t, firstLink, secondLink)
	secondEvents := len(ls.alice.events(second.ID))

	p := getPage(t, http.MethodGet, firstLink)
	requirePage(t, p, http.StatusOK)
	require.Equal(t, first.ID, p.runID(), "the first link shows the first run")
	requirePage(t, decideForm(t, firstLink, p.digest(), "approve", nil), http.StatusOK, first.ID)
	ls.alice.waitStatus(first.ID, "COMPLETED")
	ls.requireUnchanged(second, secondEvents)

	// The decided run's token, aimed at the other run's turn.
	for _, action := range []string{"approve", "deny"} {
		requirePage(t, decideForm(t, firstLink, second.Pending.TurnDigest, action, nil), http.StatusConflict,
			"already decided by ops@example.com")
	}
	requirePage(t, getPage(t, http.MethodGet, firstLink), http.StatusConflict, "Already decided")
	ls.requireUnchanged(second, secondEvents)

	p = getPage(t, http.MethodGet, secondLink)
	requirePage(t, p, http.StatusOK)
	require.Equal(t, second.ID, p.runID(), "the second link shows the second run")
	requirePage(t, decideForm(t, secondLink, p.digest(), "deny", url.Values{"message": {"one change is enough"}}), http.StatusOK,
		"Denied.", "Your reason: one change is enough", second.ID)
	done := ls.alice.waitStatus(second.ID, "COMPLETED")
	require.NotNil(t, done.Decision)
	assert.Equal(t, "deny", done.Decision.Decision.Action)
	assert.Equal(t, "one change is enough", done.Decision.Decision.Message)
	assert.Equal(t, 0, toolExecutions(t, ls.alice.events(second.ID), "write_document"), "the denied write did not run")
	first = ls.alice.run(first.ID)
	assert.Equal(t, "approve", first.Decision.Decision.Action, "the first run's decision stands")
}

// TestApprovalLinkBadForms posts broken forms to a good link: each gets its
// error page and status, nothing changes, and the link still works.
func TestApprovalLinkBadForms(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{})
	run, link := ls.suspend(nil)
	digest := run.Pending.TurnDigest
	good := url.Values{"digest": {digest}, "action": {"approve"}}.Encode()
	evCount := len(ls.alice.events(run.ID))

	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		want        string
	}{
		{"JSON instead of a form", "application/json", `{"digest":"` + digest + `","action":"approve"}`, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"form body sent as JSON", "application/json", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"text/plain", "text/plain", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"multipart", "multipart/form-data; boundary=x", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"no Content-Type", "", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"malformed Content-Type", "application/x-www-form-urlencoded; ;;", good, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"oversized form", formType, good + "&message=" + strings.Repeat("x", 17<<10), http.StatusRequestEntityTooLarge, "The form is too large."},
		{"malformed encoding", formType, "digest=%zz&action=approve", http.StatusBadRequest, "The form could not be read."},
		{"empty form", formType, "", http.StatusUnprocessableEntity, "no turn digest"},
		{"no digest", formType, "action=approve", http.StatusUnprocessableEntity, "no turn digest"},
		{"malformed digest", formType, "digest=abc&action=approve", http.StatusUnprocessableEntity, "malformed"},
		{"no action", formType, "digest=" + digest, http.StatusUnprocessableEntity, "no action"},
		{"unknown action", formType, "digest=" + digest + "&action=maybe", http.StatusUnprocessableEntity, "unknown action"},
		{"edit through the page", formType, "digest=" + digest + "&action=edit", http.StatusUnprocessableEntity, "only possible through the API"},
		{"action sent twice", formType, good + "&action=deny", http.StatusUnprocessableEntity, "more than once"},
		{"unknown field", formType, good + "&approve_all=yes", http.StatusUnprocessableEntity, "unknown field"},
		{"per-call choice for an unknown call", formType, "digest=" + digest + "&action=per_call&call.toolu_nope=approve", http.StatusUnprocessableEntity, "unknown call id"},
		{"reason too long", formType, "digest=" + digest + "&action=deny&message=" + strings.Repeat("x", 2001), http.StatusUnprocessableEntity, "at most 2000"},
		{"digest of another turn", formType, "digest=" + strings.Repeat("0", 64) + "&action=approve", http.StatusConflict, "reload the run and decide again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := postForm(t, link, tt.contentType, tt.body)
			requirePage(t, p, tt.status, tt.want, "Nothing was changed.")
			ls.requireUnchanged(run, evCount)
		})
	}

	// The link still works, with a charset parameter too.
	requirePage(t, postForm(t, link, formType+"; charset=UTF-8", good), http.StatusOK, "Your decision was recorded")
	ls.alice.waitStatus(run.ID, "COMPLETED")
}

// TestApprovalLinkPerCall: a turn with two writes gets per-call choices on
// the page; approving one and denying the other (with a reason) runs only
// the approved write.
func TestApprovalLinkPerCall(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{script: perCallScript})
	run, link := ls.suspend(nil)
	about := ls.documentText("pages/about.md")

	p := getPage(t, http.MethodGet, link)
	requirePage(t, p, http.StatusOK, "Pending calls: 3 (2 need approval)", "read_document", "runs without approval",
		`name="call.toolu_w_pricing"`, `name="call.toolu_w_about"`, `name="reason.toolu_w_about"`,
		"Submit per-call decisions", "Approve all", "Deny all")
	assert.NotContains(t, p.body, `name="call.toolu_read"`, "no choice for the read that needs no approval")
	text := html.UnescapeString(p.body)
	assert.Contains(t, text, "+Gone.", "the about page's diff")
	assert.Contains(t, text, "+- Team: 12 EUR", "the pricing page's diff")

	// A per-call submit that leaves a call undecided is refused.
	requirePage(t, decideForm(t, link, p.digest(), "per_call", url.Values{"call.toolu_w_pricing": {"approve"}}),
		http.StatusUnprocessableEntity, "choose approve or deny for call", "toolu_w_about")
	ls.requireUnchanged(run, len(ls.alice.events(run.ID)))

	requirePage(t, decideForm(t, link, p.digest(), "per_call", url.Values{
		"call.toolu_w_pricing": {"approve"}, "call.toolu_w_about": {"deny"}, "reason.toolu_w_about": {"keep the about page"},
	}), http.StatusOK, "You decided per call:", "toolu_w_pricing", "approved", "toolu_w_about", "denied", "keep the about page")
	done := ls.alice.waitStatus(run.ID, "COMPLETED")

	require.NotNil(t, done.Decision)
	calls := map[string]string{}
	for _, c := range done.Decision.Decision.Calls {
		calls[c.CallID] = c.Action + ":" + c.Message
	}
	assert.Equal(t, map[string]string{"toolu_w_pricing": "approve:", "toolu_w_about": "deny:keep the about page"}, calls)
	assert.Equal(t, 1, toolExecutions(t, ls.alice.events(run.ID), "write_document"), "only the approved write ran")
	assert.Contains(t, ls.documentText("pages/pricing.md"), "- Team: 12 EUR")
	assert.Equal(t, about, ls.documentText("pages/about.md"), "the denied write did not happen")
}

// TestApprovalLinkDenyReasonReachesModel: a denial with a typed reason is
// stored with the decision and handed to the model as the denied call's
// tool result; the write does not happen.
func TestApprovalLinkDenyReasonReachesModel(t *testing.T) {
	clock := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	demo, err := scripted.Parse(demoScript)
	require.NoError(t, err)
	model := &recordingModel{model: demo}
	ls := startClockedServer(t, clock, model)
	run, link := ls.suspend(nil)
	before := ls.documentText("pages/pricing.md")

	const reason = "Not during the price freeze, see OPS-12."
	p := getPage(t, http.MethodGet, link)
	requirePage(t, p, http.StatusOK)
	requirePage(t, decideForm(t, link, p.digest(), "deny", url.Values{"message": {"  " + reason + "\r\n"}}), http.StatusOK,
		"Denied. The agent is told its calls were not allowed.", "Your reason: "+html.EscapeString(reason))
	done := ls.alice.waitStatus(run.ID, "COMPLETED")

	require.NotNil(t, done.Decision)
	assert.Equal(t, "deny", done.Decision.Decision.Action)
	assert.Equal(t, reason, done.Decision.Decision.Message, "the reason is stored trimmed")
	assert.Equal(t, 0, toolExecutions(t, ls.alice.events(run.ID), "write_document"))
	assert.Equal(t, before, ls.documentText("pages/pricing.md"), "the denied write did not happen")

	results := model.toolResults("toolu_demo_write")
	require.NotEmpty(t, results, "the model was sent a result for the denied call")
	last := results[len(results)-1]
	assert.Contains(t, last.Content, reason, "the model receives the reason")
	assert.True(t, last.IsError, "a denial is an error result")
}

// TestApprovalLinkExpiry moves the clock past the approval deadline: the
// link answers 410 on GET, HEAD and POST and changes nothing, before and
// after the sweep expires the run.
func TestApprovalLinkExpiry(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{now: t0}
	demo, err := scripted.Parse(demoScript)
	require.NoError(t, err)
	ls := startClockedServer(t, clock, demo)
	run, link := ls.suspend(map[string]any{"approval_ttl_seconds": 60})
	deadline := t0.Add(60 * time.Second)
	require.True(t, run.Pending.Deadline.Equal(deadline), "deadline %s, want %s", run.Pending.Deadline, deadline)
	evCount := len(ls.alice.events(run.ID))

	expired := []string{"Approval link expired", "Nothing was changed."}
	tests := []struct {
		name   string
		at     time.Time
		status int
	}{
		{"a millisecond before the deadline", deadline.Add(-time.Millisecond), http.StatusOK},
		{"at the deadline", deadline, http.StatusGone},
		{"an hour after", deadline.Add(time.Hour), http.StatusGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Set(tt.at)
			p := getPage(t, http.MethodGet, link)
			head := getPage(t, http.MethodHead, link)
			requirePage(t, head, tt.status)
			require.Empty(t, head.body)
			if tt.status == http.StatusOK {
				requirePage(t, p, http.StatusOK, "write_document")
				return
			}
			requirePage(t, p, tt.status, expired...)
			requirePage(t, decideForm(t, link, run.Pending.TurnDigest, "approve", nil), tt.status, expired...)
			ls.requireUnchanged(run, evCount)
		})
	}

	// The sweep expires the run; the link stays expired.
	sum, err := ls.app.Sweeper.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Expired, "sweep summary %+v", sum)
	ls.alice.waitStatus(run.ID, "EXPIRED")
	requirePage(t, getPage(t, http.MethodGet, link), http.StatusGone, expired...)
	requirePage(t, decideForm(t, link, run.Pending.TurnDigest, "approve", nil), http.StatusGone, expired...)
	assert.Equal(t, 0, toolExecutions(t, ls.alice.events(run.ID), "write_document"))
}

// TestApprovalLinkReminder: once 80% of the window has passed, the sweep
// mails a reminder with a fresh link, once; both links open the page, the
// first decision through either wins and the other link says so.
func TestApprovalLinkReminder(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{now: t0}
	demo, err := scripted.Parse(demoScript)
	require.NoError(t, err)
	ls := startClockedServer(t, clock, demo)
	run, first := ls.suspend(map[string]any{"approval_ttl_seconds": 1000})
	sweep := func() int {
		t.Helper()
		sum, err := ls.app.Sweeper.Sweep(context.Background())
		require.NoError(t, err)
		require.Zero(t, sum.Errors, "sweep summary %+v", sum)
		return sum.Reminded
	}

	clock.Set(t0.Add(799 * time.Second))
	require.Equal(t, 0, sweep(), "no reminder before 80% of the window")
	clock.Set(t0.Add(800 * time.Second))
	require.Equal(t, 1, sweep(), "a reminder at 80% of the window")
	reminder := ls.linkFor(run.ID, linkApprover, true)
	require.NotEqual(t, first, reminder, "the reminder carries a fresh link")
	clock.Set(t0.Add(900 * time.Second))
	require.Equal(t, 0, sweep(), "one reminder per suspension")
	require.Len(t, eventsOf(ls.alice.events(run.ID), "reminded"), 1)

	for _, link := range []string{first, reminder} {
		p := getPage(t, http.MethodGet, link)
		requirePage(t, p, http.StatusOK, "write_document")
		require.Equal(t, run.ID, p.runID())
	}
	requirePage(t, decideForm(t, reminder, run.Pending.TurnDigest, "approve", nil), http.StatusOK, "Your decision was recorded")
	requirePage(t, decideForm(t, first, run.Pending.TurnDigest, "approve", nil), http.StatusConflict, "already decided by ops@example.com")
	ls.alice.waitStatus(run.ID, "COMPLETED")
	assert.Equal(t, 1, toolExecutions(t, ls.alice.events(run.ID), "write_document"))
}

// requireUnchanged checks that run is still waiting at the same version
// with evCount events: nothing was decided or written.
func (ls *linkServer) requireUnchanged(run runJSON, evCount int) {
	ls.t.Helper()
	now := ls.alice.run(run.ID)
	require.Equal(ls.t, "WAITING_FOR_APPROVAL", now.Status, "run %s", run.ID)
	require.Equal(ls.t, run.Version, now.Version, "run %s version", run.ID)
	require.Nil(ls.t, now.Decision, "run %s has no decision", run.ID)
	require.Len(ls.t, ls.alice.events(run.ID), evCount, "run %s events", run.ID)
}

// requireHeadHasNoBody calls the handler itself with a HEAD event (the HTTP
// server would drop a body anyway) and checks the response has none.
func (ls *linkServer) requireHeadHasNoBody(link string, status int) {
	ls.t.Helper()
	u, err := url.Parse(link)
	require.NoError(ls.t, err)
	token := strings.TrimPrefix(u.Path, "/approvals/")
	resp, err := ls.handle(context.Background(), events.APIGatewayProxyRequest{
		HTTPMethod: http.MethodHead, Path: u.Path, Resource: "/approvals/{token}",
		PathParameters: map[string]string{"token": token},
	})
	require.NoError(ls.t, err)
	require.Equal(ls.t, status, resp.StatusCode)
	require.Empty(ls.t, resp.Body, "HEAD answers without a body")
}

// flipChar changes the character at i to another base64url character.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// swapCase swaps the case of the first letter.
func swapCase(s string) string {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z':
			return s[:i] + strings.ToUpper(string(c)) + s[i+1:]
		case 'A' <= c && c <= 'Z':
			return s[:i] + strings.ToLower(string(c)) + s[i+1:]
		}
	}
	panic(fmt.Sprintf("no letter in %q", s))
}

// twoStepScript proposes one write, then after the decision another.
const twoStepScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"toolu_w1","name":"write_document","input":{"path":"pages/pricing.md","text":"# Pricing\n\n- Team: 12 EUR\n"}}]},
 {"content":[{"type":"tool_use","id":"toolu_w2","name":"write_document","input":{"path":"pages/about.md","text":"# About us\n\nNew.\n"}}]},
 {"content":[{"type":"text","text":"done"}]}
]}`

// TestApprovalLinkSuspendAgain: a resume that suspends again mails a fresh
// link for the new turn; the first link only says "already decided" (by
// whom decided its own turn) and cannot decide the new turn, even with its
// digest.
func TestApprovalLinkSuspendAgain(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{script: twoStepScript})
	first, firstLink := ls.suspend(nil)
	requirePage(t, decideForm(t, firstLink, first.Pending.TurnDigest, "approve", nil), http.StatusOK, "Your decision was recorded")

	var second runJSON
	poll(t, "the second suspension", func() bool {
		second = ls.alice.run(first.ID)
		return second.Status == "WAITING_FOR_APPROVAL" && second.Pending.SuspensionID != first.Pending.SuspensionID
	})
	require.Len(t, eventsOf(ls.alice.waitEventCount(first.ID, "notified", 2), "notified"), 2)
	second = ls.alice.run(first.ID)
	require.NotEqual(t, first.Pending.TurnDigest, second.Pending.TurnDigest)
	evCount := len(ls.alice.events(first.ID))
	secondLink := ls.secondLinkFor(first.ID, firstLink)

	requirePage(t, getPage(t, http.MethodGet, firstLink), http.StatusConflict, "already decided by ops@example.com")
	requirePage(t, decideForm(t, firstLink, second.Pending.TurnDigest, "approve", nil), http.StatusConflict, "already decided")
	ls.requireUnchanged(second, evCount)

	p := getPage(t, http.MethodGet, secondLink)
	requirePage(t, p, http.StatusOK, "pages/about.md")
	require.Equal(t, second.Pending.TurnDigest, p.digest())

	// bob decides the second turn through the API. Each link names the
	// decider of its own turn.
	ls.bob.do(http.MethodPost, "/runs/"+first.ID+"/decision", map[string]any{"turn_digest": second.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
	ls.alice.waitStatus(first.ID, "COMPLETED")
	firstPage := getPage(t, http.MethodGet, firstLink)
	requirePage(t, firstPage, http.StatusConflict, "already decided by ops@example.com", "through an approval link")
	assert.NotContains(t, firstPage.body, "bob", "the first link's turn was not decided by bob")
	requirePage(t, getPage(t, http.MethodGet, secondLink), http.StatusConflict, "already decided by bob", "through the API")
	assert.Equal(t, 2, toolExecutions(t, ls.alice.events(first.ID), "write_document"), "each approved write ran once")
	assert.Len(t, eventsOf(ls.alice.events(first.ID), "decision"), 2)
}

// TestApprovalLinkAfterOtherEnds: when the run stops waiting another way
// (a decision through the API, a cancellation), the link says so and
// changes nothing.
func TestApprovalLinkAfterOtherEnds(t *testing.T) {
	tests := []struct {
		name   string
		end    func(ls *linkServer, run runJSON)
		status string
		want   []string
	}{
		{"decided through the API", func(ls *linkServer, run runJSON) {
			ls.bob.do(http.MethodPost, "/runs/"+run.ID+"/decision", map[string]any{"turn_digest": run.Pending.TurnDigest, "action": "approve"}, http.StatusAccepted, nil)
		}, "COMPLETED", []string{"already decided by bob", "through the API"}},
		{"cancelled", func(ls *linkServer, run runJSON) {
			ls.alice.do(http.MethodPost, "/runs/"+run.ID+"/cancel", nil, http.StatusOK, nil)
		}, "CANCELLED", []string{"Already decided", "cancellation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := startLinkServer(t, linkServerOptions{})
			run, link := ls.suspend(nil)
			tt.end(ls, run)
			ended := ls.alice.waitStatus(run.ID, tt.status)
			requirePage(t, getPage(t, http.MethodGet, link), http.StatusConflict, tt.want...)
			requirePage(t, decideForm(t, link, run.Pending.TurnDigest, "deny", nil), http.StatusConflict, tt.want...)
			head := getPage(t, http.MethodHead, link)
			requirePage(t, head, http.StatusConflict)
			require.Empty(t, head.body)
			assert.Equal(t, ended.Version, ls.alice.run(run.ID).Version, "the link changed nothing")
		})
	}
}

// TestApprovalLinkConcurrentPosts: twenty simultaneous submits of the form
// (a double-click, two devices) and one API decision: exactly one decision
// wins, every other link POST gets the "already decided" page, and the
// write runs once.
func TestApprovalLinkConcurrentPosts(t *testing.T) {
	ls := startLinkServer(t, linkServerOptions{})
	run, link := ls.suspend(nil)
	form := url.Values{"digest": {run.Pending.TurnDigest}, "action": {"approve"}}.Encode()

	const n = 20
	statuses := make(chan int, n)
	apiStatus := make(chan int, 1)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			resp, err := http.Post(link, formType, strings.NewReader(form))
			if err != nil {
				statuses <- -1
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	go func() {
		<-start
		req, _ := http.NewRequest(http.MethodPost, ls.url+"/runs/"+run.ID+"/decision",
			strings.NewReader(`{"turn_digest":"`+run.Pending.TurnDigest+`","action":"approve"}`))
		req.Header.Set("Authorization", "Bearer "+linkBobToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			apiStatus <- -1
			return
		}
		resp.Body.Close()
		apiStatus <- resp.StatusCode
	}()
	close(start)
	count := map[int]int{}
	timeout := time.After(linkWait)
	for range n {
		select {
		case s := <-statuses:
			count[s]++
		case <-timeout:
			t.Fatalf("link POSTs unanswered after %s: %v", linkWait, count)
		}
	}
	var api int
	select {
	case api = <-apiStatus:
	case <-timeout:
		t.Fatalf("the API decision is unanswered after %s", linkWait)
	}

	wins := count[http.StatusOK]
	if api == http.StatusAccepted {
		wins++
	} else {
		assert.Equal(t, http.StatusConflict, api, "the API decision lost")
	}
	require.Equal(t, 1, wins, "exactly one decision wins: link answers %v, API %d", count, api)
	require.Equal(t, n, count[http.StatusOK]+count[http.StatusConflict], "every link POST answered 200 or 409: %v", count)
	done := ls.alice.waitStatus(run.ID, "COMPLETED")
	evs := ls.alice.events(run.ID)
	assert.Len(t, eventsOf(evs, "decision"), 1)
	assert.Equal(t, 1, toolExecutions(t, evs, "write_document"))
	if count[http.StatusOK] == 1 {
		assert.Equal(t, "link", done.Decision.Via)
	} else {
		assert.Equal(t, "api", done.Decision.Via)
	}
}

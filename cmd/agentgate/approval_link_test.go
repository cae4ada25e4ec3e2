package main

// The approval-link story end to end on the local server (embedded store,
// outbox mail): a suspended run mails its e-mail approver a link; GET and
// HEAD of the link never change anything (mail scanners pre-fetch every
// link); a POST of the page's form decides through the same path as the
// API. Every other case of the link routes (bad tokens and forms, expiry,
// other runs and suspensions, four-eyes, per-call choices, concurrent
// posts, reminders) is a unit test in internal/httpapi (approvals_test.go);
// the moto and browser stories are approval_link_integration_test.go and
// approval_browser_integration_test.go.

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApprovalLinkApproveAfterScanners is the story of one link: the mail
// arrives, a scanner fetches the link 20 times with GET and 20 with HEAD,
// the human opens it, sees the call and its diff, approves; the run
// completes with the write done once and the decision audited as the
// approver's, via link. The link then only says "already approved".
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
	already := []string{"Already decided", "already approved by ops@example.com", "through an approval link", "Nothing was changed."}
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

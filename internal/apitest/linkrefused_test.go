package apitest_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

// TestLinkOfOneWhoMayNoLongerDecide: a link opened by someone who may no
// longer decide anything of the held turn (the directory changed while the
// run waited: dave may now approve reads only) shows why, with 403, and no
// form whose answer would be refused; the others' links still show the form
// (tester helper-82 F4).
func TestLinkOfOneWhoMayNoLongerDecide(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	server := func(dir, daveTools string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Validator: validator, Principals: []string{"ann", "bob", "carol", "dave"},
			Dir: dir, Rows: db, States: db,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}`)),
			Governance: governance(t, financeDirectory(daveTools, "bob", "carol", "dave"), twoOfFinance)})
	}
	first := server("", "")
	code, run := whCall(t, first, "POST", "/runs", "ann", `{"prompt":"Raise the Team plan to 12 EUR","approvers":["group:finance"]}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	first.App.Dispatcher.Wait()
	daveLink := first.WaitLinks(t, "dave@example.com", 1)[0]
	bobLink := first.WaitLinks(t, "bob@example.com", 1)[0]
	first.Stop()

	second := server(first.Dir, "read_*")
	open := func(link string) (int, string) {
		u, err := url.Parse(link)
		require.NoError(t, err)
		p := second.As(t, "").Call(t, "GET", u.Path, "", "")
		return p.Status, string(p.Body)
	}
	status, body := open(daveLink)
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, body, "write_document")
	assert.False(t, strings.Contains(body, "<form"), "no form for one who may decide nothing")
	u, err := url.Parse(daveLink)
	require.NoError(t, err)
	head := second.As(t, "").Call(t, "HEAD", u.Path, "", "")
	assert.Equal(t, http.StatusForbidden, head.Status)
	assert.Empty(t, head.Body, "HEAD has no body")
	status, body = open(bobLink)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "<form", "bob may still vote")
}

// A link whose holder was taken out of the run's approvers while it waited
// (dave leaves finance) shows neither the form nor the held calls' text:
// ?call= answers as GET /runs/{id} does for him (reviewer helper-89 F2).
func TestLinkOfOneNoLongerAnApproverShowsNoCallText(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	server := func(dir string, members ...string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Validator: validator, Principals: []string{"ann", "bob", "carol", "dave"},
			Dir: dir, Rows: db, States: db,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"SECRET-PRICE 12 EUR\n"}`)),
			Governance: governance(t, financeDirectory("", members...), twoOfFinance)})
	}
	first := server("", "bob", "carol", "dave")
	code, run := whCall(t, first, "POST", "/runs", "ann", `{"prompt":"Raise the Team plan","approvers":["group:finance"]}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	daveLink := first.WaitLinks(t, "dave@example.com", 1)[0]
	bobLink := first.WaitLinks(t, "bob@example.com", 1)[0]
	first.Stop()

	second := server(first.Dir, "bob", "carol")
	code, _ = whCall(t, second, "GET", "/runs/"+id, "dave", "")
	require.Equal(t, http.StatusForbidden, code, "the API no longer lets dave read the run")
	text := func(link string) (int, string) {
		u, err := url.Parse(link)
		require.NoError(t, err)
		p := second.As(t, "").Call(t, "GET", u.Path+"?call=w1&part=input", "", "")
		return p.Status, string(p.Body)
	}
	status, body := text(daveLink)
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.NotContains(t, body, "SECRET-PRICE", "one no longer an approver reads the held input")
	assert.Contains(t, body, "no longer")
	status, body = text(bobLink)
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "SECRET-PRICE", "an approver still reads it")
}

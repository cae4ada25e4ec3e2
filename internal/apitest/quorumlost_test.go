package apitest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
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
	"github.com/agentgate/agentgate/internal/runs/embedded"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// financeDirectory has finance as the members given (person ids of ann,
// bob, carol and dave); daveTools, when set, limits what dave may approve.
func financeDirectory(daveTools string, members ...string) string {
	b, _ := json.Marshal(members)
	if daveTools != "" {
		daveTools = `, "tools": ["` + daveTools + `"]`
	}
	return `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]` + daveTools + `}
 ],
 "groups": [{"name": "finance", "members": ` + string(b) + `}]}`
}

const twoOfFinance = `{"version": 1, "rules": [
  {"id": "pricing", "description": "pricing changes need two people from finance", "tools": ["write_document"],
   "when": "args.path == 'pages/pricing.md'",
   "outcome": "require_approval", "approvers": ["group:finance"], "required_approvals": 2}]}`

// voteFirst is a RowStore that, once, just before the sweep's write that
// ends a run approval_unmeetable, lets a vote land (vote, through the API):
// the write then finds the run changed since its check read it.
type voteFirst struct {
	runs.RowStore
	once sync.Once
	vote func()
}

func (v *voteFirst) Write(ctx context.Context, w runs.Write) error {
	if w.Run != nil && w.Run.Status == runs.StatusExpired && w.Run.Reason == loop.ReasonApprovalUnmeetable && v.vote != nil {
		v.once.Do(v.vote)
	}
	return v.RowStore.Write(ctx, w)
}

// TestQuorumLostWhileWaitingEndToEnd: a run waits for 2 of finance; the
// local server is restarted with other directories while it waits. With
// bob gone from finance, carol and dave are still enough: the sweep's
// quorum check leaves the run waiting. With dave gone too, carol alone is
// left: the check finds the approval cannot be given, and marks the run,
// which waits on. Dave is back (the directory fixed) by the next check,
// which clears the mark. Gone again: marked again at a check; at the next
// one the check finds the approval still cannot be given, but carol's vote
// lands between its read and its write, and the vote wins (the write was
// conditional on the row it read). The run is checked again on the row
// the vote left, finds no one who has not voted for the second approval:
// the run ends EXPIRED (approval_unmeetable), with the call and why in its
// output and its expired event, run.expired to its webhook, 410 to a late
// decision and the links' page saying the approval is no longer possible.
func TestQuorumLostWhileWaitingEndToEnd(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	runQuorumLostWhileWaiting(t, func(o *apitest.Options) { o.Rows, o.States = db, db })
}

func runQuorumLostWhileWaiting(t *testing.T, store func(*apitest.Options)) {
	_, signer, hook := newSecret(t)
	rv := &receiver{t: t, hook: hook}
	hs := httptest.NewServer(rv)
	defer hs.Close()
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	hooks := &app.Webhooks{Signer: signer, Policy: webhook.Policy{AllowHTTP: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	principals := []string{"ann", "bob", "carol", "dave"}
	server := func(dir, daveTools string, members []string, rows func(runs.RowStore) runs.RowStore) *apitest.Server {
		o := apitest.Options{Now: clock.Now, Validator: validator, Principals: principals, Webhooks: hooks, Dir: dir,
			Script:     script(toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"Team: 12 EUR\n"}`)),
			Governance: governance(t, financeDirectory(daveTools, members...), twoOfFinance)}
		store(&o)
		if rows != nil {
			o.Rows = rows(o.Rows)
		}
		return apitest.Start(t, o)
	}
	get := func(s *apitest.Server, id string) map[string]any {
		t.Helper()
		code, run := whCall(t, s, "GET", "/runs/"+id, "ann", "")
		require.Equal(t, http.StatusOK, code, "%v", run)
		return run
	}

	first := server("", "", []string{"bob", "carol", "dave"}, nil)
	code, run := whCall(t, first, "POST", "/runs", "ann", `{"prompt":"Raise the Team plan to 12 EUR","approvers":["group:finance"],"webhook_url":"`+hs.URL+`/hook"}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	run = get(first, id)
	require.Equal(t, "WAITING_FOR_APPROVAL", run["status"], "%v", run)
	digest := run["pending"].(map[string]any)["turn_digest"].(string)
	daveLink := first.WaitLinks(t, "dave@example.com", 1)[0]
	first.Stop()

	// bob left finance: carol and dave still make two.
	second := server(first.Dir, "", []string{"carol", "dave"}, nil)
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err := second.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Zero(t, sum.Unmeetable)
	assert.Equal(t, "WAITING_FOR_APPROVAL", get(second, id)["status"])
	second.Stop()

	row := func(s *apitest.Server) *runs.Run {
		t.Helper()
		r, err := s.App.Store.Get(t.Context(), id)
		require.NoError(t, err)
		return r
	}

	// dave may no longer approve writes (the directory's tool gate): carol
	// alone may decide, and the call needs two. (A finance of carol alone
	// would not load with this policy: a rule may not ask for more
	// approvals than its approvers are persons.) The first check that
	// finds it marks the run, which waits on.
	lost := server(first.Dir, "read_*", []string{"carol", "dave"}, nil)
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = lost.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "found once: %+v", sum)
	assert.Equal(t, 1, sum.QuorumChecked, "%+v", sum)
	assert.Equal(t, "WAITING_FOR_APPROVAL", get(lost, id)["status"])
	assert.Equal(t, clock.Now(), row(lost).FirstLost(), "marked")
	lost.Stop()

	// The directory is fixed before the next check: the mark is cleared.
	fixed := server(first.Dir, "", []string{"carol", "dave"}, nil)
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = fixed.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "%+v", sum)
	assert.Equal(t, "WAITING_FOR_APPROVAL", get(fixed, id)["status"])
	assert.True(t, row(fixed).FirstLost().IsZero(), "the mark is cleared")
	fixed.Stop()

	// Broken again: marked at one check, ended at the next, but carol's
	// vote lands first.
	var third *apitest.Server
	race := &voteFirst{vote: func() {
		code, out := whCall(t, third, "POST", "/runs/"+id+"/decision", "carol", `{"turn_digest":"`+digest+`","action":"approve"}`)
		assert.Equal(t, http.StatusAccepted, code, "carol's vote: %v", out)
	}}
	third = server(first.Dir, "read_*", []string{"carol", "dave"}, func(rs runs.RowStore) runs.RowStore { race.RowStore = rs; return race })
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = third.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "found once: %+v", sum)
	require.False(t, row(third).FirstLost().IsZero(), "marked")
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = third.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, sum.Unmeetable, "the vote landed first: %+v", sum)
	run = get(third, id)
	require.Equal(t, "WAITING_FOR_APPROVAL", run["status"], "the vote that lands first wins: %v", run)
	require.Len(t, run["votes"], 1, "carol's vote is recorded")

	sum, err = third.App.Sweeper.Sweep(t.Context()) // checked again on the row the vote left
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	run = get(third, id)
	assert.Equal(t, "EXPIRED", run["status"])
	assert.Equal(t, "approval_unmeetable", run["termination_reason"])
	out, _ := json.Marshal(run["output"])
	assert.Contains(t, string(out), `call w1 (write_document): approval can no longer be given: rule \"pricing\" needs 2 approvals from distinct persons and has 1, but nobody who has not voted may decide`)
	assert.Nil(t, run["decision"], "nobody decided")

	var expired map[string]any
	for _, e := range eventsOf(t, third, third.Client(t), "ann", id) {
		if e["type"] == runs.EventExpired {
			expired = e
		}
	}
	require.NotNil(t, expired, "an expired event")
	assert.Equal(t, "purge", expired["actor"])
	data := expired["data"].(map[string]any)
	assert.Equal(t, "approval_unmeetable", data["reason"])
	calls := data["calls"].([]any)
	require.Len(t, calls, 1)
	assert.Equal(t, "w1", calls[0].(map[string]any)["call_id"])
	assert.Contains(t, calls[0].(map[string]any)["detail"], "nobody who has not voted may decide")

	code, refused := whCall(t, third, "POST", "/runs/"+id+"/decision", "dave", `{"turn_digest":"`+digest+`","action":"approve"}`)
	assert.Equal(t, http.StatusGone, code)
	assert.Contains(t, errMessage(refused), "approval_unmeetable")
	// bob, gone from finance, may no longer see the run: his late decision
	// is refused 403 as his GET is, telling him nothing of how it ended
	// (README; tester helper-109 P3-12).
	code, refused = whCall(t, third, "GET", "/runs/"+id, "bob", "")
	assert.Equal(t, http.StatusForbidden, code, "%v", refused)
	code, refused = whCall(t, third, "POST", "/runs/"+id+"/decision", "bob", `{"turn_digest":"`+digest+`","action":"approve"}`)
	assert.Equal(t, http.StatusForbidden, code, "%v", refused)
	assert.NotContains(t, errMessage(refused), "approval_unmeetable")
	u, err := url.Parse(daveLink)
	require.NoError(t, err)
	page := third.As(t, "").Call(t, "GET", u.Path, "", "")
	assert.Equal(t, http.StatusGone, page.Status)
	assert.Contains(t, string(page.Body), "Approval no longer possible")

	sweep(t, third) // the run.expired delivery
	var types []string
	var last webhook.Payload
	for _, d := range rv.deliveries() {
		types = append(types, string(d.Payload.Type))
		last = d.Payload
	}
	assert.Equal(t, []string{"run.waiting_for_approval", "run.expired"}, types)
	assert.Equal(t, runs.StatusExpired, last.Data.Status)
	assert.Equal(t, loop.ReasonApprovalUnmeetable, last.Data.Reason)
	assert.False(t, strings.Contains(string(out), "Team: 12 EUR"), "the output carries no tool arguments")
}

// TestQuorumLostCallByCall: a run ends only for a held call two checks an
// hour apart both found lost, not for any call after any finding: check 1
// finds the write lost (the writers lose write_document), the next deploy
// fixes the writers but takes delete_document from the deleters, and
// check 2 finds only the delete lost, for the first time: the run waits
// on, and check 3, finding the delete lost still, ends it naming the
// delete (reviewer helper-89 F1).
func TestQuorumLostCallByCall(t *testing.T) {
	db, err := embedded.Open(filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clock := clocktest.New(time.Now().UTC().Truncate(time.Millisecond))
	dirWith := func(writerTools, deleterTools string) string {
		d := splitDirectory
		if writerTools != "" {
			d = strings.Replace(d, `"aliases": ["ann@example.com", "ann"]`, `"aliases": ["ann@example.com", "ann"], "tools": ["`+writerTools+`"]`, 1)
			d = strings.Replace(d, `"aliases": ["bob@example.com", "bob"]`, `"aliases": ["bob@example.com", "bob"], "tools": ["`+writerTools+`"]`, 1)
		}
		if deleterTools != "" {
			d = strings.Replace(d, `"aliases": ["carol@example.com", "carol"]`, `"aliases": ["carol@example.com", "carol"], "tools": ["`+deleterTools+`"]`, 1)
			d = strings.Replace(d, `"aliases": ["dave@example.com", "dave"]`, `"aliases": ["dave@example.com", "dave"], "tools": ["`+deleterTools+`"]`, 1)
		}
		return d
	}
	server := func(sdir, dir string) *apitest.Server {
		return apitest.Start(t, apitest.Options{Now: clock.Now, Principals: []string{"frank", "ann", "bob", "carol", "dave"}, Dir: sdir,
			Rows: db, States: db, Script: writeAndDelete, Governance: governance(t, dir, splitPolicy)})
	}
	first := server("", dirWith("", ""))
	code, run := whCall(t, first, "POST", "/runs", "frank", `{"prompt":"write a, delete pricing","approvers":["group:writers"]}`)
	require.Equal(t, http.StatusAccepted, code, "%v", run)
	id := run["id"].(string)
	first.App.Dispatcher.Wait()
	r, err := first.App.Store.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, "WAITING_FOR_APPROVAL", string(r.Status))
	require.False(t, r.QuorumCheckAt.IsZero())
	first.Stop()

	// D1: the writers lose write_document: the write is lost. Marked.
	d1 := server(first.Dir, dirWith("read_*", ""))
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err := d1.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, sum.Unmeetable, "%+v", sum)
	r, _ = d1.App.Store.Get(t.Context(), id)
	require.NotEmpty(t, r.QuorumLost, "marked")
	d1.Stop()

	// D2 (the fix of D1, deployed with a new mistake): writers fine, the
	// deleters lose delete_document. First time the delete is found lost.
	d2 := server(first.Dir, dirWith("", "read_*"))
	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = d2.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	r, _ = d2.App.Store.Get(t.Context(), id)
	require.Zero(t, sum.Unmeetable, "the delete was found lost by one check only, yet the run ended: %+v (status %s)", sum, r.Status)
	assert.Equal(t, "WAITING_FOR_APPROVAL", string(r.Status))
	var marked []string
	for _, m := range r.QuorumLost {
		marked = append(marked, m.CallID)
	}
	require.Len(t, marked, 1, "only the delete is marked")
	since, _ := r.LostSince(marked[0])
	assert.Equal(t, clock.Now(), since, "marked by this check")

	clock.Advance(service.DefaultQuorumCheckEvery)
	sum, err = d2.App.Sweeper.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Unmeetable, "%+v", sum)
	r, _ = d2.App.Store.Get(t.Context(), id)
	assert.Equal(t, "EXPIRED", string(r.Status))
	assert.Contains(t, string(r.Output), "delete_document")
	assert.NotContains(t, string(r.Output), "write_document", "the write was found lost once, an hour before it was fixed")
}

package apitest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/apitest"
	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/runs"
)

const quorumDirectory = `{"version": 1,
 "persons": [
  {"id": "ann",   "aliases": ["ann@example.com", "ann"]},
  {"id": "bob",   "aliases": ["bob@example.com", "bob"]},
  {"id": "carol", "aliases": ["carol@example.com", "carol"]},
  {"id": "dave",  "aliases": ["dave@example.com", "dave"]},
  {"id": "erin",  "aliases": ["erin@example.com", "erin"]},
  {"id": "frank", "aliases": ["frank@example.com", "frank"]}
 ],
 "groups": [{"name": "five", "members": ["ann", "bob", "carol", "dave", "erin"]}]
}`

const quorumPolicy = `{"version": 1, "rules": [
  {"id": "pricing-two-of-five", "description": "pricing changes need two of the five", "tools": ["write_document"],
   "outcome": "require_approval", "approvers": ["group:five"], "required_approvals": 2}
 ]}`

var quorumVoters = []string{"ann", "bob", "carol", "dave", "erin"}

// runQuorumRace: 5 approvers, N = 2, 50 concurrent votes through the HTTP
// API (each approver ten times) -> exactly one transition, exactly two
// counted approvals, and the write runs once.
func runQuorumRace(t *testing.T, opts ...func(*apitest.Options)) {
	o := apitest.Options{Principals: append([]string{"frank"}, quorumVoters...), Governance: governance(t, quorumDirectory, quorumPolicy)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"update pricing","approvers":["group:five"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "frank", id)
	if run["votes_needed"] != float64(2) {
		t.Fatalf("votes_needed %v, want 2", run["votes_needed"])
	}
	digest := run["pending"].(map[string]any)["turn_digest"].(string)

	// Everyone of the group finds it in their inbox, with the votes needed.
	for _, who := range quorumVoters {
		_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
		list := inbox["approvals"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["run_id"] != id || list[0].(map[string]any)["votes_needed"] != float64(2) ||
			list[0].(map[string]any)["votes_missing"] != float64(2) {
			t.Errorf("%s's inbox: %v, want the run with 2 votes needed and 2 missing", who, inbox)
		}
	}
	// Under a quorum a vote may be per call, but never an edit.
	status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, `{"turn_digest":"`+digest+`","calls":[{"call_id":"toolu_write","action":"edit","input":{"path":"pages/pricing.md","text":"x"}}]}`)
	if status != 422 || !strings.Contains(errMessage(out), "an edit would change what the other approvers approved") {
		t.Fatalf("edit in a vote: %d %v, want 422", status, out)
	}

	// Half the votes whole-turn, half per call.
	const n = 50
	var accepted, conflicts atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"turn_digest":"` + digest + `","action":"approve"}`
			if i%2 == 1 {
				body = `{"turn_digest":"` + digest + `","calls":[{"call_id":"toolu_write","action":"approve"}]}`
			}
			status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", quorumVoters[i%len(quorumVoters)], jsonCT, body)
			switch status {
			case http.StatusAccepted:
				accepted.Add(1)
			case http.StatusConflict:
				conflicts.Add(1)
			default:
				t.Errorf("vote %d: %d %v", i, status, out)
			}
		})
	}
	wg.Wait()
	done := waitAs(t, s, c, "frank", id, "COMPLETED")
	votes, _ := done["votes"].([]any)
	decisions, votesCast, writes := 0, 0, 0
	for _, e := range eventsOf(t, s, c, "frank", id) {
		switch e["type"] {
		case runs.EventDecision:
			decisions++
		case runs.EventVote:
			votesCast++
		case runs.EventToolExecuted:
			if e["data"].(map[string]any)["tool"] == "write_document" {
				writes++
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, "content", "pages", "pricing.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quorum over HTTP: %d votes by %d approvers, N=2: %d accepted (202), %d refused (409), %d counted votes, %d decision (transition), write executed %d time(s)",
		n, len(quorumVoters), accepted.Load(), conflicts.Load(), votesCast, decisions, writes)
	if accepted.Load() != 2 || conflicts.Load() != n-2 {
		t.Errorf("%d votes accepted, %d refused; want 2 and %d", accepted.Load(), conflicts.Load(), n-2)
	}
	if len(votes) != 2 || votesCast != 2 || decisions != 1 || writes != 1 {
		t.Errorf("votes %d (events %d), decisions %d, writes %d; want 2, 2, 1, 1", len(votes), votesCast, decisions, writes)
	}
	if v0, v1 := votes[0].(map[string]any)["by"], votes[1].(map[string]any)["by"]; v0 == v1 {
		t.Errorf("two votes by %v: want two persons", v0)
	}
	if !strings.Contains(string(b), "12 EUR") {
		t.Errorf("pricing.md = %q: the write did not run", b)
	}
}

func TestQuorumUnderConcurrency(t *testing.T) { runQuorumRace(t) }

// quorumWaiting starts a server with the quorum policy and a run of frank's
// that waits for two of the five, notified; it returns the run's id and
// turn digest.
func quorumWaiting(t *testing.T, opts ...func(*apitest.Options)) (*apitest.Server, *http.Client, string, string) {
	t.Helper()
	o := apitest.Options{Principals: append([]string{"frank"}, quorumVoters...), Governance: governance(t, quorumDirectory, quorumPolicy)}
	for _, f := range opts {
		f(&o)
	}
	s := start(t, o)
	c := s.Client(t)
	_, run, _ := call(t, s, c, "POST", "/runs", "frank", jsonCT, `{"prompt":"update pricing","approvers":["group:five"]}`)
	id := run["id"].(string)
	waitAs(t, s, c, "frank", id, "WAITING_FOR_APPROVAL")
	run = notified(t, s, c, "frank", id)
	return s, c, id, run["pending"].(map[string]any)["turn_digest"].(string)
}

// TestQuorumVotesThroughLinks: each approver's link is their vote; the
// approval page and the mail show the rule, the votes so far and who is
// still needed; the initiator cannot vote; the same person twice is 409.
func TestQuorumVotesThroughLinks(t *testing.T) {
	s, c, id, digest := quorumWaiting(t)
	if n := len(s.Links("frank@example.com")); n != 0 {
		t.Errorf("the initiator got %d links", n)
	}
	annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
	_, page := get(t, s, c, "GET", s.URL+annLink, "")
	for _, want := range []string{"pricing-two-of-five", "pricing changes need two of the five", "0 of 2 approvals"} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page does not show %q", want)
		}
	}
	mail := s.Mail()
	for _, want := range []string{"pricing-two-of-five", "2 approvals"} {
		if !strings.Contains(mail, want) {
			t.Errorf("the approval mail does not show %q", want)
		}
	}
	// An edit posted to the page is refused saying why: under a quorum the
	// API takes none either, so the page does not send ann there.
	edit := (&apitest.Caller{URL: s.URL, HTTP: c}).Call(t, "POST", annLink, formCT, form("digest", digest, "action", "edit"))
	if body := string(edit.Body); edit.Status != 422 || !strings.Contains(body, "needs approvals from more than one person, so no one can edit its calls") || strings.Contains(body, "only possible through the API") {
		t.Errorf("an edit posted to ann's link: %d, want 422 saying no one can edit under the quorum:\n%s", edit.Status, edit.Body)
	}
	voted := (&apitest.Caller{URL: s.URL, HTTP: c}).Call(t, "POST", annLink, formCT, form("digest", digest, "action", "approve"))
	if voted.Status != 200 || !strings.Contains(string(voted.Body), "Your vote was recorded") || !strings.Contains(string(voted.Body), "1 more approval") {
		t.Fatalf("ann's link: %d, want the page to say her vote was recorded and 1 more approval is needed:\n%s", voted.Status, voted.Body)
	}
	if status, page := get(t, s, c, "GET", s.URL+annLink, ""); status != 409 || !strings.Contains(page, "You already voted (approve)") || strings.Contains(page, "already decided") {
		t.Errorf("ann's used link while the vote goes on: %d, want 409 saying she voted, not that it was decided:\n%s", status, page)
	}
	_, run, _ := call(t, s, c, "GET", "/runs/"+id, "frank", "", "")
	if run["status"] != "WAITING_FOR_APPROVAL" || run["votes_needed"] != float64(1) {
		t.Fatalf("after one vote: %v / %v, want waiting with 1 needed", run["status"], run["votes_needed"])
	}
	// Ann again, through the API: 409; the page of another approver shows ann's vote.
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 409 || !strings.Contains(errMessage(out), "already voted") {
		t.Errorf("ann twice: %d %v, want 409", status, out)
	}
	bobLink := linkPath(t, s.WaitLinks(t, "bob@example.com", 1)[0])
	_, page = get(t, s, c, "GET", s.URL+bobLink, "")
	for _, want := range []string{"1 of 2 approvals", "ann"} {
		if !strings.Contains(page, want) {
			t.Errorf("bob's page does not show %q", want)
		}
	}
	if status, _, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "frank", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 403 {
		t.Errorf("the initiator voted: %d, want 403", status)
	}
	if status, _, _ := call(t, s, c, "POST", bobLink, "", formCT, form("digest", digest, "action", "approve")); status != 200 {
		t.Fatalf("bob's link: %d", status)
	}
	waitAs(t, s, c, "frank", id, "COMPLETED")
}

// TestQuorumVoterIsNoLongerAsked: once a person has voted (here through
// the API), the run leaves their inbox while it stays in the others' (who
// see one approval of the two missing, as GET /runs/{id} says), and their
// mailed link answers that they voted instead of showing the form.
func TestQuorumVoterIsNoLongerAsked(t *testing.T) {
	s, c, id, digest := quorumWaiting(t)
	annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
	if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "ann", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 202 {
		t.Fatalf("ann's vote: %d %v", status, out)
	}
	for who, want := range map[string]int{"ann": 0, "bob": 1, "erin": 1} {
		_, inbox, _ := call(t, s, c, "GET", "/approvals", who, "", "")
		list := inbox["approvals"].([]any)
		if n := len(list); n != want {
			t.Errorf("%s's inbox has %d entries after ann's vote, want %d: %v", who, n, want, inbox)
			continue
		}
		if want == 1 && (list[0].(map[string]any)["votes_needed"] != float64(2) || list[0].(map[string]any)["votes_missing"] != float64(1)) {
			t.Errorf("%s's inbox after ann's vote: %v, want 2 votes needed and 1 missing", who, list[0])
		}
	}
	if _, run, _ := call(t, s, c, "GET", "/runs/"+id, "bob", "", ""); run["votes_needed"] != float64(1) {
		t.Errorf("GET /runs/{id} after ann's vote: votes_needed %v, want 1 (what the inbox calls votes_missing)", run["votes_needed"])
	}
	status, page := get(t, s, c, "GET", s.URL+annLink, "")
	if status != 409 || !strings.Contains(page, "You already voted (approve)") || strings.Contains(page, "<form") {
		t.Errorf("ann's link after her vote: %d, want 409 saying she voted and no form:\n%s", status, page)
	}
	if status, _ := get(t, s, c, "HEAD", s.URL+annLink, ""); status != 409 {
		t.Errorf("HEAD of ann's link: %d, want 409", status)
	}
	bobLink := linkPath(t, s.WaitLinks(t, "bob@example.com", 1)[0])
	if status, page := get(t, s, c, "GET", s.URL+bobLink, ""); status != 200 || !strings.Contains(page, "1 of 2 approvals") {
		t.Errorf("bob's link: %d, want the form with ann's vote", status)
	}
}

// TestQuorumVoterLinkAfterTheVoteEnded: a voter's used link says what
// became of the turn they voted on, like everyone's link: 410 once the
// window closed undecided (before and after the sweep ends the run), "Run
// cancelled" after a cancel, and "Already decided", with their vote
// counted, once another's vote decided it. Never "already decided" for a
// turn no one decided.
func TestQuorumVoterLinkAfterTheVoteEnded(t *testing.T) {
	vote := func(t *testing.T, s *apitest.Server, c *http.Client, link, digest string) {
		t.Helper()
		voted := (&apitest.Caller{URL: s.URL, HTTP: c}).Call(t, "POST", link, formCT, form("digest", digest, "action", "approve"))
		if voted.Status != 200 || !strings.Contains(string(voted.Body), "1 more approval") {
			t.Fatalf("vote by link: %d, want 200 with 1 more approval needed:\n%s", voted.Status, voted.Body)
		}
	}
	pageSays := func(t *testing.T, s *apitest.Server, c *http.Client, who, link string, status int, want, absent []string) {
		t.Helper()
		got, page := get(t, s, c, "GET", s.URL+link, "")
		if got != status {
			t.Errorf("%s's link: %d, want %d:\n%s", who, got, status, page)
		}
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s's link does not say %q:\n%s", who, w, page)
			}
		}
		for _, w := range absent {
			if strings.Contains(page, w) {
				t.Errorf("%s's link says %q:\n%s", who, w, page)
			}
		}
		if got, _ := get(t, s, c, "HEAD", s.URL+link, ""); got != status {
			t.Errorf("HEAD of %s's link: %d, want %d", who, got, status)
		}
	}
	t.Run("window closed", func(t *testing.T) {
		clock := clocktest.New(time.Now().UTC())
		s, c, id, digest := quorumWaiting(t, func(o *apitest.Options) { o.Now = clock.Now })
		annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
		bobLink := linkPath(t, s.WaitLinks(t, "bob@example.com", 1)[0])
		vote(t, s, c, annLink, digest)
		clock.Advance(169 * time.Hour) // past any approval window
		expired := []string{"Approval link expired"}
		for who, link := range map[string]string{"ann": annLink, "bob": bobLink} {
			pageSays(t, s, c, who, link, 410, expired, []string{"already", "Already"})
		}
		if got := (&apitest.Caller{URL: s.URL, HTTP: c}).Call(t, "POST", annLink, formCT, form("digest", digest, "action", "approve")); got.Status != 410 {
			t.Errorf("ann's form after the window: %d, want 410:\n%s", got.Status, got.Body)
		}
		if _, err := s.App.Sweeper.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitAs(t, s, c, "frank", id, "EXPIRED")
		for who, link := range map[string]string{"ann": annLink, "bob": bobLink} {
			pageSays(t, s, c, who, link, 410, expired, []string{"already", "Already"})
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s, c, id, digest := quorumWaiting(t)
		annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
		bobLink := linkPath(t, s.WaitLinks(t, "bob@example.com", 1)[0])
		vote(t, s, c, annLink, digest)
		if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/cancel", "frank", "", ""); status != 200 {
			t.Fatalf("cancel: %d %v", status, out)
		}
		for who, link := range map[string]string{"ann": annLink, "bob": bobLink} {
			pageSays(t, s, c, who, link, 409, []string{"Run cancelled"}, []string{"already", "Already"})
		}
	})
	t.Run("decided by another vote", func(t *testing.T) {
		s, c, id, digest := quorumWaiting(t)
		annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
		bobLink := linkPath(t, s.WaitLinks(t, "bob@example.com", 1)[0])
		carolLink := linkPath(t, s.WaitLinks(t, "carol@example.com", 1)[0])
		vote(t, s, c, annLink, digest)
		if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 202 {
			t.Fatalf("bob's vote: %d %v", status, out)
		}
		waitAs(t, s, c, "frank", id, "COMPLETED")
		// Two persons decided it: the page names both, by person (ann
		// voted through her link as ann@example.com, bob through the API
		// as bob), and the vote that completed the turn, not only its voter.
		decided := []string{"Already decided", "already approved by the votes of ann and bob; the last, which completed it, was bob&#39;s",
			"<code>toolu_write</code>)</span>: approved by ann and bob"}
		pageSays(t, s, c, "ann", annLink, 409, append(decided, "Your vote (approve) was recorded before that and counted."), nil)
		pageSays(t, s, c, "bob", bobLink, 409, decided, []string{"Your vote"})
		pageSays(t, s, c, "carol", carolLink, 409, decided, []string{"Your vote"})
	})
	t.Run("decided, and the run holds another turn", func(t *testing.T) {
		twoWrites := `{"turns":[{"content":[` + toolUse("w1", "write_document", `{"path":"pages/pricing.md","text":"a"}`) + `]},` +
			`{"content":[` + toolUse("w2", "write_document", `{"path":"pages/pricing.md","text":"b"}`) + `]},{"content":[{"type":"text","text":"done"}]}]}`
		s, c, id, digest := quorumWaiting(t, func(o *apitest.Options) { o.Script = twoWrites })
		annLink := linkPath(t, s.WaitLinks(t, "ann@example.com", 1)[0])
		vote(t, s, c, annLink, digest)
		if status, out, _ := call(t, s, c, "POST", "/runs/"+id+"/decision", "bob", jsonCT, `{"turn_digest":"`+digest+`","action":"approve"}`); status != 202 {
			t.Fatalf("bob's vote: %d %v", status, out)
		}
		s.WaitLinks(t, "ann@example.com", 2) // the second turn is held
		// From the decision event of the earlier turn, which names them.
		pageSays(t, s, c, "ann", annLink, 409, []string{"Already decided", "already approved by the votes of ann and bob; the last, which completed it, was bob&#39;s",
			"<code>w1</code>)</span>: approved by ann and bob", "Your vote (approve) was recorded before that and counted."}, nil)
	})
}

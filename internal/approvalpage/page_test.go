package approvalpage_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestConfirmGolden(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*approvalpage.ConfirmPage)
	}{
		{"confirm_per_call.html", func(*approvalpage.ConfirmPage) {}},
		{"confirm_single.html", func(p *approvalpage.ConfirmPage) { p.Calls = p.Calls[:1]; p.FormAction = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := confirmPage()
			tt.modify(&p)
			status, body := approvalpage.Confirm(p)
			if status != http.StatusOK {
				t.Errorf("status = %d, want 200", status)
			}
			assertSafe(t, body)
			golden(t, tt.name, body)
		})
	}
}

func TestConfirmForm(t *testing.T) {
	_, body := approvalpage.Confirm(confirmPage())
	wants := []string{
		`<form method="post" action="/prod/approvals/q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80" enctype="application/x-www-form-urlencoded">`,
		`<input type="hidden" name="digest" value="` + digest + `">`,
		`name="action" value="approve"`,
		`name="action" value="deny"`,
		`name="action" value="per_call"`,
		`<textarea id="message" name="message" maxlength="2000">`,
		`name="call.toolu_01" value="approve"`, `name="call.toolu_01" value="deny"`, `name="reason.toolu_01"`,
		`name="call.toolu_02" value="approve"`, `name="reason.toolu_02"`,
		"&lt;script&gt;", "Sat, 14 Mar 2026 15:09 UTC", "alice@example.com",
		"send_email", "read_document", "runs without approval",
	}
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("confirm page lacks %q", w)
		}
	}
	// The read-only sibling gets no choice.
	if strings.Contains(body, "call.toolu_03") {
		t.Error("confirm page offers a choice for a call that needs no approval")
	}
	// One form, posting; no GET form or link that could decide.
	if n := strings.Count(body, "<form"); n != 1 {
		t.Errorf("%d forms, want 1", n)
	}
	if regexp.MustCompile(`(?i)<a\s`).MatchString(body) {
		t.Error("confirm page has a link; deciding must need a POST")
	}

	denied := confirmPage()
	denied.Calls[2].Denied = "production documents are never deleted by an agent"
	if _, b := approvalpage.Confirm(denied); !strings.Contains(b, `<span class="tag">denied by policy</span>`) || strings.Contains(b, "runs without approval") {
		t.Error("a call the policy denied is not labelled denied by policy (or is labelled as running without approval)")
	}

	rejected := confirmPage()
	rejected.Calls[2].Tool, rejected.Calls[2].Effect, rejected.Calls[2].Rejected = "no_such_tool", "", `unknown tool "no_such_tool"`
	if _, b := approvalpage.Confirm(rejected); !strings.Contains(b, `<span class="tag">cannot run</span>`) || !strings.Contains(b, "unknown tool &#34;no_such_tool&#34;") ||
		strings.Contains(b, "runs without approval") {
		t.Error("a call that cannot run is not labelled cannot run with why (or is labelled as running without approval)")
	}

	_, single := approvalpage.Confirm(approvalpage.ConfirmPage{Calls: threeCalls()[:1], TurnDigest: digest, Deadline: time.Now()})
	if strings.Contains(single, "per_call") || strings.Contains(single, "call.toolu_01") {
		t.Error("a turn with one call needing approval shows per-call choices")
	}
	if strings.Contains(single, "action=") {
		t.Error("an empty FormAction should leave the action attribute out")
	}
}

func TestConfirmEscapesHostileIDs(t *testing.T) {
	p := confirmPage()
	p.Calls[0].ID = `x"><script>alert(1)</script>`
	p.Calls[0].Tool = "<b>bold</b>\u202e"
	p.FormAction = `javascript:alert(1)`
	p.TurnDigest = `"><script>`
	_, body := approvalpage.Confirm(p)
	assertSafe(t, body)
	for _, want := range []string{`name="call.x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`, "&lt;b&gt;bold&lt;/b&gt;\\u202e", `action="#ZgotmplZ"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestOutcomePages(t *testing.T) {
	at := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	calls := threeCalls()
	tests := []struct {
		name       string
		render     func() (int, string)
		status     int
		want       []string
		wantAbsent []string
	}{
		{"decided approve", func() (int, string) {
			return approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", Decision: loop.Decision{TurnDigest: digest, Action: loop.ActionApprove}})
		}, 200, []string{"Your decision was recorded", "Approved.", "run_1"}, nil},
		{"decided deny", func() (int, string) {
			return approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", Decision: loop.Decision{TurnDigest: digest, Action: loop.ActionDeny, Message: hostile}})
		}, 200, []string{"Your decision was recorded", "Denied.", "Your reason: &lt;script&gt;"}, nil},
		{"decided per call", func() (int, string) {
			return approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", Calls: calls, Decision: loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{
				{CallID: "toolu_01", Action: loop.ActionApprove},
				{CallID: "toolu_02", Action: loop.ActionDeny, Message: "not to the " + hostile},
			}}})
		}, 200, []string{"You decided per call", "write_document", "toolu_01</code>)</span>: approved", "send_email", "toolu_02</code>)</span>: denied — <q>not to the &lt;script&gt;"}, nil},
		{"already decided by link", func() (int, string) {
			return approvalpage.AlreadyDecided("denied", "carol@example.com", runs.ViaLink, at)
		}, 409,
			[]string{"Already decided", "already denied by carol@example.com on Sat, 14 Mar 2026 09:30 UTC through an approval link.", "Nothing was changed."}, nil},
		{"already decided by API", func() (int, string) { return approvalpage.AlreadyDecided("approved", hostile, runs.ViaAPI, at) }, 409,
			[]string{"already approved by &lt;script&gt;", "through the API"}, nil},
		{"already decided after a vote", func() (int, string) {
			return approvalpage.AlreadyDecidedAfterVote("approved", "sec@example.com", runs.ViaLink, at, "approve")
		}, 409,
			[]string{"Already decided", "already approved by sec@example.com on Sat, 14 Mar 2026 09:30 UTC through an approval link.", "Your vote (approve) was recorded before that and counted.", "Nothing was changed."}, nil},
		{"already decided by votes", func() (int, string) {
			return approvalpage.AlreadyDecidedByVotes(approvalpage.VotesDecided{Outcome: "decided call by call",
				Deciders: []string{"ann@example.com", "bob@example.com", hostile},
				Calls: []runs.DecidedCall{
					{CallID: "toolu_01", Tool: "write_document", Action: loop.ActionApprove, By: []string{"ann@example.com", hostile}},
					{CallID: "toolu_02", Tool: "send_email", Action: loop.ActionDeny, By: []string{"bob@example.com"}},
				},
				Last: hostile, Via: runs.ViaLink, At: at, Vote: "per call", Voter: "bob@example.com"})
		}, 409,
			[]string{"Already decided", "already decided call by call by the votes of ann@example.com, bob@example.com and &lt;script&gt;",
				"the last, which completed it, was &lt;script&gt;", "&#39;s on Sat, 14 Mar 2026 09:30 UTC through an approval link.",
				"Your vote (per call) was recorded before that and counted.", "Nothing was changed. Who decided each call:",
				"toolu_01</code>)</span>: approved by ann@example.com and &lt;script&gt;", "toolu_02</code>)</span>: denied by bob@example.com"}, nil},
		{"already decided by votes, the viewer's vote decided nothing", func() (int, string) {
			return approvalpage.AlreadyDecidedByVotes(approvalpage.VotesDecided{Outcome: "decided call by call",
				Deciders: []string{"bob@example.com"},
				Calls:    []runs.DecidedCall{{CallID: "toolu_02", Tool: "send_email", Action: loop.ActionDeny, By: []string{"bob@example.com"}}},
				Last:     "bob@example.com", Via: runs.ViaAPI, At: at, Vote: "approve", Voter: "dave@example.com"})
		}, 409, []string{"Your vote (approve) was recorded before that; the calls it chose for were decided by the votes named here."},
			[]string{"counted"}},
		{"already decided by votes, deciders cut", func() (int, string) {
			return approvalpage.AlreadyDecidedByVotes(approvalpage.VotesDecided{Outcome: "approved",
				Deciders: []string{"ann@example.com", "bob@example.com"}, Cut: true, Last: "sec@example.com", Via: runs.ViaAPI, At: at})
		}, 409, []string{"already approved by the votes of ann@example.com, bob@example.com and others (the run&#39;s vote events name every vote)"}, nil},
		{"already decided by votes, deciders unknown", func() (int, string) {
			return approvalpage.AlreadyDecidedByVotes(approvalpage.VotesDecided{Outcome: "approved", Last: "sec@example.com", Via: runs.ViaAPI, At: at})
		}, 409, []string{"already approved by sec@example.com on Sat, 14 Mar 2026 09:30 UTC through the API.", "Nothing was changed."}, []string{"votes of", "counted"}},
		{"vote recorded, calls differ", func() (int, string) {
			return approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", StillNeeded: 2, More: "1 more approval of write_document and 2 more of send_email",
				Decision: loop.Decision{TurnDigest: digest, Action: loop.ActionApprove}})
		}, 200, []string{"Your vote was recorded", "Approved. The run waits for 1 more approval of write_document and 2 more of send_email from others before it continues."},
			[]string{"2 more approval(s)"}},
		{"already decided unknown", func() (int, string) { return approvalpage.AlreadyDecided("", "", "", time.Time{}) }, 409,
			[]string{"This request was already decided."}, []string{" by ", " on "}},
		{"cancelled", func() (int, string) { return approvalpage.Cancelled(at) }, 409,
			[]string{"Run cancelled", "This run was cancelled on Sat, 14 Mar 2026 09:30 UTC, before this request was decided.", "Nothing was changed."}, []string{"a cancellation"}},
		{"not found", approvalpage.NotFound, 404, []string{"Approval link not found"}, nil},
		{"expired", approvalpage.Expired, 410, []string{"Approval link expired", "Nothing was changed."}, nil},
		{"problem", func() (int, string) { return approvalpage.Problem(400, "unknown call id "+hostile) }, 400,
			[]string{"Bad Request", "unknown call id &lt;script&gt;"}, nil},
		{"problem bad status", func() (int, string) { return approvalpage.Problem(200, "x") }, 500, []string{"Internal Server Error"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := tt.render()
			if status != tt.status {
				t.Errorf("status = %d, want %d", status, tt.status)
			}
			assertSafe(t, body)
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q\n%s", w, body)
				}
			}
			for _, w := range tt.wantAbsent {
				if strings.Contains(body, w) {
					t.Errorf("page contains %q", w)
				}
			}
			if strings.Contains(body, "<form") {
				t.Error("an outcome page has a form")
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	h := approvalpage.SecurityHeaders()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
	}
	if len(h) != len(want) {
		t.Errorf("SecurityHeaders has %d entries, want %d", len(h), len(want))
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	h["X-Frame-Options"] = "changed"
	all := approvalpage.Headers()
	if all["X-Frame-Options"] != "DENY" || all["Content-Type"] != "text/html; charset=utf-8" {
		t.Errorf("Headers = %v; want fresh security headers plus the content type", all)
	}
}

// TestConfirmNotesADefinitionThatCouldNotBeChecked: a call held while its
// tool's server could not be listed says so next to the call, escaped; the
// other calls say nothing.
func TestConfirmNotesADefinitionThatCouldNotBeChecked(t *testing.T) {
	p := confirmPage()
	p.Calls[0].DefinitionUnverified = &loop.UnverifiedDefinition{Reason: `<b>refused</b>` + "\u202e",
		ListedAt: time.Date(2026, 3, 14, 9, 5, 7, 0, time.FixedZone("CET", 3600))}
	_, body := approvalpage.Confirm(p)
	assertSafe(t, body)
	want := `<p class="notice" style="margin:0 0 4px">The tool&#39;s definition could not be checked against the server when this turn was held: ` +
		`&lt;b&gt;refused&lt;/b&gt;\u202e. You are shown the definition listed at Sat, 14 Mar 2026 08:05:07 UTC.</p>`
	if !strings.Contains(body, want) {
		t.Errorf("page lacks %q", want)
	}
	if n := strings.Count(body, "could not be checked"); n != 1 {
		t.Errorf("%d notes, want 1 (only the call whose definition was not checked)", n)
	}
	_, plain := approvalpage.Confirm(confirmPage())
	if strings.Contains(plain, "could not be checked") {
		t.Error("a call whose definition was checked carries a note")
	}
}

// TestConfirmQuorumProgress: under a quorum the page says how many
// approvals each call needs (one number when they need the same), who
// approved so far, what the open calls still need, and each call's own
// progress beside it.
func TestConfirmQuorumProgress(t *testing.T) {
	tests := []struct {
		name     string
		progress []approval.CallProgress
		want     []string
		absent   []string
	}{
		{"the same for each call",
			[]approval.CallProgress{{ID: "toolu_01", Tool: "write_document", Needed: 2, Approvals: 1, StillNeeded: 1}, {ID: "toolu_02", Tool: "send_email", Needed: 2, Approvals: 1, StillNeeded: 1}},
			[]string{"<strong>2 approvals</strong> from distinct persons for each call (approved so far by: ann@example.com)", "<dt>Still needed</dt><dd>1 more approval(s) for each held call</dd>", "Votes: 1 of 2 approvals"},
			[]string{"its own number"}},
		{"calls that differ",
			[]approval.CallProgress{{ID: "toolu_01", Tool: "write_document", Needed: 1, StillNeeded: 1}, {ID: "toolu_02", Tool: "send_email", Needed: 2, Approvals: 1, StillNeeded: 1}},
			[]string{"<strong>Each call needs its own number of approvals</strong> from distinct persons, up to 2", "<dt>Still needed</dt><dd>1 more approval(s) for each held call</dd>", "Votes: 0 of 1 approvals", "Votes: 1 of 2 approvals"},
			[]string{"2 approvals</strong>"}},
		{"one call decided",
			[]approval.CallProgress{{ID: "toolu_01", Tool: "write_document", Needed: 2, DeniedBy: "bob@example.com"}, {ID: "toolu_02", Tool: "send_email", Needed: 2, Approvals: 1, StillNeeded: 1}},
			[]string{"<dt>Still needed</dt><dd>1 more approval of send_email</dd>", "Votes: denied by bob@example.com"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := confirmPage()
			p.Voting, p.VotesNeeded, p.Voted, p.Progress = true, 2, []string{"ann@example.com"}, tt.progress
			status, body := approvalpage.Confirm(p)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			assertSafe(t, body)
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q\n%s", w, body)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(body, a) {
					t.Errorf("page has %q", a)
				}
			}
		})
	}
}

// TestAVotersWholeTurnDenialSaysWhatItDenied (tester helper-107 P3): where
// votes decide the turn, a whole-turn denial denied the calls the voter
// may decide, not every call (another's call may have been approved and
// run): the page does not say every call was refused.
func TestAVotersWholeTurnDenialSaysWhatItDenied(t *testing.T) {
	_, html := approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", Voting: true, Decision: loop.Decision{TurnDigest: "d", Action: loop.ActionDeny, Message: "no"}})
	if strings.Contains(html, "its calls were not allowed") || !strings.Contains(html, "the calls you may decide") {
		t.Fatalf("page: %s", html)
	}
	_, html = approvalpage.Decided(approvalpage.DecidedPage{RunID: "run_1", Decision: loop.Decision{TurnDigest: "d", Action: loop.ActionDeny}})
	if !strings.Contains(html, "its calls were not allowed") {
		t.Fatalf("one decision's denial: %s", html)
	}
}

package approvalpage

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

// ContentType is the Content-Type of every page.
const ContentType = "text/html; charset=utf-8"

// SecurityHeaders returns the headers every approval page is served with: a
// policy allowing no scripts, no external resources, no framing and forms
// posting only to the page's own origin; no Referer (the URL holds the
// token); no caching; no content sniffing. The map is new on every call.
func SecurityHeaders() map[string]string {
	return map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
	}
}

// Headers returns SecurityHeaders plus the Content-Type of the pages: the
// complete header set of a page response.
func Headers() map[string]string {
	h := SecurityHeaders()
	h["Content-Type"] = ContentType
	return h
}

// ConfirmPage is what the confirmation page behind GET /approvals/{token}
// shows.
type ConfirmPage struct {
	// FormAction is where the form posts: the path of the page itself,
	// /approvals/{token} (with any stage prefix). Empty leaves the attribute
	// out, which posts to the page's own URL.
	FormAction string
	// RunID, Initiator and Purpose say which run this is and what it is
	// for; Purpose is usually the start of the prompt.
	RunID     string
	Initiator string
	Purpose   string
	// Approver is the address the link was issued to.
	Approver string
	// Calls are the pending calls of the held turn, in turn order.
	Calls []runs.CallSummary
	// TurnDigest is the suspension's digest; the form posts it back.
	TurnDigest string
	// Deadline is when the run expires without a decision.
	Deadline time.Time
	// VotesNeeded is how many distinct persons must approve (0 or 1: one
	// for each call; under a quorum the most any held call needs). Voting
	// says votes decide the turn, call by call (runs.Run.Voting: a quorum,
	// or calls no one person may decide together); Voted names who
	// approved a held call so far, StillNeeded who may still vote.
	VotesNeeded int
	Voting      bool
	Voted       []string
	StillNeeded []string
	// Decidable, when votes decide, are the ids of the held calls this voter
	// may decide (runs.DecidableCalls): only they get per-call choices,
	// and the page says the others are decided by other approvers. Nil:
	// every held call.
	Decidable []string
	// Progress, when votes decide, is each held call's vote progress
	// (approval.Progress), shown with the call ("1 of 2 approvals",
	// "denied by ann") and, for the calls still open, in the header
	// (approval.MoreApprovals).
	Progress []approval.CallProgress
	// Resumes says that the votes cast decide every held call already,
	// though the run waits (runs.Run.DecidedByVotesIn): a vote chooses
	// nothing and resumes the run, and only an approval is taken.
	Resumes bool
}

type confirmView struct {
	Title        string
	FormAction   string
	RunID        string
	Initiator    string
	Purpose      string
	Approver     string
	Deadline     string
	TurnDigest   string
	Calls        []callView
	NeedApproval int
	PerCall      bool
	// Unasked is how many calls run without approval (neither held
	// nor denied by the policy): a whole-turn denial stops them too.
	Unasked int
	// Mine is how many held calls this voter may decide (all of them but
	// under a quorum).
	Mine        int
	MaxReason   int
	VotesNeeded int
	Voting      bool
	// SameNeeds: every held call needs VotesNeeded approvals; More is what
	// the open calls still need (approval.MoreApprovals).
	SameNeeds   bool
	More        string
	Voted       string
	StillNeeded string
}

type callView struct {
	Number        int
	ID            string // as sent: it names the form fields
	DisplayID     string
	Tool          string
	Effect        string
	NeedsApproval bool
	// Mine: the voter may decide the call (every held call but under a
	// quorum); Progress is its vote progress under a quorum.
	Mine      bool
	Progress  string
	Arguments string
	Preview   string
	Rule      string
	RuleNote  string
	Denied    string
	// Rejected is why a call that needs no approval cannot run at all
	// (runs.CallSummary.Rejected): it fails whatever the decision.
	Rejected string
	// DefinitionNote: the tool's definition could not be checked when the
	// turn was held (approval.DefinitionNote).
	DefinitionNote string
	// InputURL and PreviewURL, set when the summary shortened the input or
	// the preview, open the whole of it (TextPage), with its size.
	InputURL    string
	InputSize   int
	PreviewURL  string
	PreviewSize int
}

// HeldTextURL is the query, relative to the page's own URL, of the text
// page showing part ("input" or "preview") of call from offset.
func HeldTextURL(callID, part string, offset int) string {
	q := url.Values{"call": {callID}, "part": {part}}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return "?" + q.Encode()
}

// Confirm renders the confirmation page with status 200. Every call is shown
// with its arguments and preview in full; per-call choices appear when more
// than one call needs approval.
func Confirm(p ConfirmPage) (status int, html string) {
	v := confirmView{
		Title:      "Approval needed",
		FormAction: p.FormAction,
		RunID:      approval.CleanText(p.RunID),
		Initiator:  approval.CleanText(p.Initiator),
		Purpose:    approval.CleanText(p.Purpose),
		Approver:   approval.CleanText(p.Approver),
		Deadline:   approval.FormatDeadline(p.Deadline),
		TurnDigest: p.TurnDigest,
		MaxReason:  maxReason(p.Voting),
		// When votes decide, a vote is on the calls this voter may decide.
		VotesNeeded: p.VotesNeeded,
		Voting:      p.Voting,
		SameNeeds:   approval.SameNeeds(p.Progress),
		More:        approval.CleanText(approval.MoreApprovals(p.Progress)),
		Voted:       approval.CleanText(strings.Join(p.Voted, ", ")),
		StillNeeded: approval.CleanText(strings.Join(p.StillNeeded, ", ")),
	}
	if p.Resumes {
		v.Title = "Already decided by the votes: approving resumes the run with what they decided (a denial or an edit would count for nothing)"
	}
	progress := map[string]string{}
	for _, c := range p.Progress {
		switch {
		case c.DeniedBy != "":
			progress[c.ID] = "denied by " + c.DeniedBy
		case c.StillNeeded == 0:
			progress[c.ID] = fmt.Sprintf("approved (%d of %d approvals)", c.Approvals, c.Needed)
		default:
			progress[c.ID] = fmt.Sprintf("%d of %d approvals", c.Approvals, c.Needed)
		}
	}
	for i, c := range p.Calls {
		cv := callView{
			Number:         i + 1,
			ID:             c.ID,
			DisplayID:      approval.CleanText(c.ID),
			Tool:           approval.CleanText(c.Tool),
			Effect:         approval.CleanText(string(c.Effect)),
			NeedsApproval:  c.NeedsApproval,
			Mine:           c.NeedsApproval && (p.Decidable == nil || slices.Contains(p.Decidable, c.ID)),
			Progress:       approval.CleanText(progress[c.ID]),
			Arguments:      approval.CleanText(approval.PrettyArguments(c.Input)),
			Preview:        approval.CleanText(c.Preview),
			Rule:           approval.CleanText(c.Rule),
			RuleNote:       approval.CleanText(approval.RuleNote(c)),
			Denied:         approval.CleanText(c.Denied),
			DefinitionNote: approval.CleanText(approval.DefinitionNote(c.DefinitionUnverified)),
		}
		if !c.NeedsApproval && c.Denied == "" {
			cv.Rejected = approval.CleanText(c.Rejected)
		}
		if c.InputTruncated {
			cv.InputURL, cv.InputSize = HeldTextURL(c.ID, "input", 0), c.InputSize
			if len(c.Input) == 0 {
				cv.Arguments = "(too large to show here)"
			}
		}
		if c.PreviewTruncated {
			cv.PreviewURL, cv.PreviewSize = HeldTextURL(c.ID, "preview", 0), c.PreviewSize
		}
		v.Calls = append(v.Calls, cv)
		if c.NeedsApproval {
			v.NeedApproval++
		} else if c.Denied == "" && c.Rejected == "" {
			v.Unasked++
		}
		if cv.Mine {
			v.Mine++
		}
	}
	v.PerCall = v.Mine > 1
	return http.StatusOK, v.render()
}

// outcomeView is the data of every page but Confirm.
type outcomeView struct {
	Title      string
	Paragraphs []string
	Calls      []outcomeCall
	RunID      string
}

type outcomeCall struct {
	ID, Tool, Outcome, Reason string
}

// DecidedPage is what the page after a recorded decision shows.
type DecidedPage struct {
	// RunID is the decided run.
	RunID string
	// Decision is the recorded decision.
	Decision loop.Decision
	// Calls are the pending calls, to name the tools of a per-call decision.
	Calls []runs.CallSummary
	// StillNeeded, when above 0, says the decision was a vote of a quorum
	// and how many approvals the run still waits for (the most any held
	// call still needs); More, when set, says what each open call still
	// needs (approval.MoreApprovals), shown instead of that number.
	StillNeeded int
	More        string
	// ResumedOnly says that the votes cast before decided the turn
	// already (a directory change since the last vote: runs.Run.
	// DecidedByVotesIn): the vote chose nothing and resumed the run, and
	// Decision is what the votes came to, not the voter's choice.
	ResumedOnly bool
	// Voting says votes decide the turn (runs.Run.Voting): a whole-turn
	// denial denied the calls the voter may decide, not every call.
	Voting bool
}

// Decided renders "your decision was recorded" with status 200: approved,
// denied (with the reason), or each call's outcome.
func Decided(p DecidedPage) (status int, html string) {
	v := outcomeView{Title: "Your decision was recorded", RunID: approval.CleanText(p.RunID)}
	waits := fmt.Sprintf("The run waits for %d more approval(s) from others before it continues.", p.StillNeeded)
	if p.More != "" {
		waits = "The run waits for " + approval.CleanText(p.More) + " from others before it continues."
	}
	d := p.Decision
	if p.ResumedOnly {
		v.Title = "The votes had already decided this turn"
		v.Paragraphs = []string{"The votes cast before yours decide every call of this turn (the directory changed since the last vote), so your vote chose nothing: it resumed the run with what those votes decided."}
		if len(d.Calls) == 0 {
			v.Paragraphs = append(v.Paragraphs, "They decided: "+outcomeWord(d.Action)+".")
		}
	}
	switch {
	case p.ResumedOnly && len(d.Calls) == 0:
	case len(d.Calls) > 0:
		v.Paragraphs = append(v.Paragraphs, "You decided per call:")
		if p.ResumedOnly {
			v.Paragraphs[len(v.Paragraphs)-1] = "They decided per call:"
		}
		if p.StillNeeded > 0 {
			v.Title = "Your vote was recorded"
			v.Paragraphs = []string{"You voted per call:"}
		}
		for _, cd := range d.Calls {
			oc := outcomeCall{ID: approval.CleanText(cd.CallID), Outcome: outcomeWord(cd.Action)}
			for _, c := range p.Calls {
				if c.ID == cd.CallID {
					oc.Tool = approval.CleanText(c.Tool)
				}
			}
			if cd.Action == loop.ActionDeny {
				oc.Reason = approval.CleanText(cd.Message)
			}
			v.Calls = append(v.Calls, oc)
		}
	case d.Action == loop.ActionDeny && p.StillNeeded > 0:
		v.Title = "Your vote was recorded"
		v.Paragraphs = []string{"You denied the calls you may decide; one denial denies a call. Other calls of this turn wait for their own approvers."}
		if d.Message != "" {
			v.Paragraphs = append(v.Paragraphs, "Your reason: "+approval.CleanText(d.Message))
		}
	case d.Action == loop.ActionDeny && p.Voting:
		v.Paragraphs = []string{"You denied the calls you may decide; one denial denies a call. The agent is told those calls were not allowed; the other calls of this turn are as their own approvers decided."}
		if d.Message != "" {
			v.Paragraphs = append(v.Paragraphs, "Your reason: "+approval.CleanText(d.Message))
		}
	case d.Action == loop.ActionDeny:
		v.Paragraphs = []string{"Denied. The agent is told its calls were not allowed."}
		if d.Message != "" {
			v.Paragraphs = append(v.Paragraphs, "Your reason: "+approval.CleanText(d.Message))
		}
	case p.StillNeeded > 0:
		v.Title = "Your vote was recorded"
		v.Paragraphs = []string{"Approved. " + waits}
	default:
		v.Paragraphs = []string{"Approved. The run continues."}
	}
	if p.StillNeeded > 0 && (len(d.Calls) > 0 || d.Action == loop.ActionDeny) {
		v.Paragraphs = append(v.Paragraphs, waits)
	}
	return http.StatusOK, v.render()
}

func outcomeWord(a loop.Action) string {
	switch a {
	case loop.ActionApprove:
		return "approved"
	case loop.ActionDeny:
		return "denied"
	case loop.ActionEdit:
		return "edited"
	}
	return string(a)
}

// AlreadyDecided renders, with status 409, that the suspension was decided
// before: how (outcome: "approved", "denied", "decided call by call"; empty
// if unknown), by whom (an address or caller; empty if unknown), through
// what (runs.ViaLink or runs.ViaAPI) and when (zero if unknown).
func AlreadyDecided(outcome, by, via string, at time.Time) (status int, html string) {
	return alreadyDecided(outcome, by, via, at)
}

// AlreadyDecidedAfterVote is AlreadyDecided for a person whose vote (vote:
// "approve" or "deny") on the suspension was recorded before another's
// vote decided it: the page also says their vote counted.
func AlreadyDecidedAfterVote(outcome, by, via string, at time.Time, vote string) (status int, html string) {
	return alreadyDecided(outcome, by, via, at, "Your vote ("+approval.CleanText(vote)+") was recorded before that and counted.")
}

// VotesDecided is what the "Already decided" page says of a suspension
// that a quorum's votes decided.
type VotesDecided struct {
	// Outcome is as AlreadyDecided's.
	Outcome string
	// Deciders are the voters whose votes decided a held call, in the
	// order they voted, by person (runs.Run.DecidingVoters); Calls who
	// decided each (runs.Run.DecidedCalls; none when unknown).
	Deciders []string
	Calls    []runs.DecidedCall
	// Cut says Deciders is shortened and Calls left out (the decision
	// event's deciders_cut): the page says others decided too.
	Cut bool
	// Last, Via and At are the vote that completed the turn: its voter
	// named as Deciders name them (Run.DecidedBy for a decision event
	// that named voters as they authenticated).
	Last string
	Via  string
	At   time.Time
	// Vote is the viewer's own vote ("approve", "deny", "per call") when
	// they voted and another's vote completed the turn; "" otherwise.
	// Voter is who cast it, named as Deciders name them (runs.Vote.Name,
	// or Vote.By for a decision event that named voters as they
	// authenticated): the page says it counted when Voter
	// is among Deciders, and only that it was recorded otherwise (an
	// approval of a call another then denied decided nothing).
	Vote  string
	Voter string
}

// AlreadyDecidedByVotes renders, with status 409, that a quorum's votes
// decided the suspension: whose votes decided it and, call by call, who
// approved or denied each, and when and how the last vote was cast. With
// no Deciders (a decision recorded before they were kept) it is
// AlreadyDecided by the last voter.
func AlreadyDecidedByVotes(p VotesDecided) (status int, html string) {
	var more []string
	switch {
	case p.Vote == "":
	case len(p.Deciders) == 0 || slices.Contains(p.Deciders, p.Voter):
		more = append(more, "Your vote ("+approval.CleanText(p.Vote)+") was recorded before that and counted.")
	default:
		more = append(more, "Your vote ("+approval.CleanText(p.Vote)+") was recorded before that; the calls it chose for were decided by the votes named here.")
	}
	if len(p.Deciders) == 0 {
		return alreadyDecided(p.Outcome, p.Last, p.Via, p.At, more...)
	}
	outcome := p.Outcome
	if outcome == "" {
		outcome = "decided"
	}
	deciders := approval.CleanText(andList(p.Deciders))
	if p.Cut {
		deciders = approval.CleanText(strings.Join(p.Deciders, ", ")) + " and others (the run's vote events name every vote)"
	}
	s := "This request was already " + outcome + " by the votes of " + deciders
	if p.Last != "" {
		s += "; the last, which completed it, was " + approval.CleanText(p.Last) + "'s"
		if !p.At.IsZero() {
			s += " on " + approval.FormatDeadline(p.At)
		}
		switch p.Via {
		case runs.ViaLink:
			s += " through an approval link"
		case runs.ViaAPI:
			s += " through the API"
		}
	}
	v := outcomeView{Title: "Already decided", Paragraphs: append([]string{s + "."}, more...)}
	for _, c := range p.Calls {
		v.Calls = append(v.Calls, outcomeCall{ID: approval.CleanText(c.CallID), Tool: approval.CleanText(c.Tool),
			Outcome: outcomeWord(c.Action) + " by " + approval.CleanText(andList(c.By))})
	}
	last := "Nothing was changed."
	if len(v.Calls) > 0 {
		last += " Who decided each call:" // the list follows the paragraphs
	}
	v.Paragraphs = append(v.Paragraphs, last)
	return http.StatusConflict, v.render()
}

// andList joins names as "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func alreadyDecided(outcome, by, via string, at time.Time, more ...string) (status int, html string) {
	if outcome == "" {
		outcome = "decided"
	}
	s := "This request was already " + outcome
	if by != "" {
		s += " by " + approval.CleanText(by)
	}
	if !at.IsZero() {
		s += " on " + approval.FormatDeadline(at)
	}
	switch via {
	case runs.ViaLink:
		s += " through an approval link"
	case runs.ViaAPI:
		s += " through the API"
	}
	v := outcomeView{Title: "Already decided", Paragraphs: append(append([]string{s + "."}, more...), "Nothing was changed.")}
	return http.StatusConflict, v.render()
}

// Cancelled renders, with status 409, that the run was cancelled (at, zero
// if unknown) before its suspension was decided.
func Cancelled(at time.Time) (status int, html string) {
	s := "This run was cancelled"
	if !at.IsZero() {
		s += " on " + approval.FormatDeadline(at)
	}
	v := outcomeView{Title: "Run cancelled", Paragraphs: []string{s + ", before this request was decided.", "Nothing was changed."}}
	return http.StatusConflict, v.render()
}

// NotFound renders the page for an unknown or malformed token, status 404.
func NotFound() (status int, html string) {
	return http.StatusNotFound, outcomeView{
		Title:      "Approval link not found",
		Paragraphs: []string{"This approval link is not valid. Check that the whole address was copied from the mail; the run may also have been removed."},
	}.render()
}

// Expired renders the page for a token whose approval window has passed,
// status 410.
func Expired() (status int, html string) {
	return http.StatusGone, outcomeView{
		Title:      "Approval link expired",
		Paragraphs: []string{"The time to decide has passed, and the run no longer waits for a decision. Nothing was changed."},
	}.render()
}

// Unmeetable renders the page for a token whose run ended because a held
// call could no longer get the approvals it needs (the directory changed
// while it waited), status 410.
func Unmeetable() (status int, html string) {
	return http.StatusGone, outcomeView{
		Title: "Approval no longer possible",
		Paragraphs: []string{"The run no longer waits for a decision: since it was held, too few of the persons who may decide one of its calls remain " +
			"(the directory changed), so that call's approvals could not be completed. The run ended without running anything of this turn. Nothing was changed."},
	}.render()
}

// Problem renders an error page with status (a 4xx or 5xx; anything else
// becomes 500) and message, which must be safe to show: for example
// runs.ErrorMessage of the error ParseDecision returned.
func Problem(status int, message string) (int, string) {
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	return status, outcomeView{
		Title:      http.StatusText(status),
		Paragraphs: []string{approval.CleanText(message), "Nothing was changed."},
	}.render()
}

// TextPage is what the page behind GET /approvals/{token}?call=... shows:
// one page of the whole input or preview of a held call, which the
// confirmation page shows shortened.
type TextPage struct {
	RunID  string
	CallID string
	Tool   string
	// Part is "input" or "preview".
	Part string
	// Size is the whole part's length; Offset where Text begins.
	Size, Offset int
	Text         string
	// NextOffset is where the next page begins (0: this is the last).
	NextOffset int
}

type textView struct {
	Title, RunID, CallID, Tool, Part string
	Size, From, To                   int
	Text                             string
	NextURL                          string
}

// Text renders one page of a held call's whole input or preview with
// status 200, with a link to the next page and back to the decision.
func Text(p TextPage) (status int, html string) {
	v := textView{
		Title: "The whole " + p.Part + " of a pending call", RunID: approval.CleanText(p.RunID),
		CallID: approval.CleanText(p.CallID), Tool: approval.CleanText(p.Tool), Part: p.Part,
		Size: p.Size, From: p.Offset, To: p.Offset + len(p.Text), Text: approval.CleanText(p.Text),
	}
	if p.NextOffset > 0 {
		v.NextURL = HeldTextURL(p.CallID, p.Part, p.NextOffset)
	}
	return http.StatusOK, v.render()
}

// maxReason is the most characters the page lets a reason have: when
// votes decide, a vote's messages together are at most
// runs.MaxVoteMessagesSize bytes (the row keeps every vote), so one reason
// is held to that too.
func maxReason(voting bool) int {
	if voting {
		return min(MaxReasonLength, runs.MaxVoteMessagesSize)
	}
	return MaxReasonLength
}

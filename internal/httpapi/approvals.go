package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
)

// page is an approval-link answer: HTML with the pages' security headers.
func page(status int, html string) events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{StatusCode: status, Headers: approvalpage.Headers(), Body: html}
}

// alreadyDecidedPage says who decided r's suspension, how and when; a run
// cancelled before any decision was "decided" by the cancellation. Under a
// quorum it names whose votes decided it, call by call: r's own votes, or
// for an earlier suspension of r (earlier, its decision event) what that
// event recorded. When the person behind approver voted on it and someone
// else cast the vote that completed it, it also says their vote counted.
func (a *API) alreadyDecidedPage(r *runs.Run, approver string, earlier *runs.DecisionEventData) events.APIGatewayProxyResponse {
	if r.DecidedBy == "" && r.Status == runs.StatusCancelled {
		return page(approvalpage.Cancelled(r.UpdatedAt))
	}
	outcome := ""
	switch d := r.Decision; {
	case d == nil:
	case len(d.Calls) > 0:
		outcome = "decided call by call"
	case d.Action == loop.ActionApprove:
		outcome = "approved"
	case d.Action == loop.ActionDeny:
		outcome = "denied"
	}
	how, voter := "", runs.Vote{}
	if v, ok := voteOf(a.Directory, r, approver); ok && r.Decision != nil && v.By != r.DecidedBy && !v.ChoseNothing() {
		how, voter = string(v.TurnAction()), v
		if how == "" {
			how = "per call" // a per-call vote under a quorum
		}
	}
	vd := approvalpage.VotesDecided{Outcome: outcome, Last: r.DecidedBy, Via: r.DecidedVia, At: r.DecidedAt, Vote: how}
	switch {
	case earlier != nil:
		vd.Deciders, vd.Calls, vd.Cut = earlier.Deciders, earlier.DecidedCalls, earlier.DecidersCut
	case r.Voting() && r.Decision != nil:
		vd.Deciders, vd.Calls = r.DecidingVotersIn(a.Directory), r.DecidedCallsIn(a.Directory)
	}
	if len(vd.Deciders) > 0 {
		// The deciders are named by person (runs.Vote.Name); so are the
		// last voter and the viewer's own vote. A decision event written
		// before named them as they authenticated.
		if n := len(r.Votes); n > 0 && r.Votes[n-1].By == r.DecidedBy && slices.Contains(vd.Deciders, r.Votes[n-1].Name()) {
			vd.Last = r.Votes[n-1].Name()
		}
		vd.Voter = voter.Name()
		if how != "" && !slices.Contains(vd.Deciders, vd.Voter) && slices.Contains(vd.Deciders, voter.By) {
			vd.Voter = voter.By
		}
	}
	if len(vd.Deciders) > 0 {
		// A quorum's votes decided it: name whose, call by call, not only
		// the vote that completed it.
		return page(approvalpage.AlreadyDecidedByVotes(vd))
	}
	if how != "" {
		return page(approvalpage.AlreadyDecidedAfterVote(outcome, r.DecidedBy, r.DecidedVia, r.DecidedAt, how))
	}
	return page(approvalpage.AlreadyDecided(outcome, r.DecidedBy, r.DecidedVia, r.DecidedAt))
}

// lookupLink resolves a link token to its token row and run. On failure it
// returns the page to show instead.
func (a *API) lookupLink(ctx context.Context, raw string) (*runs.ApprovalToken, *runs.Run, *events.APIGatewayProxyResponse, error) {
	hash, ok := approval.HashToken(raw)
	if !ok {
		p := page(approvalpage.NotFound())
		return nil, nil, &p, nil
	}
	t, err := a.Store.LookupToken(ctx, hash)
	if runs.ErrorCode(err) == runs.ENotFound {
		p := page(approvalpage.NotFound())
		return nil, nil, &p, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := a.Store.Get(ctx, t.RunID)
	if runs.ErrorCode(err) == runs.ENotFound {
		p := page(approvalpage.NotFound())
		return nil, nil, &p, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if t.Person != "" && runs.SubjectKey(a.Directory, t.Approver) != runs.RecordedKey(a.Directory, t.Person) {
		// The directory no longer gives the link's address to the subject
		// it was sent to (the address changed hands, an entry was added
		// for it, or theirs was renamed without a record of it in
		// former_ids, merged or dropped): a vote through it would stand for
		// whoever has the address now, and the person it was sent to could
		// vote again. It decides and shows nothing. A person the directory
		// says was renamed (their entry lists the id the link was sent
		// under among its former ids) is the subject it was sent to.
		p := page(approvalpage.Problem(http.StatusForbidden, fmt.Sprintf(
			"This link was sent to %s as the directory stood then; it no longer gives that address to the same person or principal (the address changed hands, an entry was added for it, or its entry was dropped, or renamed or merged without its former id listed in former_ids), so the link no longer decides or shows the run. Decide through the API, or with a link sent since.", t.Approver)))
		return nil, nil, &p, nil
	}
	open := r.Status == runs.StatusWaiting && a.now().Before(t.ExpiresAt)
	if !t.UsedAt.IsZero() && open && r.SuspensionID == t.SuspensionID {
		// The link was used for a vote of a quorum that is not complete:
		// the suspension is not decided yet.
		if v, ok := voteOf(a.Directory, r, t.Approver); ok {
			p := a.votedPage(v, r, t.Approver)
			return nil, nil, &p, nil
		}
	}
	// A link used for a vote on a suspension that ended undecided (its
	// window closed, or the run was cancelled) decided nothing: it answers
	// like the links of those who did not vote, never "already decided".
	votedUndecided := !t.UsedAt.IsZero() && !open && r.SuspensionID == t.SuspensionID && r.Decision == nil
	decided := (!t.UsedAt.IsZero() && !votedUndecided) || r.SuspensionID != t.SuspensionID ||
		(r.Status != runs.StatusWaiting && r.Decision != nil && r.Status != runs.StatusExpired)
	switch {
	case decided && r.SuspensionID != t.SuspensionID:
		// The run moved on to a later suspension: the row holds that one's
		// decision (if any), not the one this link was for.
		d, data, err := a.decisionOf(ctx, r, t.SuspensionID)
		if err != nil {
			return nil, nil, nil, err
		}
		if data == nil {
			data = &runs.DecisionEventData{} // no decision found: nobody to name
		}
		p := a.alreadyDecidedPage(d, t.Approver, data)
		return nil, nil, &p, nil
	case decided || r.Status == runs.StatusCancelled:
		p := a.alreadyDecidedPage(r, t.Approver, nil)
		return nil, nil, &p, nil
	case !a.now().Before(t.ExpiresAt) || r.Status == runs.StatusExpired || r.Status != runs.StatusWaiting:
		p := expiredPage(r)
		return nil, nil, &p, nil
	}
	return t, r, nil, nil
}

// decisionOf returns a copy of r that carries the decision of an earlier
// suspension, read from the run's decision event: who decided, how and
// when, and the votes cast on it (vote events); and that event's data.
// Without such an event the copy names no decider and the data is nil.
func (a *API) decisionOf(ctx context.Context, r *runs.Run, suspensionID string) (*runs.Run, *runs.DecisionEventData, error) {
	d := r.Clone()
	d.Decision, d.DecidedBy, d.DecidedVia, d.DecidedAt = nil, "", "", time.Time{}
	d.Votes = nil
	after := int64(0)
	for range maxEventPages {
		evs, err := a.Store.Events(ctx, r.ID, after, 1000)
		if err != nil {
			return nil, nil, err
		}
		for _, ev := range evs {
			if ev.Type == runs.EventVote {
				var v runs.VoteEventData
				if json.Unmarshal(ev.Data, &v) == nil && v.SuspensionID == suspensionID {
					d.Votes = append(d.Votes, runs.Vote{By: ev.Actor, Person: v.Person, Action: v.Action, Via: v.Via, At: ev.At})
				}
			}
			if ev.Type != runs.EventDecision {
				continue
			}
			var data runs.DecisionEventData
			if json.Unmarshal(ev.Data, &data) == nil && data.SuspensionID == suspensionID {
				d.Decision, d.DecidedBy, d.DecidedVia, d.DecidedAt = &data.Decision, ev.Actor, data.Via, ev.At
				return d, &data, nil
			}
		}
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	return d, nil, nil
}

// maxEventPages bounds the events decisionOf reads (1000 per page).
const maxEventPages = 10

// approvalPage serves GET (and HEAD) /approvals/{token}. It never changes
// state: mail scanners pre-fetch every link.
func (a *API) approvalPage(ctx context.Context, req events.APIGatewayProxyRequest, raw string) (events.APIGatewayProxyResponse, error) {
	head := req.HTTPMethod == http.MethodHead
	t, r, p, err := a.lookupLink(ctx, raw)
	if err != nil || p != nil {
		if p != nil && head {
			p.Body = ""
		}
		return deref(p), err
	}
	var resp events.APIGatewayProxyResponse
	if callID, ok := req.QueryStringParameters["call"]; ok && !runs.MayRead(a.Directory, r, t.Approver) {
		// The link outlives its holder's place among the run's approvers
		// (the directory changed while the run waited): the held calls'
		// text is refused as GET /runs/{id} refuses it to them.
		resp = page(approvalpage.Problem(http.StatusForbidden,
			"This link's holder is no longer among the run's approvers (the directory changed since the link was sent), so its held calls are not shown."))
	} else if ok {
		resp, err = a.heldTextPage(ctx, req, r, callID)
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
	} else if v, ok := voteOf(a.Directory, r, t.Approver); ok {
		// Under a quorum the run still waits, but not for this person:
		// say so instead of a form whose answer would be refused.
		resp = a.votedPage(v, r, t.Approver)
	} else if err := runs.MayDecide(a.Directory, r, t.Approver); err != nil {
		// The holder may no longer decide (the directory or the run's
		// terms changed since the link was sent): say why instead of a
		// form whose answer would be refused.
		resp = page(approvalpage.Problem(http.StatusForbidden, refusalMessage(err)))
	} else {
		// The form posts to the page's own URL, so it works behind any API
		// Gateway stage prefix.
		voted, still := runs.VoteTally(a.Directory, r)
		cp := approvalpage.ConfirmPage{
			RunID: r.ID, Initiator: r.Initiator, Purpose: r.Purpose, Approver: t.Approver,
			Calls: r.PendingCalls, TurnDigest: r.TurnDigest, Deadline: r.ApprovalDeadline,
			VotesNeeded: r.VotesNeeded, Voting: r.Voting(), Voted: voted, StillNeeded: still,
		}
		if r.Voting() {
			// A vote is per call: the choices are for the calls this
			// voter may decide, and each call shows its own progress.
			mine, _ := runs.DecidableCalls(a.Directory, r, t.Approver)
			cp.Decidable = r.OpenCalls(a.Directory, mine)
			if r.DecidedByVotesIn(a.Directory) {
				// The votes cast decide the turn already (the directory
				// changed since): this vote resumes it.
				cp.Decidable, cp.Resumes = mine, true
			}
			if len(mine) > 0 && len(cp.Decidable) == 0 {
				// Every call of theirs is decided: nothing to vote on.
				resp := page(approvalpage.Problem(http.StatusConflict, fmt.Sprintf(
					"Every call you may decide was already approved or denied by the other approvers; the run waits on other approvers for the rest (%s).",
					stillNeeded(r))))
				if head {
					resp.Body = ""
				}
				return resp, nil
			}
			if cp.Decidable == nil {
				cp.Decidable = []string{}
			}
			cp.Progress = approval.Progress(r)
		}
		resp = page(approvalpage.Confirm(cp))
	}
	if head {
		resp.Body = ""
	}
	return resp, nil
}

// approvalDecide serves POST /approvals/{token}: the same decision path as
// the API, recorded as decided by the token's approver via link.
func (a *API) approvalDecide(ctx context.Context, req events.APIGatewayProxyRequest, raw string) (events.APIGatewayProxyResponse, error) {
	mt, params, err := mime.ParseMediaType(header(req, "Content-Type"))
	if cs, ok := params["charset"]; err != nil || mt != "application/x-www-form-urlencoded" || ok && !strings.EqualFold(cs, "utf-8") {
		// The page is UTF-8 and so is what a browser sends back; a form
		// in another charset would be decoded wrong (as the API refuses it).
		return page(approvalpage.Problem(http.StatusUnsupportedMediaType, "Send the form as application/x-www-form-urlencoded (charset utf-8, if any).")), nil
	}
	b, err := body(req, routes.MaxFormBody)
	if err != nil {
		return page(approvalpage.Problem(http.StatusRequestEntityTooLarge, "The form is too large.")), nil
	}
	t, r, p, err := a.lookupLink(ctx, raw)
	if err != nil || p != nil {
		return deref(p), err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return page(approvalpage.Problem(http.StatusBadRequest, "The form could not be read.")), nil
	}
	if err := a.authorize(r, t.Approver); err != nil {
		_, _, msg := classify(err)
		return page(approvalpage.Problem(http.StatusForbidden, msg)), nil
	}
	var d loop.Decision
	resumes := r.DecidedByVotesIn(a.Directory)
	if r.Voting() {
		mine, _ := runs.DecidableCalls(a.Directory, r, t.Approver)
		if !resumes {
			mine = r.OpenCalls(a.Directory, mine) // else this vote resumes the turn the votes decide
		}
		d, err = approvalpage.ParseVote(form, r.PendingCalls, mine, r.MostApprovalsNeeded() > 1)
	} else {
		d, err = approvalpage.ParseDecision(form, r.PendingCalls)
	}
	if err != nil {
		// 400 for a field the page does not have or one sent twice, 422
		// for a decision that does not fit the turn.
		_, status, msg := classify(err)
		return page(approvalpage.Problem(status, msg)), nil
	}
	next, err := a.applyDecision(ctx, r, d, runs.NewDecision{Decider: t.Approver, Via: runs.ViaLink, Token: t})
	if err != nil {
		code, status, msg := classify(err)
		switch code {
		case runs.EConflict:
			fresh, gerr := a.Store.Get(ctx, r.ID)
			switch {
			case gerr == nil && fresh.Decision != nil:
				return a.alreadyDecidedPage(fresh, t.Approver, nil), nil
			case gerr == nil && fresh.Status == runs.StatusExpired:
				return expiredPage(fresh), nil // ended while the form was open
			}
			return page(approvalpage.Problem(status, msg)), nil
		case runs.EGone:
			return expiredPage(r), nil
		case runs.EInternal:
			return events.APIGatewayProxyResponse{}, err
		}
		return page(approvalpage.Problem(status, msg)), nil
	}
	dp := approvalpage.DecidedPage{RunID: next.ID, Decision: d, Calls: next.PendingCalls, Voting: r.Voting()}
	if n := len(next.Votes); n > 0 && next.Decision != nil && next.Votes[n-1].By == t.Approver && next.Votes[n-1].ChoseNothing() {
		// The vote chose nothing (as the store took it: a vote cast since
		// the page was read may have decided the turn): the page says what
		// the votes decided.
		dp.Decision, dp.ResumedOnly = *next.Decision, true
	}
	if next.Status == runs.StatusWaiting {
		dp.StillNeeded, dp.More = max(next.VotesMissing(), 1), approval.MoreApprovals(approval.Progress(next))
	}
	return page(approvalpage.Decided(dp)), nil
}

// stillNeeded says what r's open calls still need under a quorum: "2 more
// approval(s)", or each call's own where they differ
// (approval.MoreApprovals).
func stillNeeded(r *runs.Run) string {
	if more := approval.MoreApprovals(approval.Progress(r)); more != "" {
		return more
	}
	return fmt.Sprintf("%d more approval(s)", r.VotesMissing())
}

// votedPage says, with 409, that the person behind a link already voted on
// the run's current suspension (through it or otherwise), which still
// waits for others; or, when the vote is another's that the directory in
// force links to them (an alias or id they hold now was that voter's),
// that it stands for them.
func (a *API) votedPage(v runs.Vote, r *runs.Run, approver string) events.APIGatewayProxyResponse {
	how := string(v.TurnAction())
	if how == "" {
		how = "per call"
	}
	if v.By != approver && v.Name() != runs.NameOf(a.Directory, approver) {
		return page(approvalpage.Problem(http.StatusConflict, fmt.Sprintf(
			"A vote (%s) cast by %s stands for you on this approval: the directory now gives you an address or id that was theirs when they voted, so you count as having voted. It waits for %s from others.",
			how, v.Name(), stillNeeded(r))))
	}
	return page(approvalpage.Problem(http.StatusConflict, fmt.Sprintf(
		"You already voted (%s) on this approval; it waits for %s from others.",
		how, stillNeeded(r))))
}

func deref(p *events.APIGatewayProxyResponse) events.APIGatewayProxyResponse {
	if p == nil {
		return events.APIGatewayProxyResponse{}
	}
	return *p
}

// heldTextPage answers GET /approvals/{token}?call=ID&part=P&offset=N: one
// page of the whole input or preview of a held call, which the
// confirmation page shows shortened. It never changes state either.
func (a *API) heldTextPage(ctx context.Context, req events.APIGatewayProxyRequest, r *runs.Run, callID string) (events.APIGatewayProxyResponse, error) {
	offset, err := queryInt(req, "offset", 0, 0, 1<<40)
	if err == nil {
		var ht HeldText
		ht, err = a.heldText(ctx, r, callID, req.QueryStringParameters["part"], offset, HTMLCost)
		if err == nil {
			return page(approvalpage.Text(approvalpage.TextPage{
				RunID: r.ID, CallID: ht.Call.ID, Tool: ht.Call.Tool, Part: ht.Part,
				Size: ht.Size, Offset: ht.Offset, Text: ht.Text, NextOffset: ht.NextOffset,
			})), nil
		}
	}
	code, status, msg := classify(err)
	if code == runs.EInternal {
		return events.APIGatewayProxyResponse{}, err
	}
	return page(approvalpage.Problem(status, msg)), nil
}

// voteOf returns the vote the person behind approver cast on r's current
// suspension, if any.
func voteOf(dir *identity.Directory, r *runs.Run, approver string) (runs.Vote, bool) {
	return r.VoteOf(dir, runs.SubjectKey(dir, approver))
}

// expiredPage is the page of a link whose run no longer waits for the
// link's decision: its window closed, or, for a run ended
// approval_unmeetable, its approval could no longer be given.
func expiredPage(r *runs.Run) events.APIGatewayProxyResponse {
	if r != nil && r.Status == runs.StatusExpired && r.Reason == loop.ReasonApprovalUnmeetable {
		return page(approvalpage.Unmeetable())
	}
	return page(approvalpage.Expired())
}

package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/policy"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
	"github.com/agentgate/agentgate/internal/webhook"
)

// RunView is the JSON shape of a run in responses.
type RunView struct {
	ID        string                 `json:"id"`
	Status    runs.Status            `json:"status"`
	Reason    loop.TerminationReason `json:"termination_reason,omitempty"`
	Version   int64                  `json:"version"`
	CreatedAt time.Time              `json:"created_at"`
	UpdatedAt time.Time              `json:"updated_at"`
	Initiator string                 `json:"initiator"`
	Approvers []string               `json:"approvers"`
	Counters  loop.Counters          `json:"counters"`
	Pending   *PendingView           `json:"pending,omitempty"`
	Decision  *DecisionView          `json:"decision,omitempty"`
	Output    json.RawMessage        `json:"output,omitempty"`
	Metadata  map[string]string      `json:"metadata,omitempty"`
	Webhook   *WebhookView           `json:"webhook,omitempty"`
	// ToolResults are the client calls the caller must execute (only
	// while WAITING_FOR_TOOL_RESULTS).
	ToolResults *ToolResultsView `json:"tool_results,omitempty"`
	// Votes are the votes cast on the current (or last) suspension;
	// VotesNeeded, while the run waits, the approvals still needed: when
	// votes decide the turn the most any held call that is neither
	// approved nor denied still needs (each call's own is its approval's
	// StillNeeded). Voting, while the run waits, says votes decide the
	// turn, call by call (runs.Run.Voting): under a quorum, or when no one
	// person may decide every held call.
	Votes       []VoteView        `json:"votes,omitempty"`
	VotesNeeded *int              `json:"votes_needed,omitempty"`
	Voting      bool              `json:"voting,omitempty"`
	Links       map[string]string `json:"links"`
}

// VoteView is one vote on a suspension that votes decide:
// a whole-turn vote's action (none for a per-call vote) and the voter's
// choice on each held call they decided. By is the voter as authenticated
// (the audit's actor); Person who the vote counted for (runs.Vote.Name),
// as the run's deciders and each call's approved_by name them.
type VoteView struct {
	By      string            `json:"by"`
	Person  string            `json:"person,omitempty"`
	Action  loop.Action       `json:"action,omitempty"`
	Message string            `json:"message,omitempty"`
	Calls   []runs.VoteChoice `json:"calls,omitempty"`
	At      time.Time         `json:"at"`
	Via     string            `json:"via"`
}

// PendingCallView is a held call as GET /runs/{id} shows it: its summary
// and, when votes decide the turn, its approval with the call's own vote
// progress.
type PendingCallView struct {
	runs.CallSummary
	Approval *ApprovalView `json:"approval,omitempty"`
}

// ApprovalView is a held call's approval terms (loop.ApprovalRule) and,
// when votes decide the turn and the call needs approval,
// its vote progress: the approvals so far and whose they are, how many it
// still needs (0 once approved or denied), and who denied it.
type ApprovalView struct {
	loop.ApprovalRule
	Approvals   *int     `json:"approvals,omitempty"`
	ApprovedBy  []string `json:"approved_by,omitempty"`
	StillNeeded *int     `json:"still_needed,omitempty"`
	DeniedBy    string   `json:"denied_by,omitempty"`
}

// pendingCallViews returns r's held calls with their vote progress,
// counted under dir, the directory in force, as the store counts it
// (runs.Run.TallyIn).
func pendingCallViews(r *runs.Run, dir *identity.Directory) []PendingCallView {
	out := make([]PendingCallView, 0, len(r.PendingCalls))
	tally := map[string]runs.CallTally{}
	for _, t := range r.TallyIn(dir) {
		tally[t.CallID] = t
	}
	for _, c := range r.PendingCalls {
		v := PendingCallView{CallSummary: c}
		if c.Approval != nil {
			v.Approval = &ApprovalView{ApprovalRule: *c.Approval}
		}
		if t, ok := tally[c.ID]; ok && r.Voting() {
			if v.Approval == nil {
				v.Approval = &ApprovalView{}
			}
			approvals, still := len(t.ApprovedBy), t.StillNeeded()
			v.Approval.Approvals, v.Approval.StillNeeded, v.Approval.DeniedBy = &approvals, &still, t.DeniedBy
			v.Approval.ApprovedBy = t.ApprovedBy
		}
		out = append(out, v)
	}
	return out
}

// WebhookView is a run's webhook subscription and the deliveries not yet
// done (their attempts are in the events).
type WebhookView struct {
	URL     string   `json:"url"`
	Events  []string `json:"events,omitempty"`
	Pending int      `json:"pending_deliveries"`
}

// PendingView is what waits for approval.
type PendingView struct {
	SuspensionID string            `json:"suspension_id"`
	TurnDigest   string            `json:"turn_digest"`
	Deadline     time.Time         `json:"deadline"`
	Calls        []PendingCallView `json:"calls"`
}

// DecisionView is the decision of the current suspension and who made it:
// By, Via and At are the decider's, or when votes decided it those of the
// vote that completed the turn; Deciders (every voter whose vote decided a
// held call) and DecidedCalls (who decided each) are set then only.
type DecisionView struct {
	By           string             `json:"by"`
	Via          string             `json:"via"`
	At           time.Time          `json:"at"`
	Decision     *loop.Decision     `json:"decision"`
	Deciders     []string           `json:"deciders,omitempty"`
	DecidedCalls []runs.DecidedCall `json:"decided_calls,omitempty"`
}

// WebhookTargets is the submit-time check of webhook URLs.
type WebhookTargets struct {
	Policy webhook.Policy
	// Resolver resolves target hosts (nil: the system resolver).
	Resolver webhook.Resolver
}

func viewOf(r *runs.Run, dir *identity.Directory) RunView {
	v := RunView{
		ID: r.ID, Status: r.Status, Reason: r.Reason, Version: r.Version,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Initiator: r.Initiator,
		Approvers: r.Approvers, Counters: r.Counters, Output: r.Output, Links: routes.RunLinks(r.ID),
	}
	if v.Approvers == nil {
		v.Approvers = []string{}
	}
	v.Metadata = r.Metadata
	if r.Status == runs.StatusWaiting {
		v.Pending = &PendingView{SuspensionID: r.SuspensionID, TurnDigest: r.TurnDigest, Deadline: r.ApprovalDeadline, Calls: pendingCallViews(r, dir)}
		missing := r.VotesMissingIn(dir)
		v.VotesNeeded, v.Voting = &missing, r.Voting()
	}
	for _, vt := range r.Votes {
		v.Votes = append(v.Votes, VoteView{By: vt.By, Person: vt.Name(), Action: vt.TurnAction(), Message: vt.Message, Calls: vt.CallChoices(r.PendingCalls), At: vt.At, Via: vt.Via})
	}
	if r.Webhook != nil {
		v.Webhook = &WebhookView{URL: r.Webhook.URL, Events: r.Webhook.Events, Pending: len(r.Outbox)}
	}
	if r.Decision != nil {
		v.Decision = &DecisionView{By: r.DecidedBy, Via: r.DecidedVia, At: r.DecidedAt, Decision: r.Decision,
			Deciders: r.DecidingVotersIn(dir), DecidedCalls: r.DecidedCallsIn(dir)}
	}
	v.ToolResults = toolResultsView(r)
	return v
}

// IdempotencyKeyHeader is the request header of POST /runs that names a
// start, so that the same request sent again (after a lost answer) gets
// the run the first one created instead of a second run.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set to "true" on the answer to a start that an earlier
// request under the same idempotency key answered: no run was created.
const ReplayedHeader = "Idempotent-Replayed"

func (a *API) startRun(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	who, err := requireIdentity(req)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	key, err := idempotencyKey(req)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	var sr service.StartRequest
	given, err := decodeJSONGiven(req, routes.MaxStartBody, &sr)
	// An integer beyond its type is refused after the validation, which
	// says the member's range where it has one (approval_ttl_seconds must
	// be between 60 and 604800); sr holds it at the type's bound.
	var outOfRange *outOfRangeError
	if errors.As(err, &outOfRange) {
		err = nil
	}
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	var digest string
	if key != "" {
		if digest, err = requestDigest(req); err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
	}
	in, err := a.judgeStart(ctx, who, &sr, given)
	if err == nil && outOfRange != nil {
		err = outOfRange // a member without a range of its own (max_tokens)
	}
	if err != nil {
		if key == "" {
			return events.APIGatewayProxyResponse{}, err
		}
		// A request sent again gets the run the first one created even if
		// it would be refused now (the policy, the directory or a webhook
		// target's address may have changed since, and the run stands):
		// the key is read here, where a request is refused, and not before
		// every start (the Go client sends every start under a key).
		return a.replayRefused(ctx, req, who, key, digest, err)
	}
	in.IdempotencyKey, in.RequestSHA256 = key, digest
	// Under a key the write comes first: it stores the key on the
	// condition that it is new, and reads the key only when that condition
	// refuses it (the request was sent again, or concurrently).
	r, replayed, err := a.Store.Start(ctx, in)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if replayed {
		// An earlier or concurrent request under the key created the run
		// and dispatched its worker (or left it to the sweep, as below).
		return a.startedResponse(req, r, true), nil
	}
	log := a.log().With("run_id", r.ID)
	log.InfoContext(ctx, "run created", "approvers", len(r.Approvers), "idempotency_key", key != "")
	if err := a.Dispatch.Dispatch(ctx, service.NewJob(service.JobRun, r)); err != nil {
		// The run is durable; purge re-dispatches a run left QUEUED.
		log.WarnContext(ctx, "dispatch failed; purge will retry", "err", err)
	}
	return a.startedResponse(req, r, false), nil
}

// replayRefused answers a start under an idempotency key that was refused
// as judged now (refused): with the run the key started if the request is
// the one that started it, the refusal of a key reused for another request
// (422 naming the run) if it is not, and refused when the key started no
// run. A caller that is no principal gets refused without a look-up: it
// started nothing.
func (a *API) replayRefused(ctx context.Context, req events.APIGatewayProxyRequest, who, key, digest string, refused error) (events.APIGatewayProxyResponse, error) {
	if _, err := identity.Parse(who); err != nil {
		return events.APIGatewayProxyResponse{}, refused
	}
	r, err := a.Store.KeyedRun(ctx, who, key, digest)
	switch {
	case err == nil:
		return a.startedResponse(req, r, true), nil
	case runs.ErrorCode(err) == runs.ENotFound:
		return events.APIGatewayProxyResponse{}, refused
	}
	return events.APIGatewayProxyResponse{}, err
}

// judgeStart checks a start request sr of caller who (given: the members
// the body wrote out) against the contract, the deployment's models and
// tools, the directory and the policy, and returns the run it starts.
func (a *API) judgeStart(ctx context.Context, who string, sr *service.StartRequest, given map[string]bool) (runs.NewRun, error) {
	if sr.RequiredApprovals == 0 && given["/required_approvals"] {
		// 0 is how the request type spells "not given" (the policy's
		// number); written out, it is below the spec's minimum of 1.
		return runs.NewRun{}, errorf(runs.EInvalid, "required_approvals must be between 1 and %d", policy.MaxRequiredApprovals)
	}
	if sr.WebhookURL == "" && given["/webhook_url"] {
		// "" is how the request type spells "no webhook"; written out, it
		// is no URI (format: uri) and most likely a value the caller
		// forgot to fill in.
		return runs.NewRun{}, errorf(runs.EInvalid, "webhook_url is empty: give an absolute https URL, or leave it out for no webhooks")
	}
	for i, m := range sr.Messages {
		if m.Content == nil {
			// The contract's Message requires content (an array; null
			// and a missing member decode alike). Found by FuzzStartRun.
			return runs.NewRun{}, errorf(runs.EBadRequest, "body is not valid: messages[%d].content is required (an array of blocks)", i)
		}
		if len(m.Content) == 0 {
			// Every provider refuses a message without content: the run
			// would only fail at its first model call.
			return runs.NewRun{}, errorf(runs.EInvalid, "messages[%d].content is empty; a message holds at least one block", i)
		}
	}
	// A tool the run names that this process lacks (its MCP server was
	// down when the process started, or listed it only later) is looked
	// for again before the run is refused for it.
	if err := sr.Validate(a.Tools.Revive(ctx, sr.AllowedTools, false)); err != nil {
		return runs.NewRun{}, err
	}
	if sr.Model != "" && !slices.Contains(a.AllowedModels, sr.Model) {
		return runs.NewRun{}, errorf(runs.EInvalid, "model %q is not allowed here; allowed: %v", sr.Model, a.AllowedModels)
	}
	initiator, err := identity.Parse(who)
	if err != nil {
		return runs.NewRun{}, errorf(runs.EForbidden, "the caller %q is not a principal agentgate can compare (e-mail, IAM ARN or local name), so nobody could decide its runs", who)
	}
	fourEyes, err := a.checkRunPolicy(initiator, sr)
	if err != nil {
		return runs.NewRun{}, err
	}
	sub := sr.Subscription()
	if sub != nil {
		if a.Webhooks == nil {
			return runs.NewRun{}, errorf(runs.EInvalid, "webhook_url: this deployment does not deliver webhooks (no signing secret configured)")
		}
		if _, err := a.Webhooks.Policy.CheckTarget(ctx, a.Webhooks.Resolver, sub.URL); err != nil {
			// Only a refusal's own message (written for the caller, naming
			// no resolved address) reaches the caller; anything else is an
			// internal error.
			var refused *webhook.TargetError
			if !errors.As(err, &refused) {
				return runs.NewRun{}, fmt.Errorf("check webhook_url: %w", err)
			}
			return runs.NewRun{}, errorf(runs.EInvalid, "webhook_url: %s", refused.Message)
		}
	}
	// The subscription and the tool executors live on the run row, not in
	// the stored request.
	executors := sr.ToolExecutors
	sr.WebhookURL, sr.WebhookEvents, sr.ToolExecutors = "", nil, nil
	raw, err := json.Marshal(sr)
	if err != nil {
		return runs.NewRun{}, err
	}
	return runs.NewRun{
		Initiator: who, InitiatorPerson: runs.SubjectKey(a.Directory, who), InitiatorKeys: runs.PersonKeys(a.Directory, who),
		Approvers: sr.Approvers, Request: raw, Webhook: sub,
		FourEyes: fourEyes, Purpose: sr.Purpose(), Metadata: sr.Metadata, ToolExecutors: executors,
	}, nil
}

// startedResponse is the answer to POST /runs: 202 with the run, whether
// this request created it or an earlier one under the same idempotency
// key did (replayed: Idempotent-Replayed: true, and the run as it is now).
func (a *API) startedResponse(req events.APIGatewayProxyRequest, r *runs.Run, replayed bool) events.APIGatewayProxyResponse {
	resp := jsonResponse(http.StatusAccepted, viewOf(r, a.Directory))
	resp.Headers["Location"] = runLocation(req, r.ID)
	if replayed {
		resp.Headers[ReplayedHeader] = "true"
	}
	return resp
}

// idempotencyKey returns the request's Idempotency-Key ("" when it has
// none). A key that is not 1 to runs.MaxIdempotencyKeyBytes visible ASCII
// characters, or more than one value of the header, is malformed (400).
func idempotencyKey(req events.APIGatewayProxyRequest) (string, error) {
	n := 0
	for k, vs := range req.MultiValueHeaders {
		if strings.EqualFold(k, IdempotencyKeyHeader) {
			n += len(vs)
		}
	}
	if n > 1 {
		return "", errorf(runs.EBadRequest, "%s is given %d times; send it once", IdempotencyKeyHeader, n)
	}
	key, spellings := "", 0
	for k, v := range req.Headers {
		if strings.EqualFold(k, IdempotencyKeyHeader) {
			key, spellings = v, spellings+1
		}
	}
	switch {
	case spellings == 0:
		return "", nil
	case spellings > 1:
		return "", errorf(runs.EBadRequest, "%s is given %d times; send it once", IdempotencyKeyHeader, spellings)
	}
	if !runs.ValidIdempotencyKey(key) {
		return "", errorf(runs.EBadRequest, "%s must be 1 to %d visible ASCII characters ('!' to '~': no spaces), such as a UUID", IdempotencyKeyHeader, runs.MaxIdempotencyKeyBytes)
	}
	return key, nil
}

// requestDigest is the SHA-256 (hex) of the request body's canonical JSON
// (loop.CanonicalJSON: object members sorted by name at every depth, no
// insignificant white space, strings re-escaped alike, numbers as
// written): the request an idempotency key is bound to. Two bodies that
// differ only in member order or white space are one request.
func requestDigest(req events.APIGatewayProxyRequest) (string, error) {
	b, err := body(req, routes.MaxStartBody)
	if err != nil {
		return "", err
	}
	canon, err := loop.CanonicalJSON(b)
	if err != nil {
		// The body decoded strictly as I-JSON; this is not expected.
		return "", fmt.Errorf("canonical start request: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// runLocation is the Location of a new run: the path the client posted to
// with the run's id appended, so that it resolves against the request URL
// (RFC 9110, section 10.2.2) to the run whatever stage comes before /runs.
// The path is the event's requestContext.path, which API Gateway gives as
// the client sent it: /v1/runs on the stage URL, where the event's path,
// /runs, has no stage. The local server has no stage: /runs/{id}. The
// bodies' links stay relative to the API's base URL. A prefix that is not
// plain path segments (a double slash would make the header a
// network-path reference to another host) is left out.
func runLocation(req events.APIGatewayProxyRequest, id string) string {
	p := req.RequestContext.Path
	if p == "" {
		p = req.Path
	}
	prefix, ok := strings.CutSuffix(p, "/runs")
	if !ok || !plainPathPrefix(prefix) {
		prefix = ""
	}
	return prefix + "/runs/" + id
}

// maxLocationPrefix bounds the path prefix runLocation copies.
const maxLocationPrefix = 512

// plainPathPrefix reports whether p is empty or one or more "/segment"s of
// unreserved characters (RFC 3986: letters, digits, - . _ ~), none of them
// "." or "..".
func plainPathPrefix(p string) bool {
	if p == "" {
		return true
	}
	if len(p) > maxLocationPrefix || p[0] != '/' {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, c := range []byte(seg) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
				return false
			}
		}
	}
	return true
}

// checkRunPolicy checks a start request against the directory and the
// deployment policy: its approvers resolve (groups only, when the
// directory says so), its tool executors resolve as approvers do (the
// groups exist, no person twice by any alias; service accounts allowed:
// identity.Directory.RunToolExecutors), its
// requirements only tighten the policy (422 naming what it tried to
// loosen), and enough persons may approve for the approvals it needs. It
// returns whether the run is four-eyes.
func (a *API) checkRunPolicy(initiator identity.Principal, sr *service.StartRequest) (bool, error) {
	list, err := a.Directory.RunApprovers(sr.Approvers)
	if err != nil {
		return false, refusal(err, identity.ErrInvalidApprovers)
	}
	if err := a.Directory.RunToolExecutors(sr.ToolExecutors); err != nil {
		return false, refusal(err, identity.ErrInvalidApprovers)
	}
	if _, err := a.Policy.CheckRun(sr.RunRequirements()); err != nil {
		return false, refusal(err, policy.ErrInvalidRun)
	}
	d := a.Policy.Defaults()
	fourEyes := sr.WantsFourEyes() || d.FourEyes
	need := max(sr.RequiredApprovals, d.RequiredApprovals, 1)
	if have := len(a.Directory.Eligible(initiator, identity.Requirement{Approvers: list, FourEyes: fourEyes})); have < need {
		return false, errorf(runs.EInvalid, "approvals need %d distinct persons but the approvers name %d who may decide this run%s",
			need, have, map[bool]string{true: " (four-eyes: not the initiator)"}[fourEyes])
	}
	return fourEyes, nil
}

// readable loads a run the caller may see: its initiator or an approver.
func (a *API) readable(ctx context.Context, req events.APIGatewayProxyRequest, id string) (*runs.Run, string, error) {
	who, err := requireIdentity(req)
	if err != nil {
		return nil, "", err
	}
	r, err := a.Store.Get(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if !runs.MayRead(a.Directory, r, who) {
		return nil, "", errorf(runs.EForbidden, "%s is neither the initiator, an approver nor a tool executor of run %s", who, id)
	}
	return r, who, nil
}

// getRun answers GET /runs/{id}; with ?after_version=N&wait=S it answers
// once the run's version is above N or the run has ended, waiting at most S
// seconds (1 to 20; at most MaxWait, which is 0 on the deployed functions)
// for that, so a caller waiting on a run need not poll. The answer carries
// the body's entity tag (ETag); a request whose If-None-Match lists it gets
// 304 Not Modified without the body, so a caller that polls downloads and
// decodes the run only when it changed.
func (a *API) getRun(ctx context.Context, req events.APIGatewayProxyRequest, id string) (events.APIGatewayProxyResponse, error) {
	wait, err := queryInt(req, "wait", 0, 0, int64(runs.MaxWait/time.Second))
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	hasAfter := req.QueryStringParameters["after_version"] != ""
	after, err := queryInt(req, "after_version", 0, 0, 1<<62)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if wait > 0 && !hasAfter {
		return events.APIGatewayProxyResponse{}, errorf(runs.EInvalid, "query parameter wait needs after_version (the version the caller has)")
	}
	r, _, err := a.readable(ctx, req, id)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if d := min(time.Duration(wait)*time.Second, a.MaxWait); d > 0 && r.Version <= after && !r.Status.Terminal() {
		if r, err = a.Store.GetAfter(ctx, id, after, d); err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
	}
	// The condition is evaluated last: after the access check (a caller
	// who may not read the run gets its refusal, never a 304) and after
	// the wait, against the run as it would be sent now.
	return conditional(req, jsonResponse(http.StatusOK, viewOf(r, a.Directory))), nil
}

func (a *API) listEvents(ctx context.Context, req events.APIGatewayProxyRequest, id string) (events.APIGatewayProxyResponse, error) {
	after, err := queryInt(req, "after", 0, 0, 1<<62)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	limit, err := queryInt(req, "limit", 100, 1, 1000)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if _, _, err := a.readable(ctx, req, id); err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	evs, err := a.Store.Events(ctx, id, after, int(limit))
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	out := map[string]any{"events": evs}
	if evs == nil {
		out["events"] = []runs.Event{}
	}
	if len(evs) == int(limit) {
		out["next"] = "/runs/" + id + "/events?after=" + itoa(evs[len(evs)-1].Seq) + "&limit=" + itoa(limit)
	}
	return jsonResponse(http.StatusOK, out), nil
}

// DecisionBody is the body of POST /runs/{id}/decision: the loop's decision.
type DecisionBody = loop.Decision

func (a *API) decide(ctx context.Context, req events.APIGatewayProxyRequest, id string) (events.APIGatewayProxyResponse, error) {
	who, err := requireIdentity(req)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	var d DecisionBody
	if err := decodeJSON(req, routes.MaxDecisionBody, &d); err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if !isDigest(d.TurnDigest) {
		// The contract's Digest pattern (API Gateway's validator refuses it too).
		return events.APIGatewayProxyResponse{}, errorf(runs.EBadRequest, "body is not valid: turn_digest must be 64 lowercase hex digits (the pending.turn_digest of GET /runs/{id})")
	}
	if d.Calls != nil && len(d.Calls) == 0 {
		// The contract's minItems: 1 (API Gateway's validator refuses it too).
		return events.APIGatewayProxyResponse{}, errorf(runs.EBadRequest, "body is not valid: calls is empty; give one decision per call, or leave calls out and give action")
	}
	r, err := a.Store.Get(ctx, id)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if err := notWaiting(r); err != nil && runs.MayRead(a.Directory, r, who) {
		// Nothing to decide, told to whoever may see the run (as GET
		// /runs/{id} would); a run that never held a turn has no calls to
		// authorize against, which is no reason for a 403.
		return events.APIGatewayProxyResponse{}, withLastDecision(err, r)
	}
	if err := a.authorize(r, who); err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	r, err = a.applyDecision(ctx, r, d, runs.NewDecision{Decider: who, Via: runs.ViaAPI})
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	return jsonResponse(http.StatusAccepted, viewOf(r, a.Directory)), nil
}

// isDigest reports whether s has the form of a turn digest: SHA-256 in
// lowercase hex.
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// notWaiting is the conflict of deciding run r when it does not wait for a
// decision, nil when it does.
func notWaiting(r *runs.Run) error {
	switch {
	case r.Status == runs.StatusWaiting:
		return nil
	case r.Status == runs.StatusExpired && r.Reason == loop.ReasonApprovalUnmeetable:
		// The sweep ended the wait: the directory no longer lets a held call be approved.
		return errorf(runs.EGone, "run %s is EXPIRED (approval_unmeetable): a held call can no longer get the approvals it needs; nothing waits for a decision", r.ID)
	case r.Status == runs.StatusExpired:
		// The sweep ended the wait: the window closed (410, as before the sweep came).
		return errorf(runs.EGone, "run %s is EXPIRED: its window closed; nothing waits for a decision", r.ID)
	case r.Status.Terminal():
		return errorf(runs.EConflict, "run %s is %s; nothing waits for a decision", r.ID, r.Status)
	}
	return errorf(runs.EConflict, "run %s is %s, not waiting for approval", r.ID, r.Status)
}

// withLastDecision adds to err, the conflict of deciding run r when it
// does not wait for a decision, who decided r's last turn, when and how,
// so that a decider whose 202 was lost and who sent the decision again
// learns whether theirs is the one recorded. For callers who may read the
// run only (GET /runs/{id} shows them the same).
func withLastDecision(err error, r *runs.Run) error {
	var e *runs.Error
	if r.DecidedBy == "" || !errors.As(err, &e) || e.Code != runs.EConflict {
		return err
	}
	who := "by " + r.DecidedBy
	if r.Voting() {
		who = "by votes, the last cast by " + r.DecidedBy
	}
	return errorf(e.Code, "%s (its last turn was decided %s via %s at %s)", e.Message, who, r.DecidedVia, r.DecidedAt.UTC().Format(runs.InstantLayout))
}

// applyDecision validates a decision against the run's held turn, records it
// (one conditional write: of concurrent deciders exactly one wins) and
// dispatches the resume worker. Shared by the API and the approval links.
func (a *API) applyDecision(ctx context.Context, r *runs.Run, d loop.Decision, how runs.NewDecision) (*runs.Run, error) {
	if err := notWaiting(r); err != nil {
		return nil, err
	}
	if !a.now().Before(r.ApprovalDeadline) {
		return nil, errorf(runs.EGone, "the approval window of run %s closed at %s", r.ID, r.ApprovalDeadline.UTC().Format(runs.InstantLayout))
	}
	tools, err := service.RunToolbox(a.Tools, r)
	if err != nil {
		// Only edits need the run's own tools; without them an edit of a
		// client call is refused as an unknown tool.
		tools = a.Tools
	}
	pol := service.DecisionPolicy(a.Policy, a.Directory, r, a.log().With("run_id", r.ID))
	if r.Voting() {
		// A vote: whole turn or per call, on the calls this voter may
		// decide; the store resolves each call from the votes.
		how.Voter = runs.SubjectKey(a.Directory, how.Decider)
		if how.Voter == "" {
			return nil, errorf(runs.EForbidden, "the decision cannot be authorized: the decider is not a valid principal")
		}
		how.Directory, how.VoterKeys = a.Directory, runs.PersonKeys(a.Directory, how.Decider)
		if v, ok := r.VoteOf(a.Directory, how.Voter); ok {
			// Said before the vote's own checks: a person votes once,
			// whatever the second vote holds and whatever their key was
			// when they voted (the store's write checks it again, on the
			// row it writes).
			if v.By != how.Decider && v.Name() != runs.NameOf(a.Directory, how.Decider) {
				// Another's vote as the directory stood then, linked to
				// them now (an alias or id they hold since): say so.
				return nil, errorf(runs.EConflict, "%s counts as having voted on this suspension: the vote %s cast as %s is linked to them by the directory (an id or alias they hold now, or an id their entry lists in former_ids, was that voter's)", how.Decider, v.Name(), v.By)
			}
			return nil, errorf(runs.EConflict, "%s already voted on this suspension", how.Decider)
		}
		// Where each held call needs one approval, the voter who decides
		// a call may edit it: the edit is checked as a decision's is.
		err := loop.ValidateVote(ctx, tools, pol, r.HeldCalls(), r.TurnDigest, d, r.MostApprovalsNeeded())
		switch {
		case errors.Is(err, loop.ErrDigestMismatch):
			return nil, turnMovedOn(r, d)
		case err != nil:
			return nil, runs.FromLoop(err)
		}
		how.StillAsked = func(next *runs.Run) map[string]bool {
			asked := map[string]bool{}
			for _, e := range runs.OpenDeciders(a.Directory, next) {
				asked[e.Subject.Key()] = true
			}
			return asked
		}
		how.Choices, err = runs.VoteChoices(a.Directory, r, how.Decider, d)
		if err != nil {
			var ref *identity.Refusal
			if errors.As(err, &ref) {
				return nil, errorf(runs.EForbidden, "%s", ref.Message)
			}
			return nil, err
		}
	} else {
		err = loop.ValidateDecision(ctx, tools, pol, r.HeldCalls(), r.TurnDigest, d)
		switch {
		case errors.Is(err, loop.ErrDigestMismatch):
			return nil, turnMovedOn(r, d)
		case err != nil:
			return nil, runs.FromLoop(err)
		}
	}
	how.SuspensionID = r.SuspensionID
	how.Decision = d
	next, err := a.Store.Decide(ctx, r, how)
	if err != nil {
		return nil, err
	}
	log := a.log().With("run_id", r.ID)
	if next.Status == runs.StatusWaiting {
		log.InfoContext(ctx, "vote recorded", "via", how.Via, "suspension_id", r.SuspensionID, "votes_missing", next.VotesMissing(), "votes_needed", next.VotesNeeded)
		return next, nil
	}
	log.InfoContext(ctx, "decision recorded", "via", how.Via, "suspension_id", r.SuspensionID)
	if err := a.Dispatch.Dispatch(ctx, service.NewJob(service.JobResume, next)); err != nil {
		log.WarnContext(ctx, "dispatch failed; purge will retry", "err", err)
	}
	return next, nil
}

func (a *API) cancel(ctx context.Context, req events.APIGatewayProxyRequest, id string) (events.APIGatewayProxyResponse, error) {
	if b, err := body(req, routes.MaxCancelBody); err != nil {
		return events.APIGatewayProxyResponse{}, err
	} else if len(b) > 0 && len(bytes.TrimSpace(b)) == 0 {
		if err := jsonMediaType(req); err != nil {
			return events.APIGatewayProxyResponse{}, err // blank, but sent as something else than JSON
		}
	} else if len(b) > 0 {
		// No body, or an empty JSON object (whitespace and all), sent as
		// JSON like every other body.
		var empty struct{}
		if err := decodeJSON(req, routes.MaxCancelBody, &empty); err != nil {
			if runs.ErrorCode(err) == runs.EBadRequest {
				return events.APIGatewayProxyResponse{}, errorf(runs.EBadRequest, "cancel takes no body, or an empty JSON object: %s", strings.TrimPrefix(runs.ErrorMessage(err), "body is not valid: "))
			}
			return events.APIGatewayProxyResponse{}, err
		}
	}
	r, who, err := a.readable(ctx, req, id)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if !runs.MayCancel(a.Directory, r, who) {
		return events.APIGatewayProxyResponse{}, errorf(runs.EForbidden, "%s may read run %s (a policy rule asked them about an earlier turn) but not cancel it: the initiator, the run's approvers, its tool executors and whoever the turn it holds now names may", who, id)
	}
	if r.Status.Terminal() {
		return events.APIGatewayProxyResponse{}, errorf(runs.EConflict, "run %s is already %s", id, r.Status)
	}
	r, err = a.Store.Cancel(ctx, r, who)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	a.log().InfoContext(ctx, "run cancelled", "run_id", id)
	return jsonResponse(http.StatusOK, viewOf(r, a.Directory)), nil
}

// authorize applies runs.MayDecide (the one check of the API and the
// links; it fails closed) and turns a refusal into a 403.
func (a *API) authorize(r *runs.Run, who string) error {
	err := runs.MayDecide(a.Directory, r, who)
	if err == nil {
		return nil
	}
	var ref *identity.Refusal
	if errors.As(err, &ref) {
		a.log().Info("decision refused", "run_id", r.ID, "decider", who, "reason", ref.Reason)
	}
	return errorf(runs.EForbidden, "%s", refusalMessage(err))
}

// refusalMessage is what a caller is told of runs.MayDecide's refusal err:
// the refusal's message, safe to show, or a generic one.
func refusalMessage(err error) string {
	var ref *identity.Refusal
	if errors.As(err, &ref) {
		return ref.Message
	}
	return "the decision cannot be authorized"
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// InboxEntryView is one entry of GET /approvals.
type InboxEntryView struct {
	RunID        string    `json:"run_id"`
	SuspensionID string    `json:"suspension_id"`
	TurnDigest   string    `json:"turn_digest"`
	Initiator    string    `json:"initiator"`
	Purpose      string    `json:"purpose"`
	Tools        []string  `json:"tools"`
	Deadline     time.Time `json:"deadline"`
	SuspendedAt  time.Time `json:"suspended_at"`
	// VotesNeeded is the suspension's quorum (the most approvals from
	// distinct persons any held call needs); VotesMissing the most any
	// held call not yet approved or denied still needs (what GET
	// /runs/{id} calls votes_needed); Approvals how many distinct persons
	// approved a held call so far (nil for an entry written before entries
	// counted them, until the next vote): runs.InboxEntry.ApprovingPersons,
	// stored as approving_persons, not the stored "approvals" attribute
	// (runs.InboxEntry.Counted, VotesNeeded less VotesMissing, kept for the
	// release before).
	VotesNeeded  int  `json:"votes_needed"`
	VotesMissing int  `json:"votes_missing"`
	Approvals    *int `json:"approvals,omitempty"`
}

// InboxPageView is the body of GET /approvals.
type InboxPageView struct {
	Approvals  []InboxEntryView `json:"approvals"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// maxCursor bounds the cursor query parameter.
const maxCursor = 1024

// listApprovals answers the caller's inbox: the suspensions indexed under
// the caller's key (runs.SubjectKey: the directory person for any of their
// aliases, else the canonical principal), newest first. Suspensions index
// everyone who may decide them, groups expanded to their members.
func (a *API) listApprovals(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	who, err := requireIdentity(req)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	limit, err := queryInt(req, "limit", runs.DefaultInboxLimit, 1, runs.MaxInboxLimit)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	cursor := req.QueryStringParameters["cursor"]
	if len(cursor) > maxCursor {
		return events.APIGatewayProxyResponse{}, errorf(runs.EBadRequest, "query parameter cursor is longer than %d characters", maxCursor)
	}
	entries, next, err := a.Store.Inbox(ctx, runs.SubjectKey(a.Directory, who), int(limit), cursor)
	if runs.ErrorCode(err) == runs.EInvalid {
		return events.APIGatewayProxyResponse{}, errorf(runs.EInvalid, "query parameter cursor is not the next_cursor of a page of your inbox")
	}
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	page := InboxPageView{Approvals: make([]InboxEntryView, len(entries)), NextCursor: next}
	for i, e := range entries {
		page.Approvals[i] = InboxEntryView{
			RunID: e.RunID, SuspensionID: e.SuspensionID, TurnDigest: e.TurnDigest, Initiator: e.Initiator,
			Purpose: e.Purpose, Tools: e.Tools, Deadline: e.Deadline, SuspendedAt: e.SuspendedAt, VotesNeeded: e.VotesNeeded,
			VotesMissing: e.VotesMissing(), Approvals: e.ApprovingPersons,
		}
	}
	return jsonResponse(http.StatusOK, page), nil
}

// turnMovedOn is the refusal of a decision whose digest is not that of the
// turn the run waits on: most often another approver decided that turn
// first, or it changed; but the digest may also be one this run never had
// (mistyped, or of another run). The row keeps only the current turn's
// digest, so the message cannot tell which and says both. It names the
// turn waiting now, to review before deciding it (not to decide again
// blind).
func turnMovedOn(r *runs.Run, d loop.Decision) error {
	return errorf(runs.EConflict, "the turn digest you sent (%q) does not match the turn run %s waits on (%q): the turn you reviewed was decided already (by someone else) or changed, or the digest was never one of this run's; review the turn it waits on before you decide on it", d.TurnDigest, r.ID, r.TurnDigest)
}

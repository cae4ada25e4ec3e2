package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentgate/agentgate/internal/identity"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/routes"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/service"
)

// ToolResultsView is what a run waiting for tool results hands its caller
// (only while WAITING_FOR_TOOL_RESULTS).
type ToolResultsView struct {
	ToolResultsID string           `json:"tool_results_id"`
	Deadline      time.Time        `json:"deadline"`
	Calls         []ClientCallView `json:"calls"`
}

// ClientCallView is one handed-over call: its id, tool and final (possibly
// edited) input, bounded like a pending call's: a long input is shortened
// (InputTruncated, with its whole size) and InputURL reads the whole of it.
type ClientCallView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the final input; when InputTruncated, a shortened copy
	// (long strings cut, ending in "…") or absent when even that is too
	// large.
	Input          json.RawMessage `json:"input,omitempty"`
	InputSize      int             `json:"input_size"`
	InputTruncated bool            `json:"input_truncated,omitempty"`
	// InputURL, when InputTruncated, is where the whole input is read,
	// page by page (GET /runs/{id}/calls/{call_id}?part=input).
	InputURL string `json:"input_url,omitempty"`
	// Edited says an approver changed the input the model gave.
	Edited bool `json:"edited,omitempty"`
}

func toolResultsView(r *runs.Run) *ToolResultsView {
	if r.Status != runs.StatusWaitingForToolResults || r.HandOver == nil {
		return nil
	}
	v := &ToolResultsView{ToolResultsID: r.HandOver.ID, Deadline: r.HandOver.Deadline, Calls: make([]ClientCallView, len(r.HandOver.Calls))}
	for i, c := range r.HandOver.Calls {
		cv := ClientCallView{ID: c.ID, Name: c.Name, Input: c.Input, InputSize: c.InputSize, InputTruncated: c.InputTruncated, Edited: c.Edited}
		if cv.InputSize == 0 {
			cv.InputSize = len(c.Input) // a row written before inputs were summarized kept them whole
		}
		if c.InputTruncated {
			cv.InputURL = "/runs/" + r.ID + "/calls/" + url.PathEscape(c.ID) + "?part=" + PartInput
		}
		v.Calls[i] = cv
	}
	return v
}

// ToolResultsBody is the body of POST /runs/{id}/tool-results.
type ToolResultsBody struct {
	ToolResultsID string              `json:"tool_results_id"`
	Results       []loop.ClientResult `json:"results"`
}

// submitToolResults records the caller's results of the handed-over calls
// (one conditional write: of concurrent submissions exactly one wins) and
// dispatches the resume worker.
func (a *API) submitToolResults(ctx context.Context, req events.APIGatewayProxyRequest, id string) (events.APIGatewayProxyResponse, error) {
	who, err := requireIdentity(req)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	var b ToolResultsBody
	given, err := decodeJSONGiven(req, routes.MaxToolResultsBody, &b)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	if err := requireResultMembers(b.Results, given); err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	r, err := a.Store.Get(ctx, id)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	grantedBy, err := runs.MaySubmitResults(a.Directory, r, who)
	if err != nil {
		var ref *identity.Refusal
		if errors.As(err, &ref) {
			a.log().Info("tool results refused", "run_id", r.ID, "submitter", who, "reason", ref.Reason)
			return events.APIGatewayProxyResponse{}, errorf(runs.EForbidden, "%s", ref.Message)
		}
		return events.APIGatewayProxyResponse{}, errorf(runs.EForbidden, "the tool results cannot be authorized")
	}
	if r.Status == runs.StatusExpired {
		// The sweep ended the wait: the deadline passed (410, as before the sweep came).
		return events.APIGatewayProxyResponse{}, errorf(runs.EGone, "run %s is EXPIRED: its window closed; nothing waits for tool results", r.ID)
	}
	if r.Status.Terminal() {
		return events.APIGatewayProxyResponse{}, errorf(runs.EConflict, "run %s is %s; nothing waits for tool results", r.ID, r.Status)
	}
	next, err := a.Store.SubmitToolResults(ctx, r, runs.ToolResults{ID: b.ToolResultsID, Submitter: who, GrantedBy: grantedBy, Results: b.Results})
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	log := a.log().With("run_id", r.ID)
	log.InfoContext(ctx, "tool results recorded", "tool_results_id", b.ToolResultsID, "results", len(b.Results))
	if err := a.Dispatch.Dispatch(ctx, service.NewJob(service.JobResume, next)); err != nil {
		log.WarnContext(ctx, "dispatch failed; purge will retry", "err", err)
	}
	return jsonResponse(http.StatusAccepted, viewOf(next, a.Directory)), nil
}

// requireResultMembers refuses (422, as a missing tool_results_id or
// results is) a tool-results body, already decoded strictly, whose results
// leave out call_id or content, or give null for one: a result without
// content would otherwise reach the model as an empty result.
func requireResultMembers(results []loop.ClientResult, given givenMembers) error {
	for i := range results {
		switch {
		case !given["/results/"+strconv.Itoa(i)+"/call_id"]:
			return errorf(runs.EInvalid, "results[%d].call_id is required (a string)", i)
		case !given["/results/"+strconv.Itoa(i)+"/content"]:
			return errorf(runs.EInvalid, "results[%d].content is required (a string; empty for no output)", i)
		}
	}
	return nil
}

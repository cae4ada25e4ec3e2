package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apitest"
)

// clientToolScript calls the caller's lookup tool (a read: handed over at
// once) and its order tool (a write: approved first), then finishes.
const clientToolScript = `{"turns":[
 {"content":[{"type":"tool_use","id":"c1","name":"lookup","input":{"sku":"A"}},
             {"type":"tool_use","id":"c2","name":"order","input":{"sku":"A","qty":1}}]},
 {"content":[{"type":"text","text":"ordered one A"}]}]}`

var clientTools = []client.ClientTool{
	{Name: "lookup", Description: "stock", Effect: client.EffectRead, InputSchema: json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string"}}}`)},
	{Name: "order", Description: "orders", Effect: client.EffectWrite, InputSchema: json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}`)},
}

// TestClientTools: StartRun with client tools, Decide, Wait for
// WAITING_FOR_TOOL_RESULTS, SubmitToolResults by a tool executor, and the
// refusals a caller meets, each one typed *client.Error.
func TestClientTools(t *testing.T) {
	s := apitest.Start(t, apitest.Options{Script: clientToolScript})
	alice, bob, carol := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "carol")
	ctx := ctx(t)
	run, err := alice.StartRun(ctx, client.StartRunRequest{Prompt: "order A", Approvers: []string{"bob"},
		ClientTools: clientTools, ToolExecutors: []string{"carol"}, ToolResultsTTLSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	if run.Links.ToolResults != "/runs/"+run.ID+"/tool-results" {
		t.Errorf("links: %+v", run.Links)
	}
	run, err = bob.Wait(ctx, run.ID, client.StatusWaiting)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest)); err != nil {
		t.Fatal(err)
	}
	run, err = carol.Wait(ctx, run.ID, client.StatusWaitingForToolResults)
	if err != nil {
		t.Fatal(err)
	}
	tr := run.ToolResults
	if tr == nil || len(tr.Calls) != 2 || tr.Calls[0].Name != "lookup" || tr.Calls[1].ID != "c2" || tr.ToolResultsID == "" || tr.Deadline.IsZero() {
		t.Fatalf("tool results: %+v", tr)
	}
	answer := func(id string, calls ...client.ClientCall) client.ToolResults {
		res := client.ToolResults{ToolResultsID: id}
		for _, c := range calls {
			res.Results = append(res.Results, client.ToolResult{CallID: c.ID, Content: "done " + c.ID})
		}
		return res
	}
	for _, tt := range []struct {
		name   string
		who    *client.Client
		res    client.ToolResults
		status int
		code   string
	}{
		{"an approver is not a tool executor", bob, answer(tr.ToolResultsID, tr.Calls...), 403, client.CodeForbidden},
		{"a stale id", carol, answer("other", tr.Calls...), 409, client.CodeConflict},
		{"a result missing", carol, answer(tr.ToolResultsID, tr.Calls[0]), 422, client.CodeUnprocessable},
		{"an extra call", carol, answer(tr.ToolResultsID, append(tr.Calls, client.ClientCall{ID: "c9"})...), 422, client.CodeUnprocessable},
		{"a result too large", carol, client.ToolResults{ToolResultsID: tr.ToolResultsID, Results: []client.ToolResult{
			{CallID: "c1", Content: strings.Repeat("x", 65<<10)}, {CallID: "c2"}}}, 413, client.CodeTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.who.SubmitToolResults(ctx, run.ID, tt.res)
			checkAPIError(t, err, tt.status, tt.code)
		})
	}
	got, err := carol.SubmitToolResults(ctx, run.ID, answer(tr.ToolResultsID, tr.Calls...))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != client.StatusResuming || got.ToolResults != nil {
		t.Errorf("after the submission: %s %+v", got.Status, got.ToolResults)
	}
	_, err = carol.SubmitToolResults(ctx, run.ID, answer(tr.ToolResultsID, tr.Calls...))
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 {
		t.Errorf("a second submission: %v, want 409", err)
	}
	done, err := alice.Wait(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != client.StatusCompleted || done.Output == nil || done.Output.Text != "ordered one A" {
		t.Fatalf("done: %+v", done)
	}
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/agentgate/agentgate/client"
)

// The deployed API is signed with SigV4 from the default AWS credential
// chain; the region comes from the endpoint's host.
func ExampleNew() {
	c, err := client.New("https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
	if err != nil {
		log.Fatal(err)
	}
	_ = c
}

// The local server (agentgate serve) takes a bearer token.
func ExampleWithBearerToken() {
	c, err := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	_ = c
}

func ExampleClient_StartRun() {
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	run, err := c.StartRun(context.Background(), client.StartRunRequest{
		Prompt:             "Update the Team price on the pricing page to 12 EUR.",
		Approvers:          []string{"bob", "ops@example.com"},
		ApprovalTTLSeconds: 3600,
		FourEyes:           client.Bool(true),
		Metadata:           map[string]string{"ticket": "OPS-12"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.ID, run.Status) // QUEUED: the worker runs asynchronously
}

// A job that may be run again after a crash keeps its key with its work,
// so the second run of the job gets the first one's run instead of
// starting a second agent.
func ExampleWithIdempotencyKey() {
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	key := "pricing-update-OPS-12" // or client.NewIdempotencyKey(), saved with the job
	run, err := c.StartRun(context.Background(), client.StartRunRequest{
		Prompt:    "Update the Team price on the pricing page to 12 EUR.",
		Approvers: []string{"ops@example.com"},
	}, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.ID, run.Status)
}

// Wait for the run to ask for approval, show what it wants to do, and
// approve exactly the turn that was shown.
func ExampleClient_Wait() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	run, err := c.Wait(ctx, "5f1c0e...", client.StatusWaiting)
	if errors.Is(err, client.ErrRunEnded) {
		fmt.Println("the run ended without asking:", run.Status, run.TerminationReason)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	for _, call := range run.Pending.Calls {
		fmt.Println(call.Tool, call.NeedsApproval)
		fmt.Println(call.Preview)
	}
}

func ExampleClient_Decide() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	run, err := c.Run(ctx, "5f1c0e...")
	if err != nil {
		log.Fatal(err)
	}
	// Per call: approve the first, deny the rest with a reason.
	d := client.Decision{TurnDigest: run.Pending.TurnDigest}
	for i, call := range run.Pending.Calls {
		if !call.NeedsApproval {
			continue
		}
		cd := client.CallDecision{CallID: call.ID, Action: client.Approve}
		if i > 0 {
			cd = client.CallDecision{CallID: call.ID, Action: client.Deny, Message: "one change at a time"}
		}
		d.Calls = append(d.Calls, cd)
	}
	_, err = c.Decide(ctx, run.ID, d)
	if client.ErrorCode(err) == client.CodeConflict {
		fmt.Println("the run moved on or someone else decided; reload it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Events() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	for ev, err := range c.Events(ctx, "5f1c0e...", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Seq, ev.Type, ev.Actor)
	}
}

func ExampleClient_Cancel() {
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	run, err := c.Cancel(context.Background(), "5f1c0e...")
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Code, apiErr.Message)
		return
	}
	fmt.Println(run.Status)
}

// Client tools: execute the calls handed over and submit one result per
// call.
func ExampleClient_SubmitToolResults() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080", client.WithBearerToken(os.Getenv("AGENTGATE_TOKEN")))
	run, err := c.Wait(ctx, "5f1c0e...", client.StatusWaitingForToolResults)
	if err != nil {
		log.Fatal(err)
	}
	res := client.ToolResults{ToolResultsID: run.ToolResults.ToolResultsID}
	for _, call := range run.ToolResults.Calls {
		res.Results = append(res.Results, client.ToolResult{CallID: call.ID, Content: "42 rows"})
	}
	if _, err := c.SubmitToolResults(ctx, run.ID, res); err != nil {
		log.Fatal(err)
	}
}

// The approver's inbox (planned, issue #16).
func ExampleClient_PendingApprovals() {
	c, _ := client.New("https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
	for a, err := range c.PendingApprovals(context.Background()) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(a.RunID, a.Initiator, a.Purpose, a.Tools, a.Deadline)
	}
}

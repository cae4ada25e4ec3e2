// Package client is the Go client of agentgate's REST API (openapi.yaml at
// the module root): typed methods for every route, SigV4 signing for the
// deployed API (service execute-api, credentials from the AWS SDK's default
// chain or a given aws.Config) or a bearer token for the local server, and
// one error type, *Error, carrying the API's status, code and message.
//
//	c, err := client.New("https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
//	run, err := c.StartRun(ctx, client.StartRunRequest{Prompt: "...", Approvers: []string{"ops@example.com"}})
//	run, err = c.Wait(ctx, run.ID, client.StatusWaiting)
//	run, err = c.Decide(ctx, run.ID, client.ApproveTurn(run.Pending.TurnDigest))
//
// The package imports nothing of agentgate's internals; its types follow
// the spec field for field (a test compares them).
package client

//go:build mcp || !(bedrock || openai || anthropic || scripted)

package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/clocktest"
	"github.com/agentgate/agentgate/internal/lambdaentry"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
	"github.com/agentgate/agentgate/internal/service"
)

// TestAWorkerFunctionListsDueServersAfterItsJob: on Lambda a server that
// sets list_every_seconds is listed once a run or resume job is over and it
// fell due, within the invocation (no goroutine outlives it); the job's run
// does not wait for it, and API requests and deliver jobs list nothing.
func TestAWorkerFunctionListsDueServersAfterItsJob(t *testing.T) {
	clock := clocktest.New(time.Now())
	crm := mcptest.New(t, mcptest.Options{MetaKey: mcptool.IdempotencyKeyMeta})
	crm.AddTool(&mcp.Tool{Name: "ping", InputSchema: mcptest.ObjectSchema()}, mcptest.Text("pong"))
	f, err := mcptool.ParseFile([]byte(`{"servers": [{"name": "crm", "url": "`+crm.URL+`", "list_every_seconds": 60}]}`), mcptool.ParseOptions{})
	require.NoError(t, err)
	c, err := mcptool.Open(context.Background(), f, mcptool.Options{Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tb, err := loop.NewToolboxWithSource(c)
	require.NoError(t, err)

	var during []bool
	entry := &lambdaentry.Entry{
		API: func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{StatusCode: 200}, nil
		},
		Worker: func(context.Context, service.Job) error {
			during = append(during, slices.Contains(tb.Names(), "crm__refund"))
			return nil
		},
	}
	relistAtJobEnd(entry, c, slog.New(slog.DiscardHandler))
	crm.AddTool(&mcp.Tool{Name: "refund", InputSchema: mcptest.ObjectSchema("order")}, mcptest.Text("refunded"))
	lists := crm.Lists()
	ctx := context.Background()

	require.NoError(t, entry.Worker(ctx, service.Job{Kind: service.JobRun, RunID: "r1"}))
	assert.Equal(t, lists, crm.Lists(), "not due yet")

	clock.Advance(time.Minute)
	_, err = entry.API(ctx, events.APIGatewayProxyRequest{})
	require.NoError(t, err)
	require.NoError(t, entry.Worker(ctx, service.Job{Kind: service.JobDeliver, RunID: "r1"}))
	assert.Equal(t, lists, crm.Lists(), "an API request and a deliver job list nothing")

	near, cancel := context.WithTimeout(ctx, relistMargin-time.Second)
	defer cancel()
	require.NoError(t, entry.Worker(near, service.Job{Kind: service.JobResume, RunID: "r1"}))
	assert.Equal(t, lists, crm.Lists(), "an invocation near its deadline leaves it to a later job")

	require.NoError(t, entry.Worker(ctx, service.Job{Kind: service.JobResume, RunID: "r1"}))
	assert.Equal(t, lists+1, crm.Lists(), "listed once the job was over, before the invocation returned")
	assert.Contains(t, tb.Names(), "crm__refund", "the next runs of this container are offered the new tool")
	assert.Equal(t, []bool{false, false, false, false}, during, "no job waited for the listing")

	require.NoError(t, entry.Worker(ctx, service.Job{Kind: service.JobRun, RunID: "r2"}))
	assert.Equal(t, lists+1, crm.Lists(), "at most once per interval")
}

// TestReadmeSaysTheLambdaBoundsOfALaterListing keeps the README's MCP
// section in step with the Lambda's bounds: the start-up connect timeout
// and the time an invocation must have left to list after its job.
func TestReadmeSaysTheLambdaBoundsOfALaterListing(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	flat := strings.Join(strings.Fields(string(raw)), " ")
	for _, want := range []string{
		fmt.Sprintf("an invocation with less than %d s left leaves it to a later job", int(relistMargin.Seconds())),
		fmt.Sprintf("the default, the start-up bound (%d s on Lambda,", int(lambdaConnectTimeout.Seconds())),
		fmt.Sprintf("Each function connects to its servers in parallel at init (%d s per server)", int(lambdaConnectTimeout.Seconds())),
	} {
		assert.Contains(t, flat, want)
	}
}

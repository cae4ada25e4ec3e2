package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/providertest"
)

// providerCase is one provider wired to an httptest server with its
// recorded fixtures (paths relative to this package's testdata/).
type providerCase struct {
	name         string
	spec         string
	deps         func(srv *providertest.Server) Deps
	toolTurn     string // a turn calling read_file and write_file
	final        string // the answer after the tool results
	badRequest   providertest.Reply
	ids          []string
	wantFinal    string
	wantProvider string
}

func providerCases() []providerCase {
	awsCfg := aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
	})}
	final := `notes.txt says "buy milk". I could not replace it: the file is read-only.`
	return []providerCase{
		{
			name: "anthropic", spec: "anthropic:claude-sonnet-4-5",
			deps: func(srv *providertest.Server) Deps {
				return Deps{Config: Config{AnthropicAPIKey: "sk-ant-test"}, AnthropicBaseURL: srv.URL, HTTPClient: srv.Client()}
			},
			toolTurn:     "../anthropic/testdata/message_parallel_tool_use.json",
			final:        "../anthropic/testdata/message_after_tool_results.json",
			badRequest:   providertest.Reply{Status: http.StatusBadRequest, File: "../anthropic/testdata/error_400.json"},
			ids:          []string{"toolu_015Sh8xNQBhJJnBCLz8x9F6f", "toolu_019FKPTDNUQxrGzdjFtpP9Yp"},
			wantFinal:    final,
			wantProvider: "anthropic: HTTP 400 invalid_request_error",
		},
		{
			name: "openai", spec: "openai:gpt-4.1",
			deps: func(srv *providertest.Server) Deps {
				return Deps{Config: Config{OpenAIAPIKey: "sk-test", OpenAIBaseURL: srv.URL + "/v1"}, HTTPClient: srv.Client()}
			},
			toolTurn:     "../openai/testdata/completion_parallel_tool_calls.json",
			final:        "../openai/testdata/completion_after_tool_results.json",
			badRequest:   providertest.Reply{Status: http.StatusBadRequest, File: "../openai/testdata/error_400.json"},
			ids:          []string{"call_Vh2mF3JdQ0Q1Z7aYx9kLmN4p", "call_8sKqT2wRb5LcX0nHjE6uYg1d"},
			wantFinal:    final,
			wantProvider: "openai: HTTP 400 invalid_request_error",
		},
		{
			name: "bedrock", spec: "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
			deps: func(srv *providertest.Server) Deps {
				return Deps{AWS: awsCfg, BedrockEndpoint: srv.URL, HTTPClient: srv.Client()}
			},
			toolTurn:     "../bedrock/testdata/converse_parallel_tool_use.json",
			final:        "../bedrock/testdata/converse_after_tool_results.json",
			badRequest:   providertest.Reply{Status: http.StatusBadRequest, File: "../bedrock/testdata/error_validation.json", Header: map[string]string{"x-amzn-ErrorType": "ValidationException"}},
			ids:          []string{"tooluse_2SZ8OJ7rRxW8a3ZKpY4_xg", "tooluse_Qm7t0bL9S4uYw1eR6vXcNA"},
			wantFinal:    final,
			wantProvider: "bedrock: HTTP 400 ValidationException",
		},
	}
}

// testTools returns the read and write tools of providertest.Tools as loop
// tools: reading answers "buy milk", writing fails (read-only file).
func testTools(t *testing.T) *loop.Toolbox {
	t.Helper()
	specs := providertest.Tools()
	read := &loop.FuncTool{
		Def: loop.Definition{Name: specs[0].Name, Description: specs[0].Description, InputSchema: specs[0].InputSchema, Effect: loop.EffectRead},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			return loop.Result{Content: "buy milk"}, nil
		},
	}
	write := &loop.FuncTool{
		Def: loop.Definition{Name: specs[1].Name, Description: specs[1].Description, InputSchema: specs[1].InputSchema, Effect: loop.EffectWrite},
		CallFunc: func(context.Context, json.RawMessage) (loop.Result, error) {
			return loop.ErrorResult("permission denied: notes.txt is read-only"), nil
		},
	}
	tb, err := loop.NewToolbox(read, write)
	require.NoError(t, err)
	return tb
}

func startRequest() loop.Request {
	return loop.Request{RunID: "run-1", Transcript: loop.Transcript{System: providertest.System, Messages: []loop.Message{loop.UserText(providertest.Prompt)}}}
}

// TestRunSuspendsAndResumesInAFreshProcess runs the real loop with each real
// provider client: the provider's turn calls a read and a write, the write
// needs approval so the run suspends; the state is gzip-encoded as a
// suspension stores it, decoded into a fresh Runner with a freshly built
// Model (another process), approved and resumed. The resumed request must
// carry the provider's own tool-use ids, once in the tool calls and once in
// their results, and the run completes.
func TestRunSuspendsAndResumesInAFreshProcess(t *testing.T) {
	ctx := context.Background()
	for _, pc := range providerCases() {
		t.Run(pc.name, func(t *testing.T) {
			first := providertest.NewServer(t, providertest.Reply{File: pc.toolTurn})
			m1, err := New(ctx, pc.spec, pc.deps(first))
			require.NoError(t, err)
			out, err := (&loop.Runner{Model: m1, Tools: testTools(t)}).Run(ctx, startRequest())
			require.NoError(t, err)
			require.Equal(t, loop.OutcomeSuspended, out.Kind, "the write needs approval")
			var pending []string
			for _, c := range out.Suspended.PendingCalls {
				pending = append(pending, c.ID)
			}
			assert.Equal(t, pc.ids, pending, "pending calls keep the provider's ids")

			// Another process: nothing shared but the stored blob.
			second := providertest.NewServer(t, providertest.Reply{File: pc.final})
			m2, err := New(ctx, pc.spec, pc.deps(second))
			require.NoError(t, err)
			state := providertest.ThroughStore(t, out.Suspended)
			out, err = (&loop.Runner{Model: m2, Tools: testTools(t)}).Resume(ctx, state, loop.Decision{TurnDigest: state.TurnDigest, Action: loop.ActionApprove})
			require.NoError(t, err)
			require.Equal(t, loop.OutcomeFinished, out.Kind)
			assert.Equal(t, loop.ReasonCompleted, out.Reason, out.Detail)
			assert.Equal(t, pc.wantFinal, out.FinalText)

			body := second.LastBody()
			for _, id := range pc.ids {
				assert.Equal(t, 2, bytes.Count(body, []byte(`"`+id+`"`)), "id %s sent in the call and in its result", id)
			}
			assert.Equal(t, 1, bytes.Count(body, []byte("permission denied: notes.txt is read-only")), "the failed write's result is sent")
		})
	}
}

// TestProviderFailureEndsTheRun checks that a provider's 400 ends the run as
// provider_failed with the provider's message, not the prompt, in the detail.
func TestProviderFailureEndsTheRun(t *testing.T) {
	ctx := context.Background()
	for _, pc := range providerCases() {
		t.Run(pc.name, func(t *testing.T) {
			srv := providertest.NewServer(t, pc.badRequest)
			m, err := New(ctx, pc.spec, pc.deps(srv))
			require.NoError(t, err)
			out, err := (&loop.Runner{Model: m, Tools: testTools(t)}).Run(ctx, startRequest())
			require.NoError(t, err)
			assert.Equal(t, loop.OutcomeFinished, out.Kind)
			assert.Equal(t, loop.ReasonProviderFailed, out.Reason)
			assert.Contains(t, out.Detail, pc.wantProvider)
			assert.NotContains(t, out.Detail, providertest.Prompt)
			assert.NotContains(t, out.Detail, providertest.System)
		})
	}
}

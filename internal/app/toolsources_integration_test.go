//go:build integration

package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/mcptool"
	"github.com/agentgate/agentgate/internal/mcptool/mcptest"
)

// TestLambdaToolSourcesReadHeaderSecretsFromSecretsManager opens a
// tool-sources file as the startrun and resume functions do: the header
// value comes from a Secrets Manager secret on the emulator, and reaches
// the MCP server; the purge function opens nothing.
func TestLambdaToolSourcesReadHeaderSecretsFromSecretsManager(t *testing.T) {
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Setenv("AWS_ENDPOINT_URL", "http://localhost:4566")
	}
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"))
	require.NoError(t, err)
	sm := secretsmanager.NewFromConfig(cfg)
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String("agentgate-test/crm-" + time.Now().UTC().Format("150405.000000000")),
		SecretString: aws.String(`{"token":"tok-from-secrets-manager"}`),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: out.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})

	crm := mcptest.New(t, mcptest.Options{MetaKey: mcptool.IdempotencyKeyMeta})
	crm.AddTool(&mcp.Tool{Name: "ping", InputSchema: mcptest.ObjectSchema()}, mcptest.Text("pong"))
	file, err := json.Marshal(mcptool.File{Servers: []mcptool.Server{{Name: "crm", URL: crm.URL,
		Headers: map[string]mcptool.HeaderValue{"Authorization": {SecretARN: *out.ARN, JSONKey: "token", Prefix: "Bearer "}}}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "tool-sources.json")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	t.Setenv(EnvToolSources, path)

	logger := slog.New(slog.DiscardHandler)
	sources, err := lambdaToolSources(ctx, cfg, logger)
	require.NoError(t, err)
	c, ok := sources.(*mcptool.Catalog)
	require.True(t, ok, "tool sources %T, want *mcptool.Catalog", sources)
	t.Cleanup(func() { _ = c.Close() })
	require.Empty(t, c.Absent())
	require.Len(t, c.Tools(), 1)
	assert.Equal(t, "Bearer tok-from-secrets-manager", crm.LastHeader("Authorization"))
}

package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/anthropic"
	"github.com/agentgate/agentgate/internal/provider/bedrock"
	"github.com/agentgate/agentgate/internal/provider/openai"
	"github.com/agentgate/agentgate/internal/provider/providertest"
	"github.com/agentgate/agentgate/internal/provider/scripted"
)

const (
	secretKey  = "sk-secret-value-0123456789"
	envKey     = "sk-env-value-9876543210"
	openAIArn  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/openai-AbCdEf"
	claudeArn  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:agentgate/anthropic-GhIjKl"
	chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	msgAnswer  = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`
)

// fakeSecrets is a hand-written Secrets Manager fake.
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]string
	err    error
	calls  []string
}

func (f *fakeSecrets) SecretString(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id)
	if f.err != nil {
		return "", f.err
	}
	v, ok := f.values[id]
	if !ok {
		return "", fmt.Errorf("ResourceNotFoundException: Secrets Manager can't find the specified secret")
	}
	return v, nil
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		want    Config
		wantErr []string
	}{
		{
			name:    "model missing",
			vars:    map[string]string{},
			wantErr: []string{"missing environment variable AGENTGATE_MODEL"},
		},
		{
			name:    "malformed spec",
			vars:    map[string]string{EnvModel: "gpt-4.1"},
			wantErr: []string{"AGENTGATE_MODEL", `model spec "gpt-4.1": want <provider>:<model>`},
		},
		{
			name:    "unknown provider",
			vars:    map[string]string{EnvModel: "gemini:pro"},
			wantErr: []string{`unknown provider "gemini"`},
		},
		{
			name: "bedrock needs nothing else",
			vars: map[string]string{EnvModel: "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
			want: Config{Model: "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		},
		{
			name:    "openai without a key",
			vars:    map[string]string{EnvModel: "openai:gpt-4.1"},
			wantErr: []string{"OPENAI_API_KEY", "AGENTGATE_OPENAI_API_KEY_SECRET", "AGENTGATE_OPENAI_BASE_URL"},
		},
		{
			name: "openai with a secret",
			vars: map[string]string{EnvModel: "openai:gpt-4.1", EnvOpenAIAPIKeySecret: openAIArn},
			want: Config{Model: "openai:gpt-4.1", OpenAIAPIKeySecret: openAIArn},
		},
		{
			name: "compatible server without a key",
			vars: map[string]string{EnvModel: "openai:llama3.1:8b", EnvOpenAIBaseURL: "http://localhost:11434/v1"},
			want: Config{Model: "openai:llama3.1:8b", OpenAIBaseURL: "http://localhost:11434/v1"},
		},
		{
			name:    "bad base URL",
			vars:    map[string]string{EnvModel: "openai:m", EnvOpenAIBaseURL: "localhost:11434"},
			wantErr: []string{"AGENTGATE_OPENAI_BASE_URL", "absolute http(s) URL"},
		},
		{
			name:    "anthropic without a key",
			vars:    map[string]string{EnvModel: "anthropic:claude-sonnet-4-5"},
			wantErr: []string{"ANTHROPIC_API_KEY", "AGENTGATE_ANTHROPIC_API_KEY_SECRET"},
		},
		{
			name:    "key and secret both set",
			vars:    map[string]string{EnvModel: "anthropic:claude-sonnet-4-5", EnvAnthropicAPIKey: envKey, EnvAnthropicAPIKeySecret: claudeArn},
			wantErr: []string{"both ANTHROPIC_API_KEY and AGENTGATE_ANTHROPIC_API_KEY_SECRET are set"},
		},
		{
			name: "anthropic with an environment key",
			vars: map[string]string{EnvModel: " anthropic:claude-sonnet-4-5 ", EnvAnthropicAPIKey: envKey},
			want: Config{Model: "anthropic:claude-sonnet-4-5", AnthropicAPIKey: envKey},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(env(tt.vars))
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				assert.NotContains(t, err.Error(), envKey)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConfigNeverPrintsKeys(t *testing.T) {
	c := Config{Model: "openai:gpt-4.1", OpenAIAPIKey: envKey, AnthropicAPIKey: secretKey}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logs.String()} {
		assert.NotContains(t, out, envKey)
		assert.NotContains(t, out, secretKey)
		assert.Contains(t, out, "openai:gpt-4.1")
	}
	assert.Contains(t, logs.String(), `"openai_api_key":"set"`)
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    Spec
		wantErr string
	}{
		{spec: "scripted:testdata/one_turn.json", want: Spec{ProviderScripted, "testdata/one_turn.json"}},
		{spec: "bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0", want: Spec{ProviderBedrock, "anthropic.claude-3-5-sonnet-20240620-v1:0"}},
		{spec: "bedrock:arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0", want: Spec{ProviderBedrock, "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0"}},
		{spec: "openai:llama3.1:8b", want: Spec{ProviderOpenAI, "llama3.1:8b"}},
		{spec: "anthropic:claude-sonnet-4-5", want: Spec{ProviderAnthropic, "claude-sonnet-4-5"}},
		{spec: "", wantErr: "want <provider>:<model>"},
		{spec: "openai:", wantErr: "is empty"},
		{spec: "vertex:gemini", wantErr: `unknown provider "vertex"`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseSpec(tt.spec)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.spec, got.String())
		})
	}
}

func TestNewBuildsEachProvider(t *testing.T) {
	ctx := context.Background()
	awsCfg := aws.Config{Region: "eu-west-1"}
	tests := []struct {
		name     string
		spec     string
		config   Config
		wantType any
	}{
		{"scripted", "scripted:testdata/one_turn.json", Config{}, &scripted.Model{}},
		{"bedrock", "bedrock:eu.anthropic.claude-sonnet-4-5-20250929-v1:0", Config{}, &bedrock.Model{}},
		{"openai", "openai:gpt-4.1", Config{OpenAIAPIKey: envKey}, &openai.Model{}},
		{"anthropic", "anthropic:claude-sonnet-4-5", Config{AnthropicAPIKey: envKey}, &anthropic.Model{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(ctx, tt.spec, Deps{Config: tt.config, AWS: awsCfg})
			require.NoError(t, err)
			assert.IsType(t, tt.wantType, m)
		})
	}
}

func TestNewErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		spec    string
		deps    Deps
		wantErr []string
	}{
		{"bad spec", "gpt-4.1", Deps{}, []string{"want <provider>:<model>"}},
		{"missing script", "scripted:testdata/nope.json", Deps{}, []string{"read script"}},
		{"bedrock without region", "bedrock:m", Deps{}, []string{"no region"}},
		{"anthropic without key", "anthropic:claude-sonnet-4-5", Deps{}, []string{"ANTHROPIC_API_KEY", "AGENTGATE_ANTHROPIC_API_KEY_SECRET"}},
		{
			"secret read fails", "openai:gpt-4.1",
			Deps{Config: Config{OpenAIAPIKeySecret: openAIArn}, Secrets: &fakeSecrets{err: errors.New("AccessDeniedException: not authorized")}},
			[]string{"AGENTGATE_OPENAI_API_KEY_SECRET", openAIArn, "AccessDeniedException"},
		},
		{
			"secret JSON without api_key", "anthropic:claude-sonnet-4-5",
			Deps{Config: Config{AnthropicAPIKeySecret: claudeArn}, Secrets: &fakeSecrets{values: map[string]string{claudeArn: `{"key":"` + secretKey + `"}`}}},
			[]string{"AGENTGATE_ANTHROPIC_API_KEY_SECRET", `without a string "api_key" field`},
		},
		{
			"empty secret", "anthropic:claude-sonnet-4-5",
			Deps{Config: Config{AnthropicAPIKeySecret: claudeArn}, Secrets: &fakeSecrets{values: map[string]string{claudeArn: "  "}}},
			[]string{"the secret is empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(ctx, tt.spec, tt.deps)
			require.Error(t, err)
			assert.Nil(t, m, "a failed New returns a nil interface")
			for _, s := range tt.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), secretKey)
		})
	}
}

// TestKeysReachTheProvider checks, over httptest, which key each provider
// sends: the environment's, or the one read from Secrets Manager (raw or as
// JSON), and that the OpenAI base URL is honoured.
func TestKeysReachTheProvider(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		config     func(url string) Config
		secrets    map[string]string
		reply      string
		wantPath   string
		wantHeader string
	}{
		{
			name:   "openai key from the environment, base URL from config",
			spec:   "openai:gpt-4.1",
			config: func(u string) Config { return Config{OpenAIAPIKey: envKey, OpenAIBaseURL: u + "/v1"} },
			reply:  chatAnswer, wantPath: "/v1/chat/completions", wantHeader: "Bearer " + envKey,
		},
		{
			name:    "openai key from a raw secret",
			spec:    "openai:gpt-4.1",
			config:  func(u string) Config { return Config{OpenAIAPIKeySecret: openAIArn, OpenAIBaseURL: u + "/v1"} },
			secrets: map[string]string{openAIArn: secretKey + "\n"},
			reply:   chatAnswer, wantPath: "/v1/chat/completions", wantHeader: "Bearer " + secretKey,
		},
		{
			name:    "anthropic key from a JSON secret",
			spec:    "anthropic:claude-sonnet-4-5",
			config:  func(string) Config { return Config{AnthropicAPIKeySecret: claudeArn} },
			secrets: map[string]string{claudeArn: `{"api_key":"` + secretKey + `"}`},
			reply:   msgAnswer, wantPath: "/v1/messages", wantHeader: "Bearer " + secretKey,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Reply{Body: tt.reply})
			secrets := &fakeSecrets{values: tt.secrets}
			deps := Deps{Config: tt.config(srv.URL), Secrets: secrets, HTTPClient: srv.Client(), AnthropicBaseURL: srv.URL}
			m, err := New(context.Background(), tt.spec, deps)
			require.NoError(t, err)
			resp, err := m.Generate(context.Background(), loop.ModelRequest{Messages: []loop.Message{loop.UserText("hello")}})
			require.NoError(t, err)
			assert.Equal(t, "hi", resp.Message.Text())
			req := srv.Requests()[0]
			assert.Equal(t, tt.wantPath, req.Path)
			assert.Equal(t, tt.wantHeader, req.Header.Get("Authorization"))
			if len(tt.secrets) == 0 {
				assert.Empty(t, secrets.calls, "no secret read when the key is in the environment")
			}
		})
	}
}

func TestBedrockThroughNew(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Reply{Body: `{"output":{"message":{"content":[{"text":"hi"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`})
	awsCfg := aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
	})}
	m, err := New(context.Background(), "bedrock:amazon.nova-pro-v1:0", Deps{AWS: awsCfg, BedrockEndpoint: srv.URL, HTTPClient: srv.Client(), MaxTokens: 100})
	require.NoError(t, err)
	resp, err := m.Generate(context.Background(), loop.ModelRequest{Messages: []loop.Message{loop.UserText("hello")}})
	require.NoError(t, err)
	assert.Equal(t, "hi", resp.Message.Text())
	assert.Equal(t, "/model/amazon.nova-pro-v1%3A0/converse", srv.Requests()[0].Path)
	assert.JSONEq(t, `{"inferenceConfig":{"maxTokens":100},"messages":[{"content":[{"text":"hello"}],"role":"user"}]}`, string(srv.LastBody()))
}

func TestScriptedThroughNew(t *testing.T) {
	m, err := New(context.Background(), "scripted:testdata/one_turn.json", Deps{})
	require.NoError(t, err)
	resp, err := m.Generate(context.Background(), loop.ModelRequest{Messages: []loop.Message{loop.UserText("hi")}})
	require.NoError(t, err)
	assert.Equal(t, "Hello from the script.", resp.Message.Text())
}

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentgate/agentgate/internal/awscall"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/scripted"
)

// SecretsClient reads a secret's string value; *awscall.Secrets is one
// (awscall.ErrNoSecretString for a binary secret).
type SecretsClient interface {
	SecretString(ctx context.Context, id string) (string, error)
}

// Deps are what New needs besides the spec.
type Deps struct {
	// Config is the configuration from LoadConfig.
	Config Config
	// AWS is the AWS configuration, loaded once outside any handler; Bedrock
	// uses it, and Secrets Manager when Secrets is nil.
	AWS aws.Config
	// Secrets reads API key secrets (nil: a client built from AWS when a
	// secret is configured).
	Secrets SecretsClient
	// HTTPClient replaces the OpenAI and Anthropic SDKs' HTTP client (and the
	// Bedrock client's).
	HTTPClient *http.Client
	// MaxTokens caps an answer when a request sets no cap (0: each provider's
	// DefaultMaxTokens).
	MaxTokens int
	// MaxRetries is how many times each SDK retries a throttled or failed call
	// (0: each provider's DefaultMaxRetries; negative: none).
	MaxRetries int
	// AnthropicBaseURL replaces https://api.anthropic.com/ (tests, proxies).
	AnthropicBaseURL string
	// BedrockEndpoint replaces Bedrock's regional endpoint (tests, VPC endpoints).
	BedrockEndpoint string
}

// New builds the model spec names. It reads an API key secret when one is
// configured, and makes no model call. Errors name the configuration at
// fault and never carry a key.
func New(ctx context.Context, spec string, deps Deps) (loop.Model, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	if err := deps.Config.Check(spec); err != nil {
		return nil, err
	}
	switch s.Provider {
	case ProviderScripted:
		return model(scripted.Load(s.Model))
	case ProviderBedrock:
		return newBedrock(s.Model, deps)
	case ProviderOpenAI:
		key, err := apiKey(ctx, deps, deps.Config.OpenAIAPIKey, deps.Config.OpenAIAPIKeySecret, EnvOpenAIAPIKeySecret)
		if err != nil {
			return nil, err
		}
		return newOpenAI(s.Model, key, deps)
	case ProviderAnthropic:
		key, err := apiKey(ctx, deps, deps.Config.AnthropicAPIKey, deps.Config.AnthropicAPIKeySecret, EnvAnthropicAPIKeySecret)
		if err != nil {
			return nil, err
		}
		return newAnthropic(s.Model, key, deps)
	default:
		return nil, fmt.Errorf("model spec %q: unknown provider", spec)
	}
}

// model returns m as a loop.Model, or a nil interface (not a typed nil
// pointer) when err is set.
func model[T loop.Model](m T, err error) (loop.Model, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// apiKey returns the key from the environment, or reads it from the secret.
func apiKey(ctx context.Context, deps Deps, envKey, secretID, secretVar string) (string, error) {
	if envKey != "" || secretID == "" {
		return envKey, nil
	}
	client := deps.Secrets
	if client == nil {
		secrets, err := awscall.NewSecrets(deps.AWS)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", secretVar, secretID, err)
		}
		client = secrets
	}
	value, err := client.SecretString(ctx, secretID)
	if errors.Is(err, awscall.ErrNoSecretString) {
		return "", fmt.Errorf("%s=%q: the secret has no string value (binary secrets are not supported)", secretVar, secretID)
	}
	if err != nil {
		return "", fmt.Errorf("%s=%q: read secret: %w", secretVar, secretID, err)
	}
	key, err := keyFromSecret(value)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", secretVar, secretID, err)
	}
	return key, nil
}

// keyFromSecret accepts the key itself or a JSON object with "api_key".
// Errors never quote the secret.
func keyFromSecret(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return "", errors.New("the secret looks like JSON but does not parse")
		}
		key, _ := obj["api_key"].(string)
		if strings.TrimSpace(key) == "" {
			return "", errors.New(`the secret is a JSON object without a string "api_key" field`)
		}
		return strings.TrimSpace(key), nil
	}
	if s == "" {
		return "", errors.New("the secret is empty")
	}
	return s, nil
}

// FromEnv builds the model AGENTGATE_MODEL names, with the rest of the
// configuration read from the environment (LoadConfig); the Lambda mains
// call it once at start-up.
func FromEnv(ctx context.Context, awsCfg aws.Config) (loop.Model, error) {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg.Model, Deps{Config: cfg, AWS: awsCfg})
}

package provider

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

// Environment variable names read by LoadConfig.
const (
	EnvModel                 = "AGENTGATE_MODEL"
	EnvOpenAIBaseURL         = "AGENTGATE_OPENAI_BASE_URL"
	EnvOpenAIAPIKeySecret    = "AGENTGATE_OPENAI_API_KEY_SECRET"
	EnvAnthropicAPIKeySecret = "AGENTGATE_ANTHROPIC_API_KEY_SECRET"
	EnvOpenAIAPIKey          = "OPENAI_API_KEY"
	EnvAnthropicAPIKey       = "ANTHROPIC_API_KEY"
)

// Config is the model configuration read from the environment. Format it or
// log it freely: String, GoString and LogValue leave the keys out.
type Config struct {
	// Model is the default model spec (AGENTGATE_MODEL), for example
	// "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0".
	Model string
	// OpenAIBaseURL is the base URL of an OpenAI-compatible server
	// (AGENTGATE_OPENAI_BASE_URL), such as "http://localhost:11434/v1"; empty
	// means OpenAI itself.
	OpenAIBaseURL string
	// OpenAIAPIKeySecret is the Secrets Manager id or ARN of the OpenAI key
	// (AGENTGATE_OPENAI_API_KEY_SECRET).
	OpenAIAPIKeySecret string
	// AnthropicAPIKeySecret is the Secrets Manager id or ARN of the Anthropic
	// key (AGENTGATE_ANTHROPIC_API_KEY_SECRET).
	AnthropicAPIKeySecret string
	// OpenAIAPIKey is the OpenAI key from OPENAI_API_KEY.
	OpenAIAPIKey string
	// AnthropicAPIKey is the Anthropic key from ANTHROPIC_API_KEY.
	AnthropicAPIKey string
}

// LoadConfig reads the configuration with getenv (os.Getenv in a main) and
// validates it: AGENTGATE_MODEL must hold a well-formed spec whose provider
// has what it needs. Errors name the variable at fault and never hold a key.
func LoadConfig(getenv func(string) string) (Config, error) {
	model := strings.TrimSpace(getenv(EnvModel))
	if model == "" {
		return Config{}, fmt.Errorf("missing environment variable %s (a model spec such as bedrock:<model-id>)", EnvModel)
	}
	c, err := LoadSettings(getenv)
	if err != nil {
		return Config{}, err
	}
	c.Model = model
	if err := c.Check(c.Model); err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvModel, err)
	}
	return c, nil
}

// LoadSettings reads and validates, with getenv, the configuration but
// its model: the providers' base URL, keys and key secrets. A caller whose
// model comes from elsewhere than AGENTGATE_MODEL (serve --model) sets
// Model itself and vets it with Check, so that its errors name where the
// spec came from. Errors name the variable at fault and never hold a key.
func LoadSettings(getenv func(string) string) (Config, error) {
	c := Config{
		OpenAIBaseURL:         strings.TrimSpace(getenv(EnvOpenAIBaseURL)),
		OpenAIAPIKeySecret:    strings.TrimSpace(getenv(EnvOpenAIAPIKeySecret)),
		AnthropicAPIKeySecret: strings.TrimSpace(getenv(EnvAnthropicAPIKeySecret)),
		OpenAIAPIKey:          strings.TrimSpace(getenv(EnvOpenAIAPIKey)),
		AnthropicAPIKey:       strings.TrimSpace(getenv(EnvAnthropicAPIKey)),
	}
	if c.OpenAIBaseURL != "" {
		u, err := url.Parse(c.OpenAIBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("%s=%q: want an absolute http(s) URL", EnvOpenAIBaseURL, c.OpenAIBaseURL)
		}
	}
	if c.OpenAIAPIKey != "" && c.OpenAIAPIKeySecret != "" {
		return Config{}, fmt.Errorf("both %s and %s are set: keep one", EnvOpenAIAPIKey, EnvOpenAIAPIKeySecret)
	}
	if c.AnthropicAPIKey != "" && c.AnthropicAPIKeySecret != "" {
		return Config{}, fmt.Errorf("both %s and %s are set: keep one", EnvAnthropicAPIKey, EnvAnthropicAPIKeySecret)
	}
	return c, nil
}

// Check reports whether spec is well formed and the configuration has what
// its provider needs (an API key or its secret); the error names the missing
// variables. Use it to vet a model a run asks for.
func (c Config) Check(spec string) error {
	s, err := ParseSpec(spec)
	if err != nil {
		return err
	}
	switch s.Provider {
	case ProviderOpenAI:
		if c.OpenAIAPIKey == "" && c.OpenAIAPIKeySecret == "" && c.OpenAIBaseURL == "" {
			return fmt.Errorf("model %q needs %s or %s (or %s for a compatible server without a key)", spec, EnvOpenAIAPIKey, EnvOpenAIAPIKeySecret, EnvOpenAIBaseURL)
		}
	case ProviderAnthropic:
		if c.AnthropicAPIKey == "" && c.AnthropicAPIKeySecret == "" {
			return fmt.Errorf("model %q needs %s or %s", spec, EnvAnthropicAPIKey, EnvAnthropicAPIKeySecret)
		}
	}
	return nil
}

// String describes the configuration without its keys.
func (c Config) String() string {
	return fmt.Sprintf("provider.Config{Model:%q OpenAIBaseURL:%q OpenAIAPIKeySecret:%q AnthropicAPIKeySecret:%q OpenAIAPIKey:%s AnthropicAPIKey:%s}",
		c.Model, c.OpenAIBaseURL, c.OpenAIAPIKeySecret, c.AnthropicAPIKeySecret, redacted(c.OpenAIAPIKey), redacted(c.AnthropicAPIKey))
}

// GoString is String, so %#v does not print the keys either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without its keys.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("model", c.Model),
		slog.String("openai_base_url", c.OpenAIBaseURL),
		slog.String("openai_api_key_secret", c.OpenAIAPIKeySecret),
		slog.String("anthropic_api_key_secret", c.AnthropicAPIKeySecret),
		slog.String("openai_api_key", redacted(c.OpenAIAPIKey)),
		slog.String("anthropic_api_key", redacted(c.AnthropicAPIKey)),
	)
}

func redacted(key string) string {
	if key == "" {
		return "unset"
	}
	return "set"
}

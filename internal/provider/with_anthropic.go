//go:build anthropic || !(bedrock || openai || scripted)

package provider

import (
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/anthropic"
)

func newAnthropic(modelID, key string, deps Deps) (loop.Model, error) {
	return model(anthropic.New(anthropic.Options{
		Model: modelID, APIKey: key, BaseURL: deps.AnthropicBaseURL, HTTPClient: deps.HTTPClient,
		MaxTokens: deps.MaxTokens, MaxRetries: deps.MaxRetries,
	}))
}

//go:build openai || !(bedrock || anthropic || scripted)

package provider

import (
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/openai"
)

func newOpenAI(modelID, key string, deps Deps) (loop.Model, error) {
	return model(openai.New(openai.Options{
		Model: modelID, APIKey: key, BaseURL: deps.Config.OpenAIBaseURL, HTTPClient: deps.HTTPClient,
		MaxTokens: deps.MaxTokens, MaxRetries: deps.MaxRetries,
		// Compatible servers (vLLM, Ollama) all know max_tokens; not all
		// know max_completion_tokens.
		LegacyMaxTokens: deps.Config.OpenAIBaseURL != "",
	}))
}

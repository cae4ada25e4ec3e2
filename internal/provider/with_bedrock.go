//go:build bedrock || !(openai || anthropic || scripted)

package provider

import (
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/provider/bedrock"
)

func newBedrock(modelID string, deps Deps) (loop.Model, error) {
	return model(bedrock.New(deps.AWS, bedrock.Options{
		ModelID: modelID, MaxTokens: deps.MaxTokens, MaxRetries: deps.MaxRetries,
		BaseEndpoint: deps.BedrockEndpoint, HTTPClient: deps.HTTPClient,
	}))
}

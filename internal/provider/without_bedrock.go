//go:build !bedrock && (openai || anthropic || scripted)

package provider

import "github.com/agentgate/agentgate/internal/loop"

func newBedrock(modelID string, deps Deps) (loop.Model, error) { return errLeftOut("bedrock") }

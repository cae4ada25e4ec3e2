//go:build !openai && (bedrock || anthropic || scripted)

package provider

import "github.com/agentgate/agentgate/internal/loop"

func newOpenAI(modelID, key string, deps Deps) (loop.Model, error) { return errLeftOut("openai") }

//go:build !anthropic && (bedrock || openai || scripted)

package provider

import "github.com/agentgate/agentgate/internal/loop"

func newAnthropic(modelID, key string, deps Deps) (loop.Model, error) { return errLeftOut("anthropic") }

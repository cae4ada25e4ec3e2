//go:build agentgate_no_anthropic

package provider

import "github.com/agentgate/agentgate/internal/loop"

func newAnthropic(modelID, key string, deps Deps) (loop.Model, error) { return errLeftOut("anthropic") }

package provider

import (
	"fmt"
	"strings"
)

// The provider names of a model spec.
const (
	ProviderScripted  = "scripted"
	ProviderBedrock   = "bedrock"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Spec is a parsed model spec "<provider>:<model>".
type Spec struct {
	// Provider is one of the Provider* names.
	Provider string
	// Model is the provider's model id, or the script file for scripted.
	// It may itself hold colons (Bedrock ids such as "...-v1:0").
	Model string
}

// String returns the spec in its "<provider>:<model>" form.
func (s Spec) String() string { return s.Provider + ":" + s.Model }

// ParseSpec splits a model spec at its first colon and checks the provider
// is known and the model is not empty.
func ParseSpec(spec string) (Spec, error) {
	p, m, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok {
		return Spec{}, fmt.Errorf("model spec %q: want <provider>:<model> with provider scripted, bedrock, openai or anthropic", spec)
	}
	switch p {
	case ProviderScripted, ProviderBedrock, ProviderOpenAI, ProviderAnthropic:
	default:
		return Spec{}, fmt.Errorf("model spec %q: unknown provider %q (want scripted, bedrock, openai or anthropic)", spec, p)
	}
	if strings.TrimSpace(m) == "" {
		return Spec{}, fmt.Errorf("model spec %q: the model after %q is empty", spec, p+":")
	}
	return Spec{Provider: p, Model: m}, nil
}

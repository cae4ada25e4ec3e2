//go:build (!openai && (bedrock || anthropic || scripted)) || (!anthropic && (bedrock || openai || scripted)) || (!bedrock && (openai || anthropic || scripted))

package provider

import (
	"fmt"

	"github.com/agentgate/agentgate/internal/loop"
)

// Providers are opt-in per build: a build without any of the tags bedrock,
// openai, anthropic and scripted links every provider (the CLI, the tests);
// a build with one or more of them links only those SDKs (the scripted
// provider, a few kilobytes, is always there). `make build` builds the
// Lambda workers with the provider of the deployed model only
// (LAMBDA_PROVIDER, default bedrock).

// errLeftOut answers a spec whose provider this binary was built without.
func errLeftOut(provider string) (loop.Model, error) {
	return nil, fmt.Errorf("this build leaves out the %s provider (build with -tags %s, or with no provider tag for all)", provider, provider)
}

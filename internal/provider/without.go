package provider

import (
	"fmt"

	"github.com/agentgate/agentgate/internal/loop"
)

// errLeftOut answers a spec whose provider this binary was built without
// (build tags agentgate_no_bedrock, agentgate_no_openai, agentgate_no_anthropic
// keep a provider's SDK out of the Lambda binaries; see `make build`).
func errLeftOut(provider string) (loop.Model, error) {
	return nil, fmt.Errorf("this build leaves out the %s provider (built with -tags agentgate_no_%s)", provider, provider)
}

package agentgate

import _ "embed"

// OpenAPI is openapi.yaml as shipped with this module: the full contract,
// including the parts marked "x-agentgate-status: planned".
//
//go:embed openapi.yaml
var OpenAPI []byte

package app_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// lambdaTags are the build tags of `make build` (mk/build.mk) for the
// default deployment (the Bedrock provider only).
const lambdaTags = "lambda.norpc,bedrock"

// lambdaDeps lists the packages the function's binary links when built
// with tags.
func lambdaDeps(t *testing.T, fn, tags string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, "../../functions/"+fn)
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", fn, err)
	}
	return strings.Fields(string(out))
}

// TestLambdasLinkOnlyWhatTheyUse guards the binaries' size and cold start
// (issue #15): no function links the template engine (it keeps every
// exported method of every type), the AWS default credential chain, the
// SDK's Lambda, SES (v1 and v2) and Secrets Manager clients (dispatch, mail
// and secrets sign their one call each: internal/awscall), JSON v2's reflective
// decoder (the API decodes strictly over JSON v2's tokenizer alone) or,
// unless built with the tags mcp and cel, the MCP SDK and cel-go; purge
// links no model, tools, HTTP API, pages or embedded store.
func TestLambdasLinkOnlyWhatTheyUse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/agentgate/agentgate/internal/"
	const mcpSDK, celGo = "github.com/modelcontextprotocol/go-sdk/mcp", "github.com/google/cel-go/cel"
	never := []string{"text/template", "html/template", "github.com/aws/aws-sdk-go-v2/config", mcpSDK, celGo,
		"github.com/aws/aws-sdk-go-v2/service/sso", "github.com/aws/aws-sdk-go-v2/service/sts", "github.com/aws/aws-sdk-go-v2/service/lambda",
		"github.com/aws/aws-sdk-go-v2/service/sesv2", "github.com/aws/aws-sdk-go-v2/service/ses", "github.com/aws/aws-sdk-go-v2/service/secretsmanager",
		"github.com/go-json-experiment/json",
		// go.mod pins DynamoDB, DynamoDB Streams (attributevalue links its
		// types) and Bedrock Runtime to their last releases before
		// schema-based serialization: the schemas package of each holds
		// every shape of the service and builds them all at package init
		// (0.27, 0.04 and 0.44 MB of a worker, 1 MB of init allocations;
		// issue #15). An upgrade past the pin links them again and fails here.
		"github.com/aws/aws-sdk-go-v2/service/dynamodb/schemas", "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/schemas",
		"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"}
	purgeNever := []string{mod + "provider", mod + "mcptool", mod + "docstore", mod + "httpapi", mod + "approvalpage",
		mod + "app", mod + "runs/embedded", "github.com/aws/aws-sdk-go-v2/service/bedrockruntime"}
	for _, fn := range []string{"startrun", "resume", "purge"} {
		t.Run(fn, func(t *testing.T) {
			deps := lambdaDeps(t, fn, lambdaTags)
			if !slices.Contains(deps, mod+"service") {
				t.Fatalf("%s does not link internal/service: the listing is wrong", fn)
			}
			bad := never
			if fn == "purge" {
				bad = append(slices.Clone(never), purgeNever...)
			}
			for _, p := range bad {
				if slices.Contains(deps, p) {
					t.Errorf("%s links %s", fn, p)
				}
			}
		})
	}
	if deps := lambdaDeps(t, "resume", lambdaTags+",mcp,cel"); !slices.Contains(deps, mcpSDK) || !slices.Contains(deps, celGo) {
		t.Errorf("resume built with the tags mcp and cel does not link %s and %s", mcpSDK, celGo)
	}
}

# Lambda assets (CONTRACTS.md, "Lambda assets"): one `bootstrap` per function,
# zipped at the zip root. arm64 is what the stack ships; amd64 runs the same
# code under the Lambda Runtime Interface Emulator in tests.
LAMBDA_FUNCTIONS ?= startrun resume purge
LAMBDA_ARCHES ?= arm64 amd64
LAMBDA_DIST ?= dist/lambda
# Model providers are opt-in per build (internal/provider/without.go): the
# workers link the SDK of the deployed model's provider only. LAMBDA_PROVIDER
# is that provider (bedrock, openai, anthropic or scripted; the stack's
# default model is bedrock:); several, space-separated, are allowed. The list
# goes into $(LAMBDA_DIST)/<arch>/providers, and the CDK app refuses a model
# whose provider the zips leave out (infra/config.go).
LAMBDA_PROVIDER ?= bedrock
# Heavy optional features are opt-in the same way, LAMBDA_FEATURES (space
# separated, default none): mcp links the MCP SDK (MCP tool sources, CDK
# context toolSources; internal/app/toolsources*.go), cel links cel-go
# (policy rules with `when` conditions; internal/policy/cel.go). The list
# goes into $(LAMBDA_DIST)/<arch>/features, and the CDK app refuses
# toolSources for zips without mcp.
LAMBDA_FEATURES ?=
comma := ,
LAMBDA_TAGS ?= lambda.norpc,$(subst $() ,$(comma),$(strip $(LAMBDA_PROVIDER) $(LAMBDA_FEATURES)))

.PHONY: build

# The fixed mtime keeps a zip byte-identical for identical code (-trimpath
# builds are reproducible), so CDK's asset hash, and with it the deployed
# function, changes only when the code does.

## build: dist/lambda/{arm64,amd64}/{startrun,resume,purge}.zip, each holding one bootstrap
build:
	@set -euo pipefail; \
	for arch in $(LAMBDA_ARCHES); do \
	  echo "build $(LAMBDA_DIST)/$$arch: $(LAMBDA_FUNCTIONS)"; \
	  tmp="$(LAMBDA_DIST)/$$arch/.bin"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -tags $(LAMBDA_TAGS) -trimpath -ldflags='-s -w' \
	    -o "$$tmp/" $(addprefix ./functions/,$(LAMBDA_FUNCTIONS)); \
	  for fn in $(LAMBDA_FUNCTIONS); do \
	    dir="$(LAMBDA_DIST)/$$arch/$$fn"; rm -rf "$$dir" "$$dir.zip"; mkdir -p "$$dir"; \
	    mv "$$tmp/$$fn" "$$dir/bootstrap"; \
	    touch -t 198001010000 "$$dir/bootstrap"; \
	    (cd "$$dir" && zip -q -X "../$$fn.zip" bootstrap); \
	  done; \
	  rmdir "$$tmp"; \
	  printf '%s\n' $(LAMBDA_PROVIDER) > "$(LAMBDA_DIST)/$$arch/providers"; \
	  printf '%s\n' $(LAMBDA_FEATURES) > "$(LAMBDA_DIST)/$$arch/features"; \
	done

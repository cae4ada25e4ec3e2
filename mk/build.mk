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
# MCP tool sources are opt-in the same way (internal/app/toolsources*.go):
# LAMBDA_MCP=1 links the MCP SDK into the workers, which a deployment with a
# tool-sources file (CDK context toolSources) needs. The features file next
# to the zips says whether they have it, and the CDK app refuses
# toolSources for zips without it.
LAMBDA_MCP ?=
comma := ,
LAMBDA_TAGS ?= lambda.norpc,$(subst $() ,$(comma),$(strip $(LAMBDA_PROVIDER)))$(if $(LAMBDA_MCP),$(comma)mcp)

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
	  printf '%s\n' $(if $(LAMBDA_MCP),mcp) > "$(LAMBDA_DIST)/$$arch/features"; \
	done

# agentgate — see README.md. Component makefiles under mk/ add their own targets.
SHELL := /usr/bin/env bash
GO ?= go
# No AWS settings here: the scripts of the emulator targets (scripts/test.sh,
# scripts/infra-local.sh, scripts/ci-infra.sh) default to moto on :4566 with
# test credentials, and every other recipe (deploy) sees your environment as is.

.PHONY: demo test test-unit test-integration lint bench fmt fuzz

## demo: the whole story on the embedded default (no AWS, no emulator)
demo:
	$(GO) run ./cmd/agentgate demo

## test: every test tier this machine can run (unit, then integration on a moto server it starts)
test:
	scripts/test.sh

## test-unit: unit tests only (no services), under the race detector
test-unit:
	$(GO) test -race ./...

## test-integration: integration suite against AWS_ENDPOINT_URL (default :4566; moto started if nothing listens), under the race detector
test-integration:
	scripts/test.sh integration

## fuzz: every Fuzz* target for FUZZTIME each (default 60s; CI: 10s), printing the executions of each (scripts/fuzz.sh)
FUZZTIME ?= 60s
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## lint: go vet, golangci-lint (.golangci.yml; pinned, installed into bin/ on first use), Redocly's lint of openapi.yaml, a gofmt check
lint:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	scripts/lint.sh
	scripts/contract.sh lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^infra/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: benchmarks with comparable figures (ns/op, B/op, custom metrics), then the local server's cycles/s at 1 and 16 clients
bench:
	scripts/bench.sh

-include mk/*.mk

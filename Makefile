# agentgate — see README.md. Component makefiles under mk/ add their own targets.
SHELL := /usr/bin/env bash
GO ?= go
export AWS_ENDPOINT_URL ?= http://localhost:4566
export AWS_REGION ?= us-east-1
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCESS_KEY_ID ?= test
export AWS_SECRET_ACCESS_KEY ?= test

.PHONY: demo test test-unit test-integration lint bench fmt

## demo: the whole story on the embedded default (no AWS, no emulator)
demo:
	$(GO) run ./cmd/agentgate demo

## test: every test tier this machine can run (unit, then integration on a moto server it starts)
test:
	scripts/test.sh

## test-unit: unit tests only (no services)
test-unit:
	$(GO) test ./...

## test-integration: integration suite against $(AWS_ENDPOINT_URL) (moto started if nothing listens)
test-integration:
	scripts/test.sh integration

## lint: go vet, a gofmt check, and Redocly's lint of openapi.yaml (scripts/contract.sh)
lint:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	scripts/contract.sh lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^infra/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: benchmarks with comparable figures (ns/op, B/op, custom metrics)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

-include mk/*.mk

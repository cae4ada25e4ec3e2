#!/usr/bin/env bash
# golangci-lint (config: .golangci.yml) at the pinned version, installed on
# demand into bin/ with `go install` so a fresh machine needs only Go.
# `make lint` runs it after go vet; extra arguments go to `golangci-lint run`.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v2.15.0
bin="$PWD/bin/golangci-lint"
if ! { [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -q "version ${version#v} "; }; then
  echo "== installing golangci-lint $version into bin/"
  GOFLAGS= GOBIN="$PWD/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
"$bin" run "$@" ./...

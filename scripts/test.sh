#!/usr/bin/env bash
# The project's test command (`make test`, called by .ci/run):
#   1. unit tests (no services);
#   2. the integration suite (//go:build integration) against AWS_ENDPOINT_URL,
#      starting a moto server on its port when nothing answers there, and creating
#      the table and bucket with `agentgate init`.
# `scripts/test.sh integration` runs step 2 only.
set -euo pipefail
cd "$(dirname "$0")/.."
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

if [ "${1:-}" != "integration" ]; then
  echo "== unit tests"
  go test -count=1 ./...
fi

# The servers nobody here wrote that the integration tier runs (tools/npm:
# the MCP reference server and an OpenAI-compatible mock model), installed
# from the lock file. Without node the tests that need them skip, and fail
# under CI=true.
if command -v npm >/dev/null 2>&1; then
  echo "== npm ci (tools/npm)"
  npm ci --prefix tools/npm --no-audit --no-fund --loglevel=error
else
  echo "== npm not found: the MCP and mock-model integration tests will skip (fail under CI=true)"
fi

echo "== integration tests against $AWS_ENDPOINT_URL"
# Stop the emulator afterwards only if this script started it.
if curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null || curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/_localstack/health" 2>/dev/null; then
  echo "using the emulator already on $AWS_ENDPOINT_URL"
else
  scripts/moto.sh start
  trap 'scripts/moto.sh stop' EXIT
fi
go run ./cmd/agentgate init --endpoint "$AWS_ENDPOINT_URL"
# The suites that read sent mail back from moto's /moto-api/data.json go first:
# moto 5.2 answers that endpoint 500 (slowly) once it holds objects of deleted
# buckets, which later suites leave behind.
mail_pkgs="./cmd/agentgate ./internal/approval"
go test -count=1 -p 1 -tags integration $mail_pkgs
go test -count=1 -p 1 -tags integration $(go list ./... | grep -v -e '/cmd/agentgate$' -e '/internal/approval$')

#!/usr/bin/env bash
# The project's test command (`make test`, called by .ci/run):
#   1. unit tests (no services), under the race detector;
#   2. the integration suite (//go:build integration; only the packages that
#      have such tests) against AWS_ENDPOINT_URL, under the race detector,
#      starting a moto server on its port when nothing answers there, and
#      creating the table and bucket with `agentgate init`.
# `scripts/test.sh integration` runs step 2 only.
set -euo pipefail
cd "$(dirname "$0")/.."
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

# Each phase's wall-clock time, printed as it ends and again at the end.
phases=()
t_all=$(date +%s.%N)
phase() { # phase NAME COMMAND...: run COMMAND, record its time under NAME
  local name="$1" t0 s; shift
  t0=$(date +%s.%N)
  "$@"
  s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  phases+=("$name ${s}s"); echo "== $name: ${s}s"
}
summary() { [ ${#phases[@]} -eq 0 ] || echo "test phases: ${phases[*]}; total $(awk -v a="$t_all" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"; }

if [ "${1:-}" != "integration" ]; then
  echo "== unit tests"
  phase unit go test -race -count=1 ./...
fi

# The servers nobody here wrote that the integration tier runs (tools/npm:
# the MCP reference server and an OpenAI-compatible mock model), installed
# from the lock file. Without node the tests that need them skip, and fail
# under CI=true.
if command -v npm >/dev/null 2>&1; then
  echo "== npm ci (tools/npm)"
  phase "npm ci" npm ci --prefix tools/npm --no-audit --no-fund --loglevel=error
else
  echo "== npm not found: the MCP and mock-model integration tests will skip (fail under CI=true)"
fi

echo "== integration tests against $AWS_ENDPOINT_URL"
# Stop the emulator afterwards only if this script started it.
if curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null || curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/_localstack/health" 2>/dev/null; then
  echo "using the emulator already on $AWS_ENDPOINT_URL"
else
  phase "moto start" scripts/moto.sh start
  trap 'scripts/moto.sh stop; summary' EXIT
fi
[ -n "$(trap -p EXIT)" ] || trap summary EXIT
phase init go run ./cmd/agentgate init --endpoint "$AWS_ENDPOINT_URL"
# The suites that read sent mail back from moto's /moto-api/data.json go first:
# moto 5.2 answers that endpoint 500 (slowly) once it holds objects of deleted
# buckets, which later suites leave behind.
mail_pkgs="./cmd/agentgate ./internal/approval"
# Only the packages the integration tag changes: those whose test files differ
# with -tags integration. Every other package's tests are the unit tier's,
# which step 1 ran with the same environment; running them again here cost
# 117 s of serial linking and re-runs per `make test` on a loaded 2-core
# machine, without -race (issue #15).
test_files='{{.ImportPath}} {{.TestGoFiles}} {{.XTestGoFiles}}'
integration_pkgs=$(comm -13 <(go list -f "$test_files" ./... | sort) <(go list -tags integration -f "$test_files" ./... | sort) |
  awk '{ print $1 }' | grep -v -e '/cmd/agentgate$' -e '/internal/approval$' || true)
# An empty list would make go test test the root package alone and pass.
[ -n "$integration_pkgs" ] || { echo "test.sh: found no integration packages besides the mail suites" >&2; exit 1; }
echo "== integration packages: $mail_pkgs $(echo $integration_pkgs | sed 's|github.com/agentgate/agentgate/|./|g')"
phase "integration (mail suites)" go test -race -count=1 -p 1 -tags integration $mail_pkgs
phase "integration (the rest)" go test -race -count=1 -p 1 -tags integration $integration_pkgs

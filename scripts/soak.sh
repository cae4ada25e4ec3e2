#!/usr/bin/env bash
# `make soak`: the crash soak (internal/soak, command tools/soak). It builds
# bin/agentgate and bin/soak, serves on the embedded store with a 1 s sweep,
# drives SOAK_CLIENTS concurrent clients through the REST API for
# SOAK_SECONDS, kills the server with SIGKILL SOAK_KILLS times at random
# moments (after a 202 on POST /runs or a decision, during and right after
# an approved write, during start-up, at any instant) and restarts it on the
# same folder, waits for the runs to settle (lease + sweeps), then checks:
# nothing stuck, nothing lost, no write executed twice or unapproved, every
# interrupted_write justified by a kill, no 5xx. Exit 1 when one fails.
#
#   SOAK_SECONDS (120)  SOAK_KILLS (one per 5 s)  SOAK_CLIENTS (8)
#   SOAK_SEED (random; printed)  SOAK_DIR (a new temporary folder)
#   SOAK_STORE=aws: against DynamoDB+S3 on AWS_ENDPOINT_URL (moto: started
#     when nothing answers, stopped afterwards; a fresh table and bucket)
#   SOAK_ARGS: more flags of tools/soak (e.g. --serve-args "--segment-budget 50ms")
#   SOAK_RESULTS (tools/soak/results.md; empty: none): the markdown table the
#     soak appends its figures to, one line per soak naming the commit
#     (-dirty when the tree has changes); commit it with the code it measured
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/agentgate ./cmd/agentgate
go build -o bin/soak ./tools/soak
args=(--bin bin/agentgate --duration "${SOAK_SECONDS:-120}s" --clients "${SOAK_CLIENTS:-8}")
[ -z "${SOAK_KILLS:-}" ] || args+=(--kills "$SOAK_KILLS")
[ -z "${SOAK_SEED:-}" ] || args+=(--seed "$SOAK_SEED")
[ -z "${SOAK_DIR:-}" ] || args+=(--dir "$SOAK_DIR")
results="${SOAK_RESULTS-tools/soak/results.md}"
if [ -n "$results" ]; then
  commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit-dirty"
  args+=(--results "$results" --commit "$commit")
fi
if [ "${SOAK_STORE:-embedded}" = aws ]; then
  export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
  export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
  if ! curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null; then
    scripts/moto.sh start
    trap 'scripts/moto.sh stop' EXIT
  fi
  suffix="soak-$(date +%s)-$$"
  export AGENTGATE_TABLE="agentgate-$suffix" AGENTGATE_BUCKET="agentgate-$suffix"
  bin/agentgate init --endpoint "$AWS_ENDPOINT_URL" --table "$AGENTGATE_TABLE" --bucket "$AGENTGATE_BUCKET" >/dev/null
  args+=(--store aws)
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086 # SOAK_ARGS is split on purpose
bin/soak "${args[@]}" ${SOAK_ARGS:-}

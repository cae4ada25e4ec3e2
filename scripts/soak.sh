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
#   SOAK_SECONDS (120; 60 with SOAK_STORE=aws)  SOAK_KILLS (one per 5 s)  SOAK_CLIENTS (8)
#   SOAK_SEED (random; printed)  SOAK_DIR (a new temporary folder)
#   SOAK_STORE=aws: against DynamoDB+S3 on AWS_ENDPOINT_URL (moto: started
#     when nothing answers, stopped afterwards; a fresh table and bucket;
#     the emulator's peak memory is printed at the end)
#   SOAK_ARGS: more flags of tools/soak (e.g. --serve-args "--segment-budget 50ms")
#   SOAK_RESULTS (tools/soak/results.md; empty: none): the markdown table the
#     soak appends its figures to, one line per soak naming the commit
#     (-dirty when the tree has changes); commit it with the code it measured
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/agentgate ./cmd/agentgate
go build -o bin/soak ./tools/soak
store="${SOAK_STORE:-embedded}"
# On moto the soak runs 60 s by default: moto 5.2 keeps every model object
# it ever made, the copy of the whole table each TransactWriteItems takes
# included, so its memory grows with transactions x table size (120 s made
# it 5 GB on 2026-12-03, 60 s about half the runs).
seconds="${SOAK_SECONDS:-$([ "$store" = aws ] && echo 60 || echo 120)}"
args=(--bin bin/agentgate --duration "${seconds}s" --clients "${SOAK_CLIENTS:-8}")
[ -z "${SOAK_KILLS:-}" ] || args+=(--kills "$SOAK_KILLS")
[ -z "${SOAK_SEED:-}" ] || args+=(--seed "$SOAK_SEED")
[ -z "${SOAK_DIR:-}" ] || args+=(--dir "$SOAK_DIR")
results="${SOAK_RESULTS-tools/soak/results.md}"
if [ -n "$results" ]; then
  commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit-dirty"
  args+=(--results "$results" --commit "$commit")
fi
if [ "$store" = aws ]; then
  export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
  export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
  started=""
  if ! curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null; then
    scripts/moto.sh start
    started=1
  fi
  # The emulator's peak memory, sampled every 2 s, printed at the end.
  port="${AWS_ENDPOINT_URL##*:}"; port="${port%%/*}"
  moto_pid="$(pgrep -f "moto_server .*-p $port\$" | head -1 || true)"
  peak_file="$(mktemp)"
  watcher=""
  if [ -n "$moto_pid" ]; then
    (peak=0; while rss=$(ps -o rss= -p "$moto_pid" 2>/dev/null); do
      rss=${rss// /}; [ "$rss" -le "$peak" ] || { peak=$rss; echo "$peak" >"$peak_file"; }; sleep 2
    done) &
    watcher=$!
  fi
  finish() {
    if [ -n "$watcher" ]; then
      kill "$watcher" 2>/dev/null || true
      echo "moto (pid $moto_pid) peak RSS: $(( $(cat "$peak_file" 2>/dev/null || echo 0) / 1024 )) MB"
    fi
    rm -f "$peak_file"
    [ -z "$started" ] || scripts/moto.sh stop
  }
  trap finish EXIT
  suffix="soak-$(date +%s)-$$"
  export AGENTGATE_TABLE="agentgate-$suffix" AGENTGATE_BUCKET="agentgate-$suffix"
  bin/agentgate init --endpoint "$AWS_ENDPOINT_URL" --table "$AGENTGATE_TABLE" --bucket "$AGENTGATE_BUCKET" >/dev/null
  args+=(--store aws)
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# SOAK_ARGS is read as shell words, so a quoted flag value keeps its spaces
# (--serve-args "--segment-budget 50ms"); it is the caller's own command line.
eval "extra=(${SOAK_ARGS:-})"
bin/soak "${args[@]}" "${extra[@]}"

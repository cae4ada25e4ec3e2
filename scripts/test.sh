#!/usr/bin/env bash
# The project's test command (`make test`, called by .ci/run):
#   1. unit tests (no services), under the race detector, while npm ci
#      installs the node servers of step 2 (tools/npm);
#   2. the integration suite (//go:build integration; only the packages that
#      have such tests) against AWS_ENDPOINT_URL, under the race detector,
#      starting a moto server on its port when nothing answers there, and
#      creating the table and bucket with `agentgate init`; when it starts
#      moto itself it runs the packages in two lanes at once, the second on
#      a moto of its own on the next port (MOTO_PORT_LANE2 overrides it).
# `scripts/test.sh integration` runs step 2 only (the tests of the
# integration-tagged files; `scripts/test.sh integration all` runs every test
# of those packages, as step 2 did before).
set -euo pipefail
cd "$(dirname "$0")/.."
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

# Each phase's wall-clock time, printed as it ends and again at the end.
phases=()
t_all=$(date +%s.%N)
phase() { # phase NAME COMMAND...: run COMMAND, record its time under NAME, return its status
  local name="$1" t0 s rc=0; shift
  t0=$(date +%s.%N)
  "$@" || rc=$?
  s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  phases+=("$name ${s}s"); echo "== $name: ${s}s"
  return $rc
}
summary() { [ ${#phases[@]} -eq 0 ] || echo "test phases: ${phases[*]}; total $(awk -v a="$t_all" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"; }

# The servers nobody here wrote that the integration tier runs (tools/npm:
# the MCP reference server and an OpenAI-compatible mock model), installed
# from the lock file. Without node the tests that need them skip, and fail
# under CI=true. npm ci runs while the unit tests run (no unit test reads
# tools/npm); its output and its own time are printed when the unit tests
# end. With npm's cache warm it computes most of its 10 s (8 s of CPU), so
# the unit tests take some of that longer; with a cold cache it mostly
# waits on the network. The unit tests' packages are listed before npm ci starts: go test
# ./... walks the tree, and a walk that met a folder npm ci was replacing in
# tools/npm/node_modules would fail the pattern.
npm_pid="" npm_name="npm ci" unit_pkgs=""
if [ "${1:-}" != "integration" ]; then
  unit_pkgs="$(go list ./...)"
  npm_name="npm ci (at the same time)"
fi
if command -v npm >/dev/null 2>&1; then
  npm_log="$(mktemp)"
  (
    t0=$(date +%s.%N); rc=0
    npm ci --prefix tools/npm --no-audit --no-fund --loglevel=error >"$npm_log" 2>&1 || rc=$?
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$npm_log.time"
    exit $rc
  ) &
  npm_pid=$!
fi

unit_rc=0
if [ "${1:-}" != "integration" ]; then
  echo "== unit tests"
  phase unit go test -race -count=1 $unit_pkgs || unit_rc=$?
fi

if [ -n "$npm_pid" ]; then
  echo "== npm ci (tools/npm)"
  npm_rc=0
  wait "$npm_pid" || npm_rc=$?
  cat "$npm_log"
  phases+=("$npm_name $(cat "$npm_log.time")s")
  echo "== $npm_name: $(cat "$npm_log.time")s"
  rm -f "$npm_log" "$npm_log.time"
  [ "$unit_rc" -ne 0 ] || [ "$npm_rc" -eq 0 ] || exit "$npm_rc"
else
  echo "== npm not found: the MCP and mock-model integration tests will skip (fail under CI=true)"
fi
[ "$unit_rc" -eq 0 ] || exit "$unit_rc"

echo "== integration tests against $AWS_ENDPOINT_URL"
# The suites run in two lanes at once, each against its own emulator (one
# moto server is one Python process: a second one lets the lanes use both
# cores; each lane's packages run one after another, -p 1, and every test
# makes its own table and bucket). When an emulator already answers on
# AWS_ENDPOINT_URL (yours, or LocalStack), every package runs against it, one
# lane after the other, as before.
lane2_endpoint=""
if curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null || curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/_localstack/health" 2>/dev/null; then
  echo "using the emulator already on $AWS_ENDPOINT_URL"
else
  port="${AWS_ENDPOINT_URL##*:}"; port="${port%%/*}"; [[ "$port" =~ ^[0-9]+$ ]] || port=4566
  lane2_endpoint="http://localhost:${MOTO_PORT_LANE2:-$((port + 1))}"
  if curl -fsS -o /dev/null "$lane2_endpoint/moto-api/" 2>/dev/null; then
    echo "something already answers on $lane2_endpoint: one lane after the other on $AWS_ENDPOINT_URL"
    lane2_endpoint=""
  fi
  # Stop the emulators afterwards only if this script started them, both at
  # once: a moto that ran a lane takes seconds to exit (9.5 s and 2.9 s
  # after one run), and the total includes it.
  trap 'scripts/moto.sh stop & stop_pid=$!; [ -z "$lane2_endpoint" ] || AWS_ENDPOINT_URL="$lane2_endpoint" scripts/moto.sh stop; wait "$stop_pid"; summary' EXIT
  phase "moto start" scripts/moto.sh start
  [ -z "$lane2_endpoint" ] || AWS_ENDPOINT_URL="$lane2_endpoint" scripts/moto.sh start
fi
[ -n "$(trap -p EXIT)" ] || trap summary EXIT
bin="$(mktemp -d)"
go build -o "$bin/agentgate" ./cmd/agentgate
phase init "$bin/agentgate" init --endpoint "$AWS_ENDPOINT_URL"
[ -z "$lane2_endpoint" ] || "$bin/agentgate" init --endpoint "$lane2_endpoint"
rm -rf "$bin"
# The suites that read sent mail back from moto's /moto-api/data.json go first
# in their lane: moto 5.2 answers that endpoint 500 (slowly) once it holds
# objects of deleted buckets, which later suites leave behind.
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
# Only the tests of the integration-tagged files run here: the rest of those
# packages' tests are unit tests that step 1 ran (apitest's and service's
# alone took 70 s of this phase on a quiet machine). The tagged files declare
# no init or package variables that could change an untagged test (the one
# TestMain, cmd/agentgate's, only removes the bootstraps its tests built), so
# a test's outcome does not depend on the tag.
integration_files=$(grep -rl --include='*_test.go' '^//go:build integration$' . || true)
integration_tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' $integration_files | sort -u | paste -sd'|' -)
[ -n "$integration_tests" ] || { echo "test.sh: found no tests in integration-tagged files" >&2; exit 1; }
if [ "${1:-}" = "integration" ] && [ "${2:-}" = "all" ]; then integration_run='.'; else integration_run="^($integration_tests)\$"; fi
# Lane 1: runs/dynamo (the longest package by far), then apitest, s3state
# and docstore; lane 2: the mail suites (cmd/agentgate waits out a 60-second
# approval window under the RIE, whatever the load), then everything else
# (service the longest). Each package's build costs its lane a few seconds
# more. Lane 1 held runs/dynamo, service and the four small packages and
# lane 2 the mail suites and apitest before: on one 2-core machine at load
# 2-3 both ways balance (156 s and 149 s before, 157 s and 156 s now:
# dynamo 89-95 s, cmd/agentgate 91-93 s, service 42 s, apitest 42-44 s,
# s3state 7 s, docstore 4-5 s, the three others 5 s); at load 5-7 the old
# lane 1, all of it CPU-bound, took 274 s against 210 s, and this one (with
# docstore still in lane 2) 205 s against 195 s at load 3-5.
lane1_re='/internal/(runs/dynamo|runs/s3state|apitest|docstore)$'
lane1_pkgs="$(echo "$integration_pkgs" | grep -E "$lane1_re" || true)"
lane2_rest="$(echo "$integration_pkgs" | grep -v -E "$lane1_re" || true)"
short() { echo $* | sed 's|github.com/agentgate/agentgate/|./|g'; }
itest() { go test -race -count=1 -p 1 -tags integration -run "$integration_run" "$@"; }
if [ -z "$lane2_endpoint" ]; then
  echo "== integration packages: $mail_pkgs, then $(short $lane2_rest $lane1_pkgs)"
  phase "integration (mail suites)" itest $mail_pkgs
  phase "integration (the rest)" itest $lane2_rest $lane1_pkgs
else
  echo "== integration packages: lane 1: $(short $lane1_pkgs); lane 2 (on $lane2_endpoint): $mail_pkgs, then $(short $lane2_rest)"
  # Lane 2 writes to a file, printed when it ends, so the two lanes' lines
  # do not interleave; its time is printed with it.
  lane2_log="$(mktemp)"
  (
    t0=$(date +%s.%N); rc=0
    export AWS_ENDPOINT_URL="$lane2_endpoint"
    { itest $mail_pkgs && { [ -z "$lane2_rest" ] || itest $lane2_rest; }; } >"$lane2_log" 2>&1 || rc=$?
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$lane2_log.time"
    exit $rc
  ) &
  lane2_pid=$!
  lane1_rc=0
  [ -z "$lane1_pkgs" ] || phase "integration (lane 1)" itest $lane1_pkgs || lane1_rc=$?
  lane2_rc=0
  wait "$lane2_pid" || lane2_rc=$?
  echo "== integration (lane 2, on $lane2_endpoint):"
  cat "$lane2_log"
  phases+=("integration (lane 2, at the same time) $(cat "$lane2_log.time")s")
  echo "== integration (lane 2, at the same time): $(cat "$lane2_log.time")s"
  rm -f "$lane2_log" "$lane2_log.time"
  [ "$lane1_rc" -eq 0 ] && [ "$lane2_rc" -eq 0 ] || exit 1
fi

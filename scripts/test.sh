#!/usr/bin/env bash
# The project's test command (`make test`, called by .ci/run):
#   1. unit tests (no services), under the race detector, while npm ci
#      installs the node servers of step 2 (tools/npm); then the megabyte
#      tests (marked //agentgate:megabytes, see below) without it;
#   2. the integration suite (//go:build integration; only the packages that
#      have such tests) against AWS_ENDPOINT_URL, under the race detector,
#      starting a moto server on its port when nothing answers there, and
#      creating the table and bucket with `agentgate init`; when it starts
#      moto itself it runs the packages in three lanes at once, the second
#      and third on motos of their own on the next two ports
#      (MOTO_PORT_LANE2 and MOTO_PORT_LANE3 override them).
# `scripts/test.sh integration` runs step 2 only (the tests of the
# integration-tagged files; `scripts/test.sh integration all` runs every test
# of those packages, as step 2 did before).
# Against LocalStack without SES v2 (Community: its health lists no sesv2)
# step 2 exports AGENTGATE_SES_API=v1 unless it is set, so that what the tests
# start mails through SES's first API.
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
# The test files of each tier (listed here for the same reason):
# go list's test files without the integration tag, and those the tag adds.
file_list='{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$d}}/{{.}} {{end}}'
unit_files="$(go list -f "$file_list" ./... | tr ' ' '\n' | sed '/^$/d' | sort)"
integration_files="$(comm -13 <(echo "$unit_files") <(go list -tags integration -f "$file_list" ./... | tr ' ' '\n' | sed '/^$/d' | sort))"
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

# -trimpath: the compiled packages do not depend on the checkout's folder,
# so a second clone or worktree of the same code (CI's clean clone on a
# machine that ran the tests before) reuses the build cache instead of
# compiling every package again under -race (145 s for the unit phase in a
# clean clone, 112 s with the cache). No test reads its source file's path.
# -timeout 30m: go test's default of 10 minutes per package binary is
# within reach of runs/dynamo's integration tests on a loaded machine
# (106 s quiet; 446 s in one .ci/run, over 600 s in another that shared
# the 2 cores with two other builds); the phase times printed at the end
# show how far a package is from it.
go_timeout=30m
# The unit tests' packages run twice as many at once as the machine has
# cores (go test's default is as many): they wait on their servers, clocks
# and subprocesses much of the time, so at one per core the cores idled
# (2 cores: 203-209 s at -p 2, 154 s at -p 3, 136.5 s at -p 4, measured one
# after the other on a quiet machine on 6 December). The test binaries are
# linked without symbol table and DWARF (-s -w): a race-instrumented test
# binary's link is most of a small package's time, and the test binaries
# are never debugged; panics and race reports still name functions and
# lines (from the pclntab, which -s keeps). Linking every test binary with
# nothing to run: 77.6 s, 63 s with -s -w. (Running the unit tier in the
# background while the integration tier ran was no faster: 362.4 s, against
# 352.6 s one after the other; the two cores were busy.)
unit_parallel=$(( $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2) * 2 ))
link_flags='-s -w'

# Megabyte tests: a test marked //agentgate:megabytes (the line right above
# its func) moves megabytes of state through the store or the API, at the
# limits and past them. Under the race detector every byte copied is
# checked, which makes such a test 10 to 30 times slower (the embedded
# store's megabyte conformance cases: 70 s instead of 5 s; apitest's four:
# 100 s instead of 4.3 s), and those bytes are copied by one goroutine: the
# same code with small states runs under -race in the other tests. So the
# -race passes skip them (go test -skip) and they run in a pass of their own
# without -race, in each tier.
megabyte_tests() { # megabyte_tests FILE...: the marked tests' names, one per line
  [ $# -gt 0 ] || return 0
  awk 'FNR == 1 { m = 0 }
    /^\/\/agentgate:megabytes$/ { m = 1; next }
    m && /^func Test/ { n = $2; sub(/\(.*/, "", n); print n; m = 0; next }
    m { printf "test.sh: %s:%d: //agentgate:megabytes must be right above a func Test\n", FILENAME, FNR > "/dev/stderr"; bad = 1; exit 1 }
    END { exit bad }' "$@" | sort -u
}
megabyte_dirs() { # megabyte_dirs FILE...: the folders of the files that hold marked tests
  [ $# -gt 0 ] || return 0
  grep -l '^//agentgate:megabytes$' "$@" | xargs -r -n1 dirname | sort -u
}
alternation() { paste -sd'|' -; }
# shellcheck disable=SC2086 # the file lists are split on purpose (no spaces in the tree's paths)
unit_megabytes="$(megabyte_tests $unit_files | alternation)"
# shellcheck disable=SC2086
unit_megabyte_dirs="$(megabyte_dirs $unit_files)"

unit_rc=0
if [ "${1:-}" != "integration" ]; then
  skip=()
  [ -z "$unit_megabytes" ] || skip=(-skip "^($unit_megabytes)\$")
  echo "== unit tests (but the megabyte tests)"
  phase unit go test -race -trimpath -count=1 -timeout $go_timeout -p $unit_parallel -ldflags="$link_flags" "${skip[@]}" $unit_pkgs || unit_rc=$?
  if [ "$unit_rc" -eq 0 ] && [ -n "$unit_megabytes" ]; then
    echo "== unit megabyte tests, without -race: ${unit_megabytes//|/ }"
    phase "unit megabyte tests" go test -trimpath -count=1 -timeout $go_timeout -ldflags="$link_flags" -run "^($unit_megabytes)\$" $unit_megabyte_dirs || unit_rc=$?
  fi
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
# The suites run in three lanes at once, each against its own emulator (one
# moto server is one Python process; each lane's packages run one after
# another, -p 1, and every test makes its own table and bucket). When an
# emulator already answers on AWS_ENDPOINT_URL (yours, or LocalStack), or
# the lanes' ports are taken, every package runs against AWS_ENDPOINT_URL,
# one after the other.
# MOTO_PORT would make scripts/moto.sh use one port for every lane: the
# lanes' endpoints name their ports.
unset MOTO_PORT
answers() { # answers URL: whether anything answers HTTP on URL's host and port
  curl -sS -o /dev/null --max-time 2 "$1/" 2>/dev/null
}
lane_endpoints=()
if health="$(curl -fsS "$AWS_ENDPOINT_URL/_localstack/health" 2>/dev/null)"; then
  echo "using the LocalStack already on $AWS_ENDPOINT_URL"
  # LocalStack Community has SES but no SES v2 (a Pro service): mail goes
  # through SES's first API there (internal/approval, AGENTGATE_SES_API).
  if [ -z "${AGENTGATE_SES_API:-}" ] && ! grep -Eq '"sesv2": *"(available|running)"' <<<"$health"; then
    export AGENTGATE_SES_API=v1
    echo "LocalStack has no SES v2: AGENTGATE_SES_API=v1"
  fi
elif curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null; then
  echo "using the emulator already on $AWS_ENDPOINT_URL"
else
  port="${AWS_ENDPOINT_URL##*:}"; port="${port%%/*}"; [[ "$port" =~ ^[0-9]+$ ]] || port=4566
  lane_endpoints=("http://localhost:${MOTO_PORT_LANE2:-$((port + 1))}" "http://localhost:${MOTO_PORT_LANE3:-$((port + 2))}")
  for e in "${lane_endpoints[@]}"; do
    if answers "$e"; then
      echo "something already answers on $e: one package after the other on $AWS_ENDPOINT_URL"
      lane_endpoints=()
      break
    fi
  done
  # Stop the emulators afterwards only if this script started them, all at
  # once: a moto that ran a lane takes seconds to exit (9.5 s and 2.9 s
  # after one run), and the total includes it.
  stop_motos() {
    local pids=() e
    scripts/moto.sh stop & pids+=($!)
    for e in ${lane_endpoints[@]+"${lane_endpoints[@]}"}; do AWS_ENDPOINT_URL="$e" scripts/moto.sh stop & pids+=($!); done
    wait "${pids[@]}"
  }
  trap 'stop_motos; summary' EXIT
  phase "moto start" scripts/moto.sh start
  for e in ${lane_endpoints[@]+"${lane_endpoints[@]}"}; do AWS_ENDPOINT_URL="$e" scripts/moto.sh start; done
fi
[ -n "$(trap -p EXIT)" ] || trap summary EXIT
bin="$(mktemp -d)"
go build -o "$bin/agentgate" ./cmd/agentgate
phase init "$bin/agentgate" init --endpoint "$AWS_ENDPOINT_URL"
for e in ${lane_endpoints[@]+"${lane_endpoints[@]}"}; do "$bin/agentgate" init --endpoint "$e"; done
rm -rf "$bin"
# The suites that read sent mail back from moto's /moto-api/data.json run
# first on their emulator: moto 5.2 answers that endpoint 500 (slowly) once
# it holds objects of deleted buckets, which other suites leave behind.
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
integration_tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' $integration_files | sort -u | paste -sd'|' -)
[ -n "$integration_tests" ] || { echo "test.sh: found no tests in integration-tagged files" >&2; exit 1; }
if [ "${1:-}" = "integration" ] && [ "${2:-}" = "all" ]; then integration_run='.'; else integration_run="^($integration_tests)\$"; fi
# The integration tier's megabyte tests (see the unit tests above) run in a
# pass of their own, without -race, after lane 2's packages (the shortest
# lane), on lane 2's emulator. `scripts/test.sh integration all` runs every
# test under -race as before.
integration_megabytes="" integration_megabyte_dirs="" iskip=()
if [ "$integration_run" != '.' ]; then
  # shellcheck disable=SC2086
  integration_megabytes="$(megabyte_tests $integration_files | alternation)"
  # shellcheck disable=SC2086
  integration_megabyte_dirs="$(megabyte_dirs $integration_files)"
  [ -z "$integration_megabytes" ] || iskip=(-skip "^($integration_megabytes)\$")
fi
# Lane 1: runs/dynamo (the longest package by far) and docstore; lane 2: the
# mail suites (cmd/agentgate waits out a 60-second approval window under the
# RIE, whatever the load, idle most of its 95 s), then s3state; lane 3:
# apitest, then everything else (service the longest). On the quiet 2-core
# machine in two lanes (the mail suites, then service and the small ones;
# runs/dynamo, apitest, s3state and docstore) they took 178 s and 180 s:
# dynamo 108 s, cmd/agentgate 95 s, service 50 s, apitest 43 s, s3state 11 s,
# docstore 4 s, the three others 5 s. In three lanes, with s3state in lane 1,
# 133 s, 115 s and 117 s.
lane1_re='/internal/(runs/dynamo|docstore)$'
lane2_re='/internal/runs/s3state$'
lane1_pkgs="$(echo "$integration_pkgs" | grep -E "$lane1_re" || true)"
lane2_pkgs="$(echo "$integration_pkgs" | grep -E "$lane2_re" || true)"
lane3_pkgs="$(echo "$integration_pkgs" | grep -v -E "$lane1_re|$lane2_re" || true)"
short() { echo $* | sed 's|github.com/agentgate/agentgate/|./|g'; }
itest() { go test -race -trimpath -count=1 -timeout $go_timeout -p 1 -ldflags="$link_flags" -tags integration -run "$integration_run" "${iskip[@]}" "$@"; }
itest_megabytes() { # the integration megabyte tests, without -race
  [ -n "$integration_megabytes" ] || return 0
  echo "== integration megabyte tests, without -race: ${integration_megabytes//|/ }"
  # shellcheck disable=SC2086
  go test -trimpath -count=1 -timeout $go_timeout -p 1 -ldflags="$link_flags" -tags integration -run "^($integration_megabytes)\$" $integration_megabyte_dirs
}
if [ ${#lane_endpoints[@]} -eq 0 ]; then
  echo "== integration packages: $mail_pkgs, then $(short $lane3_pkgs $lane2_pkgs $lane1_pkgs)"
  phase "integration (mail suites)" itest $mail_pkgs
  phase "integration (the rest)" itest $lane3_pkgs $lane2_pkgs $lane1_pkgs
  [ -z "$integration_megabytes" ] || phase "integration megabyte tests" itest_megabytes
else
  echo "== integration packages: lane 1: $(short $lane1_pkgs); lane 2 (on ${lane_endpoints[0]}): $mail_pkgs, then $(short $lane2_pkgs)${integration_megabytes:+, then the megabyte tests}; lane 3 (on ${lane_endpoints[1]}): $(short $lane3_pkgs)"
  # Lanes 2 and 3 write to files, printed when they end, so the lanes'
  # lines do not interleave; each one's time is printed with it.
  lane() { # lane LOG ENDPOINT FIRST THEN [megabytes]: run the packages of FIRST, then those of THEN (then the megabyte tests), against ENDPOINT in the background
    local log="$1" endpoint="$2" first="$3" then="$4" megabytes="${5:-}"
    (
      t0=$(date +%s.%N); rc=0
      export AWS_ENDPOINT_URL="$endpoint"
      { [ -z "$first" ] || itest $first; } >"$log" 2>&1 || rc=$?
      [ "$rc" -ne 0 ] || [ -z "$then" ] || itest $then >>"$log" 2>&1 || rc=$?
      [ "$rc" -ne 0 ] || [ -z "$megabytes" ] || itest_megabytes >>"$log" 2>&1 || rc=$?
      awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$log.time"
      exit $rc
    ) &
  }
  lane2_log="$(mktemp)" lane3_log="$(mktemp)"
  lane "$lane2_log" "${lane_endpoints[0]}" "$mail_pkgs" "$lane2_pkgs" megabytes; lane2_pid=$!
  lane "$lane3_log" "${lane_endpoints[1]}" "$lane3_pkgs" ""; lane3_pid=$!
  lane1_rc=0
  [ -z "$lane1_pkgs" ] || phase "integration (lane 1)" itest $lane1_pkgs || lane1_rc=$?
  others_rc=0
  for n in 2 3; do
    pid_var="lane${n}_pid" log_var="lane${n}_log" endpoint="${lane_endpoints[$((n - 2))]}"
    wait "${!pid_var}" || others_rc=1
    echo "== integration (lane $n, on $endpoint):"
    cat "${!log_var}"
    phases+=("integration (lane $n, at the same time) $(cat "${!log_var}.time")s")
    echo "== integration (lane $n, at the same time): $(cat "${!log_var}.time")s"
    rm -f "${!log_var}" "${!log_var}.time"
  done
  [ "$lane1_rc" -eq 0 ] && [ "$others_rc" -eq 0 ] || exit 1
fi

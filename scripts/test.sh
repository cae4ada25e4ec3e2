#!/usr/bin/env bash
# The project's test command (`make test`, called by .ci/run):
#   1. unit tests (no services), under the race detector, while npm ci
#      installs the node servers of step 2 (tools/npm); then the megabyte
#      tests (marked //agentgate:megabytes, see below) without it; built
#      with -tags integration, the tagged files' tests skipped, so that step
#      2 runs the test binaries step 1 linked (scripts/test-exec.sh);
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
module="$(go list -m)"
# The packages the integration tag changes: those whose test files differ
# with -tags integration, and the tests of the tagged files.
test_files='{{.ImportPath}} {{.TestGoFiles}} {{.XTestGoFiles}}'
tagged_pkgs=$(comm -13 <(go list -f "$test_files" ./... | sort) <(go list -tags integration -f "$test_files" ./... | sort) | awk '{ print $1 }')
test_names() { # test_names FILE...: the tests the files declare (TestMain is none), one per line
  [ $# -eq 0 ] || sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' "$@" | grep -vx TestMain | sort -u
}
# shellcheck disable=SC2086 # the file lists are split on purpose (no spaces in the tree's paths)
integration_tests=$(test_names $integration_files | paste -sd'|' -)
[ -n "$integration_tests" ] || { echo "test.sh: found no tests in integration-tagged files" >&2; exit 1; }
# shellcheck disable=SC2086
if same="$(comm -12 <(test_names $unit_files) <(test_names $integration_files) | paste -sd' ' -)" && [ -n "$same" ]; then
  # The unit tier skips the tagged files' tests by name (see below).
  echo "test.sh: a test of an integration-tagged file has the name of a unit test: $same" >&2
  exit 1
fi
npm_pid="" npm_name="npm ci" unit_pkgs=""
if [ "${1:-}" != "integration" ]; then
  # The longest packages first: go test builds and runs the packages in the
  # order given, -p at a time, and a long package that started last ran on
  # alone, the other core idle (service started at 112 s of a 140-s unit
  # tier, runs/embedded at 101 s; 6 December). The list is a guess that may
  # age; a package missing from it only runs later.
  long_pkgs="internal/service internal/runs/embedded internal/apitest cmd/agentgate . internal/mcptool client internal/httpapi internal/runs internal/docstore internal/loop"
  all_pkgs="$(go list ./...)"
  unit_pkgs="$(for p in $long_pkgs; do p="$module/$p"; p="${p%/.}"; ! grep -qx "$p" <<<"$all_pkgs" || echo "$p"; done)"
  unit_pkgs="$unit_pkgs
$(grep -vxF "$unit_pkgs" <<<"$all_pkgs")"
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
# The go commands the tests run build with -trimpath too (GOFLAGS), as
# TestReadmeLocalStart's go build of cmd/agentgate: without it, a clean clone
# compiled every package of this module again for it (51 CPU-seconds, 6
# December), its folder being part of what it compiled.
export GOFLAGS="-trimpath${GOFLAGS:+ $GOFLAGS}"
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
# Each test process runs its tests with GOMAXPROCS=1 (go test -cpu 1;
# TEST_CPU overrides it): the tiers run several test processes at once on
# every core, and a race-instrumented process whose threads ran on both
# cores spent a third of its time in the kernel, in page faults whose TLB
# flushes interrupt the other core (apitest's unit tests alone: 32-43
# CPU-seconds at GOMAXPROCS=2, 21.5 at 1, in the same wall time; 6
# December). Goroutines still interleave (they are preempted, and block on
# I/O), and the race detector finds races by what happened before what, not
# by accesses at the same instant; `make test-unit` runs the unit tests at
# the machine's parallelism.
test_cpu="${TEST_CPU:-1}"
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

# shellcheck disable=SC2086
integration_megabytes="$(megabyte_tests $integration_files | alternation)"
# shellcheck disable=SC2086
integration_megabyte_dirs="$(megabyte_dirs $integration_files)"

# The unit tier builds every package with the integration tag and skips the
# tests of the tagged files by name, so that its test binaries are those the
# integration tier runs: go test -exec scripts/test-exec.sh keeps the
# binaries of the tagged packages (and, from the megabyte pass, those of the
# integration megabyte tests), and step 2 runs them in their folders instead
# of linking them again. Linking those nine race binaries and three plain ones
# took 39 CPU-seconds (go test -run '^$' on them, 6 December); the tag adds
# 10 to the unit tier's (85 without it). `scripts/test.sh integration` alone
# builds its binaries with go test, as before.
root="$(pwd -P)"
rel() { # rel PKG...: each package's folder relative to the root (PKG an import path, ./folder or absolute folder)
  local p
  for p; do
    p="${p#"$root"/}"; p="${p#./}"; p="${p#"$module"/}"
    { [ "$p" != "$module" ] && [ "$p" != "$root" ]; } || p=.
    echo "$p"
  done
}
stash="$(mktemp -d)"
mkdir "$stash/race" "$stash/plain"
motos_started=0
finish() {
  [ "$motos_started" -eq 0 ] || stop_motos
  summary
  rm -rf "$stash"
}
trap finish EXIT
kept() { echo "$stash/$1/$(rel "$2" | tr / _).test"; } # kept KIND PKG: where the unit tier kept PKG's binary of KIND (race, plain)
keep_for() { # keep_for KIND PKG... -- COMMAND...: run COMMAND keeping the binaries of PKG... as KIND
  local kind="$1" pkgs=(); shift
  while [ "$1" != -- ]; do pkgs+=("$1"); shift; done
  shift
  TEST_EXEC_DIR="$stash/$kind" TEST_EXEC_ROOT="$root" TEST_EXEC_KEEP="$(rel "${pkgs[@]}" | paste -sd' ' -)" "$@" -exec "$root/scripts/test-exec.sh"
}

# One agentgate binary for the tests that run it (TestReadmeLocalStart, as
# AGENTGATE_BIN) and for `agentgate init` below: linking it took 8-11
# CPU-seconds each time.
go build -ldflags="$link_flags" -o "$stash/agentgate" ./cmd/agentgate
export AGENTGATE_BIN="$stash/agentgate"

unit_rc=0
if [ "${1:-}" != "integration" ]; then
  unit_skip="$integration_tests${unit_megabytes:+|$unit_megabytes}"
  echo "== unit tests (but the megabyte tests)"
  # shellcheck disable=SC2086
  phase unit keep_for race $tagged_pkgs -- go test -race -trimpath -count=1 -timeout $go_timeout -p $unit_parallel -cpu $test_cpu -ldflags="$link_flags" -tags integration -skip "^($unit_skip)\$" $unit_pkgs || unit_rc=$?
  if [ "$unit_rc" -eq 0 ] && [ -n "$unit_megabytes" ]; then
    echo "== unit megabyte tests, without -race: ${unit_megabytes//|/ }"
    # shellcheck disable=SC2086
    phase "unit megabyte tests" keep_for plain $integration_megabyte_dirs -- go test -trimpath -count=1 -timeout $go_timeout -cpu $test_cpu -ldflags="$link_flags" -tags integration -run "^($unit_megabytes)\$" $(echo $unit_megabyte_dirs $integration_megabyte_dirs | tr ' ' '\n' | sort -u) || unit_rc=$?
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
  # once (scripts/moto.sh stop kills them: the busiest took over 10 s to
  # exit on SIGTERM, and the total includes it).
  stop_motos() { every_endpoint scripts/moto.sh stop; }
  motos_started=1
fi
# every_endpoint COMMAND...: run COMMAND once per emulator, all at once, with
# AWS_ENDPOINT_URL naming it; fails when one fails. (Three motos started at
# once take about as long as one after the other, 4.3 s: their Python
# imports share the cores. Their stops and inits do not add up.)
every_endpoint() {
  local pids=() e rc=0 p
  for e in "$AWS_ENDPOINT_URL" ${lane_endpoints[@]+"${lane_endpoints[@]}"}; do AWS_ENDPOINT_URL="$e" "$@" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return "$rc"
}
[ "$motos_started" -eq 0 ] || phase "moto start" every_endpoint scripts/moto.sh start
phase init every_endpoint sh -c '"$AGENTGATE_BIN" init --endpoint "$AWS_ENDPOINT_URL"'
# The suites that read sent mail back from moto's /moto-api/data.json run
# first on their emulator: moto 5.2 answers that endpoint 500 (slowly) once
# it holds objects of deleted buckets, which other suites leave behind.
mail_pkgs="./cmd/agentgate ./internal/approval"
# Only the packages the integration tag changes: those whose test files differ
# with -tags integration. Every other package's tests are the unit tier's,
# which step 1 ran with the same environment; running them again here cost
# 117 s of serial linking and re-runs per `make test` on a loaded 2-core
# machine, without -race (issue #15).
integration_pkgs=$(echo "$tagged_pkgs" | grep -v -e '/cmd/agentgate$' -e '/internal/approval$' || true)
# An empty list would make go test test the root package alone and pass.
[ -n "$integration_pkgs" ] || { echo "test.sh: found no integration packages besides the mail suites" >&2; exit 1; }
# Only the tests of the integration-tagged files run here: the rest of those
# packages' tests are unit tests that step 1 ran (apitest's and service's
# alone took 70 s of this phase on a quiet machine). The tagged files declare
# no init or package variables that could change an untagged test (the one
# TestMain, cmd/agentgate's, only removes the bootstraps its tests built), so
# a test's outcome does not depend on the tag.
if [ "${1:-}" = "integration" ] && [ "${2:-}" = "all" ]; then integration_run='.'; else integration_run="^($integration_tests)\$"; fi
# The integration tier's megabyte tests (see the unit tests above) run in a
# pass of their own, without -race, after lane 2's packages (the shortest
# lane), on lane 2's emulator. `scripts/test.sh integration all` runs every
# test under -race as before.
iskip=() iskip_re=""
if [ "$integration_run" = '.' ]; then
  integration_megabytes="" integration_megabyte_dirs=""
elif [ -n "$integration_megabytes" ]; then
  iskip_re="^($integration_megabytes)\$"
  iskip=(-skip "$iskip_re")
fi
# Lane 1: runs/dynamo (the longest package by far); lane 2: the mail suites,
# then s3state and docstore (then the megabyte tests); lane 3: apitest, then
# everything else (service the longest). In `make test` on the quiet 2-core
# machine on 6 December, with the lanes' binaries linked by the unit tier:
# dynamo 105-123 s, cmd/agentgate 61-83 s, service 57-65 s, apitest 43-55 s,
# docstore 17-22 s, s3state 12-14 s, the megabyte tests 17-18 s, the four
# others 10 s; with docstore in lane 1 that lane ended 15-45 s after the
# others, the cores idling meanwhile.
lane1_re='/internal/runs/dynamo$'
lane2_re='/internal/(runs/s3state|docstore)$'
lane1_pkgs="$(echo "$integration_pkgs" | grep -E "$lane1_re" || true)"
lane2_pkgs="$(echo "$integration_pkgs" | grep -E "$lane2_re" || true)"
lane3_pkgs="$(echo "$integration_pkgs" | grep -v -E "$lane1_re|$lane2_re" || true)"
short() { echo $* | sed "s|$module/|./|g"; }
# run_kept KIND RUN SKIP PKG...: run each package's kept binary of KIND in
# the package's folder, one after the other, with the flags go test passes
# (-test.run RUN, -test.skip SKIP unless empty), printing what go test -p 1
# prints: a package's output only when it fails, and its ok or FAIL line.
run_kept() {
  local kind="$1" run="$2" skip="$3" p out t0 s st rc=0 note
  shift 3
  for p; do
    out="$(mktemp)" t0=$(date +%s.%N) st=0
    (cd "$root/$(rel "$p")" && "$(kept "$kind" "$p")" -test.paniconexit0 -test.timeout="$go_timeout" -test.count=1 -test.cpu="$test_cpu" -test.run="$run" ${skip:+"-test.skip=$skip"}) >"$out" 2>&1 || st=$?
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    p="$module/$(rel "$p")"; p="${p%/.}"
    if [ "$st" -eq 0 ]; then
      note=""
      ! grep -q '^testing: warning: no tests to run' "$out" || note=" [no tests to run]"
      printf 'ok  \t%s\t%ss%s\n' "$p" "$s" "$note"
    else
      cat "$out"
      printf 'FAIL\t%s\t%ss\n' "$p" "$s"
      rc=1
    fi
    rm -f "$out"
  done
  return $rc
}
all_kept() { # all_kept KIND PKG...: whether the unit tier kept every package's binary of KIND
  local kind="$1" p
  shift
  for p; do [ -x "$(kept "$kind" "$p")" ] || return 1; done
}
# itest PKG...: the packages' integration tests under -race, one after the
# other: the binaries the unit tier kept, else go test's.
itest() {
  if all_kept race "$@"; then
    run_kept race "$integration_run" "$iskip_re" "$@"
  else
    go test -race -trimpath -count=1 -timeout $go_timeout -p 1 -cpu $test_cpu -ldflags="$link_flags" -tags integration -run "$integration_run" "${iskip[@]}" "$@"
  fi
}
itest_megabytes() { # the integration megabyte tests, without -race
  [ -n "$integration_megabytes" ] || return 0
  echo "== integration megabyte tests, without -race: ${integration_megabytes//|/ }"
  # shellcheck disable=SC2086
  if all_kept plain $integration_megabyte_dirs; then
    # shellcheck disable=SC2086
    run_kept plain "^($integration_megabytes)\$" "" $integration_megabyte_dirs
  else
    # shellcheck disable=SC2086
    go test -trimpath -count=1 -timeout $go_timeout -p 1 -cpu $test_cpu -ldflags="$link_flags" -tags integration -run "^($integration_megabytes)\$" $integration_megabyte_dirs
  fi
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

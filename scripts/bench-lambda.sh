#!/usr/bin/env bash
# Lambda cold-start benchmark (`make bench-lambda`, issue 4 "Measure"):
# builds the three bootstraps (startrun, resume, purge) and a hello-world
# aws-lambda-go baseline (internal/benchdata/hello) exactly as shipped, but for
# linux/amd64, runs each under the AWS Lambda Runtime Interface Emulator N times
# (a fresh emulator, so a cold start, each time), reads the init and
# first-invoke durations the emulator logs for that one invoke, and prints
# medians, binary sizes and each ratio to hello-world.
#
#   scripts/bench-lambda.sh [N]     # N repetitions, default 5 (or $BENCH_N)
#
# No AWS is needed: AWS_ENDPOINT_URL points at a port where nothing listens.
# startrun and resume get an API Gateway request for an unknown route, which
# answers 404 without touching DynamoDB; purge gets a scheduled event, whose
# first DynamoDB call fails fast against the dead endpoint (an error result,
# still a full first invoke). $BENCH_PORT (default 19300) is the first port
# tried for the emulators; ports in use are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

n="${1:-${BENCH_N:-5}}"
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [repetitions]" >&2; exit 2; }
port="${BENCH_PORT:-19300}"
functions=(hello startrun resume purge)

work="$(mktemp -d "${TMPDIR:-/tmp}/agentgate-bench-lambda.XXXXXX")"
rie_pid=""
cleanup() {
  if [ -n "$rie_pid" ]; then kill "$rie_pid" 2>/dev/null || true; wait "$rie_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The deployed configuration: the tags `make build` uses (mk/build.mk), the
# model provider's SDK only (LAMBDA_PROVIDER, default bedrock) and the
# optional features of LAMBDA_FEATURES only (mcp, cel; default none).
provider="${LAMBDA_PROVIDER:-bedrock}"
features="${LAMBDA_FEATURES:-}"
tags="${LAMBDA_TAGS:-lambda.norpc,${provider// /,}${features:+,${features// /,}}}"
echo "== build (linux/amd64, -tags $tags -trimpath -ldflags='-s -w'; hello with lambda.norpc)" >&2
for fn in "${functions[@]}"; do
  src="./functions/$fn"; [ "$fn" = hello ] && src=./internal/benchdata/hello
  mkdir -p "$work/$fn"
  ftags="$tags"; [ "$fn" = hello ] && ftags=lambda.norpc
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -tags "$ftags" -trimpath -ldflags='-s -w' -o "$work/$fn/bootstrap" "$src"
done
go build -o "$work/aws-lambda-rie" github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

export AGENTGATE_TABLE=t AGENTGATE_BUCKET=b AGENTGATE_STARTRUN_FUNCTION=startrun AGENTGATE_RESUME_FUNCTION=resume
export AGENTGATE_MODEL="scripted:$PWD/cmd/agentgate/demo_script.json"
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_ENDPOINT_URL=http://127.0.0.1:1
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION

payload() {
  case "$1" in
    startrun | resume) echo '{"httpMethod":"GET","path":"/nope","headers":{},"requestContext":{}}' ;;
    purge) echo '{"version":"0","id":"bench","detail-type":"Scheduled Event","source":"aws.events","account":"000000000000","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:000000000000:rule/agentgate-purge"],"detail":{}}' ;;
    *) echo '{}' ;;
  esac
}

# next_port sets got to the next port from $port on where nothing listens.
next_port() {
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  got="$port"; port=$((port + 1))
}

# measure runs $1 once under a fresh emulator and prints "init_ms invoke_ms
# total_ms". The emulator starts the bootstrap on the first invoke; it logs
# "INIT REPORT(durationMs: X)" for the init phase (start-up to the first
# /next), "INVOKE RTDONE(..., duration: Y ms)" for the handler, and a REPORT
# line whose Duration is both together. (The REPORT line's own "Init Duration"
# is not the init time under the emulator: it stays near 0.1 ms.)
measure() {
  local fn="$1" rep="$2" api rapi log out i got
  next_port; api="$got"; next_port; rapi="$got"
  log="$work/$fn/rie.$rep.log"; out="$work/$fn/out.$rep.json"
  AWS_LAMBDA_FUNCTION_NAME="$fn" "$work/aws-lambda-rie" \
    --runtime-interface-emulator-address "127.0.0.1:$api" --runtime-api-address "127.0.0.1:$rapi" \
    "$work/$fn/bootstrap" >"$log" 2>&1 &
  rie_pid=$!
  for ((i = 0; i < 500; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$api") 2>/dev/null && break
    sleep 0.01
  done
  curl -sS --max-time 30 -XPOST "http://127.0.0.1:$api/2015-03-31/functions/function/invocations" -d "$(payload "$fn")" >"$out"
  # The REPORT line follows the response; wait for it rather than guess.
  for ((i = 0; i < 500; i++)); do grep -q '^REPORT' "$log" && break; sleep 0.01; done
  kill "$rie_pid" 2>/dev/null || true; wait "$rie_pid" 2>/dev/null || true; rie_pid=""
  awk '/INIT REPORT\(durationMs: / { init = $0; sub(/.*durationMs: /, "", init); sub(/\).*/, "", init) }
    /INVOKE RTDONE\(/ { inv = $0; sub(/.*duration: /, "", inv); sub(/ms\).*/, "", inv) }
    /^REPORT/ { for (i = 1; i < NF; i++) if ($i == "Duration:" && $(i-1) !~ /Init|Billed/) tot = $(i+1) }
    END { if (init == "" || inv == "" || tot == "") exit 1; print init, inv, tot }' "$log" ||
    { echo "no INIT REPORT, INVOKE RTDONE or REPORT for $fn (run $rep); emulator output:" >&2; cat "$log" >&2; exit 1; }
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A size init inv tot
for fn in "${functions[@]}"; do
  echo "== $fn: $n cold starts" >&2
  times="$work/$fn/times"; : >"$times"
  for ((rep = 1; rep <= n; rep++)); do measure "$fn" "$rep" >>"$times"; done
  size[$fn]="$(wc -c <"$work/$fn/bootstrap" | tr -d ' ')"
  init[$fn]="$(cut -d' ' -f1 "$times" | median)"
  inv[$fn]="$(cut -d' ' -f2 "$times" | median)"
  tot[$fn]="$(cut -d' ' -f3 "$times" | median)"
  echo "   init ms: $(cut -d' ' -f1 "$times" | tr '\n' ' ')" >&2
  echo "   invoke ms: $(cut -d' ' -f2 "$times" | tr '\n' ' ')" >&2
  echo "   response: $(head -c 160 "$work/$fn/out.1.json")" >&2
done

echo
echo "Lambda cold start under the RIE (linux/amd64), median of $n; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-9s %10s %6s %9s %6s %10s %6s %9s %6s\n' function size_B x init_ms x invoke_ms x total_ms x
for fn in "${functions[@]}"; do
  awk -v f="$fn" -v s="${size[$fn]}" -v s0="${size[hello]}" -v i="${init[$fn]}" -v i0="${init[hello]}" \
      -v d="${inv[$fn]}" -v d0="${inv[hello]}" -v t="${tot[$fn]}" -v t0="${tot[hello]}" '
    function x(a, b) { return b > 0 ? a / b : 0 }
    BEGIN { printf "%-9s %10d %6.2f %9.2f %6.2f %10.2f %6.2f %9.2f %6.2f\n", f, s, x(s, s0), i, x(i, i0), d, x(d, d0), t, x(t, t0) }'
done
echo "x: ratio to hello (targets: size and init <= 2x). init: start-up to the first /next (INIT REPORT);"
echo "invoke: the first handler run (INVOKE RTDONE); total: the cold request (REPORT Duration, init + invoke)."
echo "purge's invoke includes a DynamoDB call failing against a dead endpoint."

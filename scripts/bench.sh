#!/usr/bin/env bash
# `make bench`: the Go benchmarks (ns/op, B/op, custom metrics), then the
# local server's whole approval cycles per second at 1 and 16 concurrent
# clients (cmd/agentgate BenchmarkRunDecisionCycleClients, embedded store)
# and their ratio (issue #15 goal: >= 4x from the store's group commit).
# Figures depend on the machine's load; compare runs on the same machine.
#   scripts/bench.sh [go test -bench regexp]   # default: every benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"; trap 'rm -f "$out"' EXIT
go test -run '^$' -bench "${1:-.}" -benchmem ./... | tee "$out"
awk '/^BenchmarkRunDecisionCycleClients\/clients=/ {
    split($1, a, "="); n = a[2]; sub(/-[0-9]+$/, "", n)
    for (i = 2; i < NF; i++) if ($(i+1) == "cycles/s") c[n] = $i
  }
  END {
    if (!("1" in c) || !("16" in c)) exit
    printf "\nlocal server (embedded store), whole cycles/s: 1 client %.1f, 16 clients %.1f, ratio %.2fx (goal >= 4x); load average %s\n", c["1"], c["16"], c["16"] / c["1"], load
  }' load="$(cut -d' ' -f1-3 /proc/loadavg)" "$out"

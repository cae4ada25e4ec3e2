#!/usr/bin/env bash
# `make bench`: the Go benchmarks (ns/op, B/op, custom metrics), then the
# local server's whole approval cycles per second at 1 and 16 concurrent
# clients (cmd/agentgate BenchmarkRunDecisionCycleClients, embedded store)
# and their ratio (issue #15 goal: >= 4x from the store's group commit),
# for clients that poll every millisecond (conditionally: If-None-Match,
# 304 while the run is unchanged) and for clients that wait on the
# server (GET /runs/{id}?after_version=N&wait=S).
# Figures depend on the machine's load; compare runs on the same machine.
#   scripts/bench.sh [go test -bench regexp]   # default: every benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"; trap 'rm -f "$out"' EXIT
go test -run '^$' -bench "${1:-.}" -benchmem ./... | tee "$out"
awk '/^BenchmarkRunDecisionCycleClients\/waiting=[a-z]+\/clients=/ {
    split($1, p, "/"); w = p[2]; sub(/^waiting=/, "", w)
    split(p[3], a, "="); n = a[2]; sub(/-[0-9]+$/, "", n)
    for (i = 2; i < NF; i++) if ($(i+1) == "cycles/s") c[w, n] = $i
  }
  END {
    printf "\nlocal server (embedded store), whole cycles/s at 1 and 16 clients (issue #15 goal: >= 4x); load average %s\n", load
    split("poll server", ws, " ")
    for (k = 1; k <= 2; k++) {
      w = ws[k]
      if (!((w, "1") in c) || !((w, "16") in c)) continue
      printf "  clients that %-34s 1 client %.1f, 16 clients %.1f, ratio %.2fx\n", (w == "poll" ? "poll GET /runs/{id} every ms:" : "wait on it (after_version, wait):"), c[w, "1"], c[w, "16"], c[w, "16"] / c[w, "1"]
    }
  }' load="$(cut -d' ' -f1-3 /proc/loadavg)" "$out"

#!/usr/bin/env bash
# The fuzz tier (`make fuzz`, called by .ci/run with FUZZTIME=10s): runs every
# native Go fuzz target (func Fuzz* in a _test.go file) for FUZZTIME each
# (default 60s), one `go test -fuzz` per target (Go fuzzes one target per
# invocation), and prints the executions of each.
#
# Targets are listed, never named here: the packages whose tests declare a
# Fuzz function are found with git grep, and each package's targets with
# `go test -list '^Fuzz'`, so a new target is fuzzed without touching this
# script. FUZZ_PACKAGES (space-separated import paths or ./dirs) narrows the
# packages, FUZZ_MATCH (a regexp) the targets.
#
# A target that fails leaves the failing input under the package's
# testdata/fuzz/<Target>/ (printed by go test): fix the defect, keep the file
# as a regression seed (the unit tier replays it), and commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-60s}"
FUZZ_MATCH="${FUZZ_MATCH:-.}"
# How long each new interesting input may be minimized (go test's default,
# 60s, can take a whole run's time); FUZZ_PARALLEL: workers per target (go
# test's default is GOMAXPROCS).
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"
parallel=()
[ -z "${FUZZ_PARALLEL:-}" ] || parallel=(-parallel "$FUZZ_PARALLEL")

if [ -n "${FUZZ_PACKAGES:-}" ]; then
  read -r -a pkgs <<<"$FUZZ_PACKAGES"
else
  mapfile -t pkgs < <(git grep -l -E '^func Fuzz[A-Z0-9_]' -- '*_test.go' ':!infra/' | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
fi
if [ ${#pkgs[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

targets=()
for pkg in "${pkgs[@]}"; do
  while read -r name; do
    [[ "$name" =~ ^Fuzz ]] && [[ "$name" =~ $FUZZ_MATCH ]] && targets+=("$pkg $name")
  done < <(go test -list '^Fuzz' "$pkg")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz target matches $FUZZ_MATCH" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each"

results=()
failed=0
flaked=0
total=0
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "== fuzz $pkg $name ($FUZZTIME)"
  log=$(mktemp)
  status=ok
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"; then
    after=$(ls "$corpus" 2>/dev/null | sort || true)
    if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log"; then
      # Go's fuzz coordinator before 1.27 can fail a target with a bare
      # "context deadline exceeded" at the -fuzztime boundary when a worker
      # is slow to stop (https://go.dev/issue/75804), writing no input: not
      # a finding. A real failure always writes its input to testdata/fuzz.
      status="ok (go.dev/issue/75804 stop race, no failing input)"
      flaked=$((flaked + 1))
    else
      status=FAILED
      failed=$((failed + 1))
    fi
  fi
  # The coordinator's last progress line has the total executions.
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  rm -f "$log"
  total=$((total + ${execs:-0}))
  results+=("$(printf '%-34s %-28s %12s  %s' "$pkg" "$name" "${execs:-?}" "$status")")
done

echo
echo "fuzz results ($FUZZTIME per target)"
printf '%-34s %-28s %12s  %s\n' package target executions result
printf '%s\n' "${results[@]}"
echo "total executions: $total"
[ "$flaked" -eq 0 ] || echo "fuzz: $flaked target(s) hit Go's fuzztime stop race (go.dev/issue/75804; fixed in Go 1.27) and wrote no failing input"
if [ "$failed" -gt 0 ]; then
  echo "fuzz: $failed target(s) failed; the failing inputs are in testdata/fuzz/ of their packages" >&2
  exit 1
fi

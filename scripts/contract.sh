#!/usr/bin/env bash
# Third-party checks of openapi.yaml, with the npm tools pinned in
# tools/contract/package-lock.json (installed here with `npm ci`):
#   scripts/contract.sh lint    Redocly CLI lints the spec (part of `make lint`)
#   scripts/contract.sh prism   the end-to-end story once through Stoplight Prism in
#                               validating proxy mode (--errors) in front of `agentgate serve`
#   scripts/contract.sh         both
# Without npm the checks are skipped with a message, except under CI=true,
# where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=tools/contract
export SCARF_ANALYTICS=false DO_NOT_TRACK=1 NO_COLOR=1 REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

need_npm() {
  if command -v npm >/dev/null 2>&1; then return 0; fi
  if [ "${CI:-}" = "true" ]; then echo "contract: npm is required (apt-get install npm)"; exit 1; fi
  echo "contract: npm not found; skipping the spec's third-party checks"; exit 0
}

install_tools() {
  # npm ci reinstalls from the lock file; skip it when node_modules was
  # installed from this very lock file.
  if cmp -s "$tools/package-lock.json" "$tools/node_modules/.agentgate-installed-lock" 2>/dev/null; then
    return 0
  fi
  echo "== contract: npm ci ($tools)"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$tools/package-lock.json" "$tools/node_modules/.agentgate-installed-lock"
}

lint() {
  echo "== contract: redocly lint openapi.yaml"
  "$tools/node_modules/.bin/redocly" lint --config "$tools/redocly.yaml" --format=stylish openapi.yaml
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

prism() {
  echo "== contract: the story through Prism (validating proxy, --errors)"
  local work; work=$(mktemp -d)
  local pids=()
  cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
  }
  trap cleanup RETURN
  go build -o "$work/agentgate" ./cmd/agentgate
  local alice=alice-contract-token-0123 bob=bob-contract-token-01234
  "$work/agentgate" serve --addr 127.0.0.1:0 --dir "$work/serve" --token "alice=$alice" --token "bob=$bob" --sweep-every 1h \
    >"$work/serve.log" 2>&1 &
  pids+=($!)
  local upstream=""
  for _ in $(seq 1 100); do
    upstream=$(grep -o 'agentgate serving on http://[0-9.:]*' "$work/serve.log" | awk '{print $NF}' || true)
    [ -n "$upstream" ] && break
    sleep 0.1
  done
  [ -n "$upstream" ] || { cat "$work/serve.log"; echo "contract: serve did not start"; return 1; }
  local port; port=$(free_port)
  "$tools/node_modules/.bin/prism" proxy openapi.yaml "$upstream" --errors --host 127.0.0.1 --port "$port" >"$work/prism.log" 2>&1 &
  pids+=($!)
  local proxy="http://127.0.0.1:$port"
  for _ in $(seq 1 300); do
    grep -q 'Prism is listening' "$work/prism.log" && break
    sleep 0.1
  done
  grep -q 'Prism is listening' "$work/prism.log" || { cat "$work/prism.log"; echo "contract: prism did not start"; return 1; }

  local ag="$work/agentgate" fail=0
  export AGENTGATE_ENDPOINT="$proxy"
  step() { echo "-- $*"; }
  json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
  # The story runs in a subshell under set -e, called where set -e holds
  # (not as the left side of || or inside if, which would switch it off
  # for every command of the story): any command that fails ends it.
  set +e
  (
    set -e
    step "start a run and wait until it needs a decision"
    local run; run=$("$ag" runs start --token "$alice" --prompt "Update the Team price to 12 EUR." --approver bob --approver ops@example.com \
      --meta ticket=OPS-12 --wait --json)
    local id digest
    id=$(echo "$run" | json 'd["id"]'); digest=$(echo "$run" | json 'd["pending"]["turn_digest"]')
    step "the approver reviews the held turn"
    "$ag" approvals show "$id" --token "$bob"
    step "an out-of-date digest is refused (409)"
    if "$ag" approvals approve "$id" --token "$bob" --digest "$(printf '0%.0s' $(seq 64))"; then echo "a stale digest was accepted"; exit 1; fi
    step "approve exactly the turn shown"
    "$ag" approvals approve "$id" --token "$bob" --digest "$digest"
    "$ag" runs wait "$id" --token "$alice" --status COMPLETED
    "$ag" runs events "$id" --token "$alice"
    step "a conditional GET of the unchanged run: 304 with its ETag"
    local etag
    etag=$(curl -s -D - -o /dev/null -H "Authorization: Bearer $alice" "$proxy/runs/$id" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" { print $2 }')
    if [ -z "$etag" ]; then echo "GET /runs/$id has no ETag"; exit 1; fi
    local cond; cond=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $alice" -H "If-None-Match: $etag" "$proxy/runs/$id")
    if [ "$cond" != 304 ]; then echo "a GET with If-None-Match: $etag answered $cond, want 304"; exit 1; fi
    step "errors: unknown run, a caller who is not a party, a bad token"
    if "$ag" runs get nope --token "$alice"; then echo "an unknown run was answered"; exit 1; fi
    if "$ag" runs get "$id" --token not-a-token-of-this-server; then echo "a bad token was answered"; exit 1; fi
    step "the same through the approval link: page, HEAD, form"
    local second link
    second=$("$ag" runs start --token "$alice" --prompt "And the Starter plan." --approver ops@example.com --wait --json)
    digest=$(echo "$second" | json 'd["pending"]["turn_digest"]')
    for _ in $(seq 1 50); do
      link=$(grep -o 'approval link for ops@example.com: [^ ]*' "$work/serve.log" | tail -1 | awk '{print $NF}' || true)
      [ -n "$link" ] && [ "$(grep -c 'approval link for ops@example.com' "$work/serve.log")" -ge 2 ] && break
      sleep 0.1
    done
    link="$proxy${link#"$upstream"}"
    test "$(curl -s -o /dev/null -w '%{http_code}' "$link")" = 200
    test "$(curl -s -o /dev/null -w '%{http_code}' -I "$link")" = 200
    test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/x-www-form-urlencoded' \
      --data "digest=$digest&action=approve" "$link")" = 200
    test "$(curl -s -o /dev/null -w '%{http_code}' "$link")" = 409
    "$ag" runs wait "$(echo "$second" | json 'd["id"]')" --token "$alice" --status COMPLETED >/dev/null
    step "Prism refuses a request the spec refuses (so it is validating)"
    test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $alice" -H 'Content-Type: application/json' \
      --data '{"prompt":"x","approvers":["bob"],"colour":"red"}' "$proxy/runs")" = 422
  )
  local story_rc=$?
  set -e
  [ "$story_rc" = 0 ] || { echo "contract: a step of the story failed (exit $story_rc)"; fail=1; }
  # Every exchange but the deliberate one must have passed Prism's checks.
  local violations
  violations=$(grep -iE 'violation|✖' "$work/prism.log" | grep -vc 'post /runs ✖  error     Request terminated with error: https://stoplight.io/prism/errors#UNPROCESSABLE_ENTITY' || true)
  if [ "$fail" != 0 ] || [ "$violations" != 0 ]; then
    echo "contract: the story through Prism failed (violations: $violations); Prism's log:"
    cat "$work/prism.log"
    return 1
  fi
  echo "contract: $(grep -c 'Request received' "$work/prism.log") requests through Prism, no violation"
}

need_npm
install_tools
case "${1:-all}" in
  lint) lint ;;
  prism) prism ;;
  all) lint; prism ;;
  *) echo "usage: scripts/contract.sh [lint|prism]"; exit 2 ;;
esac

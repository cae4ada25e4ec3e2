#!/usr/bin/env bash
# Start or stop a moto server on the port of AWS_ENDPOINT_URL (default :4566),
# the AWS emulator used by CI and `make test`; MOTO_PORT overrides the port.
#   scripts/moto.sh start   # no-op when something already answers on the port
#   scripts/moto.sh stop    # stops only a server this script started
set -euo pipefail
endpoint="${AWS_ENDPOINT_URL:-http://localhost:4566}"
endpoint_port() { local p="${endpoint##*:}"; p="${p%%/*}"; [[ "$p" =~ ^[0-9]+$ ]] && echo "$p" || echo 4566; }
PORT="${MOTO_PORT:-$(endpoint_port)}"
STATE_DIR="${TMPDIR:-/tmp}/agentgate-moto-$PORT"
PIDFILE="$STATE_DIR/pid"
LOG="$STATE_DIR/moto.log"

up() { curl -fsS -o /dev/null "http://localhost:$PORT/moto-api/" 2>/dev/null || curl -fsS -o /dev/null "http://localhost:$PORT/_localstack/health" 2>/dev/null; }

case "${1:-}" in
start)
  if up; then echo "moto.sh: an emulator already answers on :$PORT"; exit 0; fi
  command -v moto_server >/dev/null || { echo "moto.sh: moto_server not found (pip install 'moto[server]==5.2.1')" >&2; exit 1; }
  mkdir -p "$STATE_DIR"
  nohup moto_server -H 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 100); do up && { echo "moto.sh: moto server up on :$PORT (pid $(cat "$PIDFILE"))"; exit 0; }; sleep 0.2; done
  echo "moto.sh: moto server did not start; log:" >&2; cat "$LOG" >&2; exit 1 ;;
stop)
  # moto keeps its state in memory only, so SIGKILL loses nothing: its
  # SIGTERM handler exits through sys.exit, which waits on the server's
  # threads, and the busiest of make test's three took over 10 s to go in
  # every run of 6 December (1.6 s for an idle one), at the end of make test.
  if [ -f "$PIDFILE" ]; then
    pid="$(cat "$PIDFILE")"
    # What the emulator cost: its CPU time ([dd-]hh:mm:ss), for the test
    # tiers' figures (docs/performance.md).
    cpu="$(ps -o time= -p "$pid" 2>/dev/null | tr -d ' ' || true)"
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$PIDFILE"; echo "moto.sh: stopped${cpu:+ (it had used $cpu of CPU)}"
  fi ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

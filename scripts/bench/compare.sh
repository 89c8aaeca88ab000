#!/usr/bin/env bash
# Benchmark (not a test): the Task API's authenticated list (a user with 10 tasks) beside the
# Node.js peer in ../shared/bench (compare-api.sh), interleaved in one run. Prints the ratio.
# ROUNDS (default 3) rounds of wrk -t2 -c64 -d10s each. SQLite by default, DATABASE=postgres too.
source "$(dirname "$0")/../lib.sh"
bench_setup
PEER=${PEER:-$ROOT/../shared/bench/compare-api.sh}
[ -x "$PEER" ] || [ -f "$PEER" ] || { echo "no peer benchmark at $PEER" >&2; exit 1; }
TOKEN=$(bench_seed "$WORK/data" "$PORT" "$API_PORT" "$CLIENT" "$TENANT" "${DB_ARGS[@]}")
log "the Task API's list beside the Node.js peer"
bash "$PEER" "http://127.0.0.1:$API_PORT/api/tasks" "$TOKEN" "${ROUNDS:-3}"

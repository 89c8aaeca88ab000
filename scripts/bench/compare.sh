#!/usr/bin/env bash
# Benchmark (not a test): the Task API's authenticated list (a user with 10 tasks) beside the
# Node.js peer in ../shared/bench (compare-api.sh), interleaved in one run. Prints the ratio.
# ROUNDS (default 3) rounds of wrk -t2 -c64 -d10s each. SQLite by default, DATABASE=postgres too.
source "$(dirname "$0")/../lib.sh"
bench_setup
PEER=${PEER:-$ROOT/../shared/bench/compare-api.sh}
[ -x "$PEER" ] || [ -f "$PEER" ] || { echo "no peer benchmark at $PEER" >&2; exit 1; }
echo 'Bench-Passw0rd' | "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email bench@example.com --name Bench --password-stdin >/dev/null
TOKEN=$(curl -fs "http://127.0.0.1:$PORT/$TENANT/B2C_1_ROPC/oauth2/v2.0/token" -d grant_type=password -d client_id="$CLIENT" \
  -d username=bench@example.com -d password=Bench-Passw0rd -d "scope=openid $CLIENT" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
for i in $(seq 1 10); do
  curl -fs -o /dev/null -X POST "http://127.0.0.1:$API_PORT/api/tasks" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d "{\"title\":\"task $i\"}"
done
log "the Task API's list beside the Node.js peer"
bash "$PEER" "http://127.0.0.1:$API_PORT/api/tasks" "$TOKEN" "${ROUNDS:-3}"

#!/usr/bin/env bash
# Benchmark (not a test): the authenticated task list (a user with 10 tasks) beside a bare route
# of the same server (/healthz, a constant) in the same run with the same connections (64) and
# threads (2); then task creation. SQLite by default, DATABASE=postgres for PostgreSQL.
source "$(dirname "$0")/../lib.sh"
bench_setup
echo 'Bench-Passw0rd' | "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email bench@example.com --name Bench --password-stdin >/dev/null
TOKEN=$(curl -fs "http://127.0.0.1:$PORT/$TENANT/B2C_1_ROPC/oauth2/v2.0/token" -d grant_type=password -d client_id="$CLIENT" \
  -d username=bench@example.com -d password=Bench-Passw0rd -d "scope=openid $CLIENT" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
for i in $(seq 1 10); do
  curl -fs -o /dev/null -X POST "http://127.0.0.1:$API_PORT/api/tasks" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d "{\"title\":\"task $i\"}"
done

log "bare route (GET /healthz) — the baseline"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$API_PORT/healthz" | tee "$WORK/bare.txt"
log "authenticated list (GET /api/tasks, 10 tasks)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$API_PORT/api/tasks" | tee "$WORK/list.txt"
log "task creation (POST /api/tasks)"
TOKEN="$TOKEN" wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s scripts/bench/create.lua \
  "http://127.0.0.1:$API_PORT" | tee "$WORK/create.txt"

rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
python3 - "$(rps "$WORK/bare.txt")" "$(rps "$WORK/list.txt")" "$(rps "$WORK/create.txt")" <<'PY'
import sys
bare, listed, created = map(float, sys.argv[1:])
print(f"bare route {bare:.0f}/s; authenticated list {listed:.0f}/s = {listed / bare * 100:.0f}% of the bare route; creates {created:.0f}/s")
PY
grep -E "50%|99%" "$WORK/list.txt" | sed 's/^/list latency /'
echo "peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"

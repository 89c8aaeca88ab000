#!/usr/bin/env bash
# Benchmark (not a test): the authenticated task list (a user with 10 tasks) beside a bare route
# of the same server (/healthz, a constant) in the same run with the same connections (64) and
# threads (2); the tutorials' unpaged list (GET /tasks, the same 10 tasks); then task creation.
# SQLite by default, DATABASE=postgres for PostgreSQL.
source "$(dirname "$0")/../lib.sh"
bench_setup
TOKEN=$(bench_seed "$WORK/data" "$PORT" "$API_PORT" "$CLIENT" "$TENANT" "${DB_ARGS[@]}")

log "bare route (GET /healthz) — the baseline"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$API_PORT/healthz" | tee "$WORK/bare.txt"
log "authenticated list (GET /api/tasks, 10 tasks)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$API_PORT/api/tasks" | tee "$WORK/list.txt"
log "the tutorials' list (GET /tasks, the same 10 tasks, unpaged)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$API_PORT/tasks" | tee "$WORK/tutorial.txt"
log "task creation (POST /api/tasks)"
TOKEN="$TOKEN" wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s scripts/bench/create.lua \
  "http://127.0.0.1:$API_PORT" | tee "$WORK/create.txt"

rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
python3 - "$(rps "$WORK/bare.txt")" "$(rps "$WORK/list.txt")" "$(rps "$WORK/tutorial.txt")" "$(rps "$WORK/create.txt")" <<'PY'
import sys
bare, listed, tutorial, created = map(float, sys.argv[1:])
print(f"bare route {bare:.0f}/s; authenticated list {listed:.0f}/s = {listed / bare * 100:.0f}% of the bare route; "
      f"the tutorials' /tasks list {tutorial:.0f}/s = {tutorial / bare * 100:.0f}%; creates {created:.0f}/s")
PY
grep -E "50%|99%" "$WORK/list.txt" | sed 's/^/list latency /'
echo "peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"

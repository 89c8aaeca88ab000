#!/usr/bin/env bash
# Benchmark (not a test): the authenticated task list (a user with 10 tasks) on PostgreSQL beside
# the same list on SQLite, in one run: two servers, one per engine, each seeded alike, measured
# in ROUNDS interleaved rounds (default 5, DURATION 8 s each, wrk -t2 -c64, a 2 s warm-up).
# Prints the medians of the rates and of each server's CPU time per request, and the ratio
# (issue 13: PostgreSQL at ≥ 60% of SQLite).
source "$(dirname "$0")/../lib.sh"
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8}
bench_build
PIDS=()
trap 'set +e; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; stop_postgres; rm -rf "$WORK"' EXIT
start_postgres "$WORK/pg"

# start ENGINE [DB ARGS...]: a seeded server; sets ENGINE_API, ENGINE_TOKEN, ENGINE_PID.
start() {
  local engine=$1 port api_port client tenant token
  shift
  port=$(free_port)
  api_port=$(free_port)
  "$SERVER" serve --data-dir "$WORK/$engine" --identity-port "$port" --api-port "$api_port" --log-level "${LOG_LEVEL:-info}" "$@" \
    >"$WORK/$engine.log" 2>&1 &
  PIDS+=($!)
  eval "${engine}_PID=$!"
  wait_for_url "http://127.0.0.1:$api_port/healthz" 60
  client=$(python3 -c "import json;print(json.load(open('$WORK/$engine/settings.json'))['clientId'])")
  tenant=$(python3 -c "import json;print(json.load(open('$WORK/$engine/settings.json'))['tenant'])")
  token=$(bench_seed "$WORK/$engine" "$port" "$api_port" "$client" "$tenant" "$@")
  eval "${engine}_API=http://127.0.0.1:$api_port/api/tasks ${engine}_TOKEN=$token"
}
log "servers: SQLite, and PostgreSQL"
start sqlite
start postgres --database-url "$PG_URL"

: >"$WORK/results"
run_one() {  # $1 = engine
  local url token pid before after requests rate
  eval "url=\$${1}_API token=\$${1}_TOKEN pid=\$${1}_PID"
  wrk -t2 -c64 -d2s -H "Authorization: Bearer $token" "$url" >/dev/null
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  wrk -t2 -c64 -d"${DURATION}s" --latency -H "Authorization: Bearer $token" "$url" >"$WORK/wrk.txt"
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  grep -q "Non-2xx" "$WORK/wrk.txt" && { echo "$1: non-2xx answers" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  rate=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  echo "$1 $rate $(python3 -c "print(($after - $before) / $(getconf CLK_TCK) * 1e6 / $requests)") $(awk '$1 == "99%" {print $2}' "$WORK/wrk.txt")" |
    tee -a "$WORK/results"
}
for round in $(seq 1 "$ROUNDS"); do
  log "round $round of $ROUNDS"
  if [ $((round % 2)) = 1 ]; then run_one sqlite; run_one postgres; else run_one postgres; run_one sqlite; fi
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(engine, column): return statistics.median(float(r[column]) for r in rows if r[0] == engine)
sqlite, postgres = median("sqlite", 1), median("postgres", 1)
print(f"list on SQLite {sqlite:.0f}/s ({median('sqlite', 2):.0f} µs server CPU per request); "
      f"on PostgreSQL {postgres:.0f}/s ({median('postgres', 2):.0f} µs)")
print(f"PostgreSQL's list = {postgres / sqlite * 100:.0f}% of SQLite's (median of {len(rows) // 2} interleaved rounds)")
PY

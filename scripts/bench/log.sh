#!/usr/bin/env bash
# Benchmark (not a test): what the access log costs. The bare route (GET /healthz) on a server at
# the default log level (info: one line per request) beside the same route on a server at
# warning (no request lines), ROUNDS rounds interleaved (default 5, DURATION 6 s each), each
# on a fresh server. Prints the medians of both rates and of the server's CPU time per request
# (utime + stime from /proc, less noisy than the rate when wrk shares the cores), and the cost.
source "$(dirname "$0")/../lib.sh"
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-6}
bench_build
PID=
trap 'set +e; [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
: >"$WORK/results"
run_one() {  # $1 = log level
  rm -rf "$WORK/data"
  local port api_port
  port=$(free_port)
  api_port=$(free_port)
  "$SERVER" serve --data-dir "$WORK/data" --identity-port "$port" --api-port "$api_port" --log-level "$1" >"$WORK/server.log" 2>&1 &
  PID=$!
  wait_for_url "http://127.0.0.1:$api_port/healthz" 60
  wrk -t2 -c64 -d2s "http://127.0.0.1:$api_port/healthz" >/dev/null  # warm-up
  local before after
  before=$(awk '{print $14 + $15}' "/proc/$PID/stat")
  wrk -t2 -c64 -d"${DURATION}s" "http://127.0.0.1:$api_port/healthz" >"$WORK/wrk.txt"
  after=$(awk '{print $14 + $15}' "/proc/$PID/stat")
  kill "$PID"
  wait "$PID" 2>/dev/null
  PID=
  local requests rate
  requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  rate=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  local ticks
  ticks=$(getconf CLK_TCK)
  echo "$1 $rate $(python3 -c "print(($after - $before) / $ticks * 1e6 / $requests)")" | tee -a "$WORK/results"
}
for round in $(seq 1 "$ROUNDS"); do
  log "round $round of $ROUNDS"
  if [ $((round % 2)) = 1 ]; then run_one info; run_one warning; else run_one warning; run_one info; fi
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(level, column): return statistics.median(float(r[column]) for r in rows if r[0] == level)
on_rate, off_rate = median("info", 1), median("warning", 1)
on_cpu, off_cpu = median("info", 2), median("warning", 2)
print(f"bare route with the access log {on_rate:.0f}/s, without {off_rate:.0f}/s: the log costs {(1 - on_rate / off_rate) * 100:.1f}% of the rate")
print(f"server CPU per request with the log {on_cpu:.1f} µs, without {off_cpu:.1f} µs: the log costs {(on_cpu / off_cpu - 1) * 100:.1f}% more CPU")
PY

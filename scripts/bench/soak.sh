#!/usr/bin/env bash
# Benchmark (not a test): memory over a long load. Idle RSS after start, then DURATION seconds
# (default 600) of the Task API's list with a create every 20th request (wrk -t2 -c64), RSS
# sampled every 10 s. Prints idle RSS, RSS after the first minute (warm-up), at the end, the
# peak, and the slope after warm-up (a least-squares fit, MB per 10 minutes): flat is near 0.
#
#   scripts/bench/soak.sh                  # 10 minutes, SQLite
#   DURATION=120 DATABASE=postgres scripts/bench/soak.sh
source "$(dirname "$0")/../lib.sh"
DURATION=${DURATION:-600}
bench_setup
sleep 3
IDLE=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
echo "idle RSS after start: $((IDLE / 1024)) MB ($IDLE kB)"
echo 'Bench-Passw0rd' | "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email bench@example.com --name Bench --password-stdin >/dev/null
TOKEN=$(curl -fs "http://127.0.0.1:$PORT/$TENANT/B2C_1_ROPC/oauth2/v2.0/token" -d grant_type=password -d client_id="$CLIENT" \
  -d username=bench@example.com -d password=Bench-Passw0rd -d "scope=openid $CLIENT" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
log "mixed load for ${DURATION}s, RSS every 10 s"
TOKEN="$TOKEN" wrk -t2 -c64 -d"${DURATION}s" -s scripts/bench/mixed.lua "http://127.0.0.1:$API_PORT" >"$WORK/wrk.txt" &
WRK=$!
: >"$WORK/rss"
START=$(date +%s)
while kill -0 "$WRK" 2>/dev/null; do
  sleep 10
  echo "$(($(date +%s) - START)) $(awk '/VmRSS/ {print $2}' "/proc/$PID/status")" >>"$WORK/rss"
done
grep -E "Requests/sec|requests in|Non-2xx" "$WORK/wrk.txt"
python3 - "$WORK/rss" <<'PY'
import sys
samples = [tuple(map(int, line.split())) for line in open(sys.argv[1]) if line.strip()]
warm = [(t, kb) for t, kb in samples if t >= 60]
print("RSS samples (s: MB):", " ".join(f"{t}:{kb / 1024:.1f}" for t, kb in samples))
if len(warm) >= 2:
    n = len(warm)
    mt = sum(t for t, _ in warm) / n
    mk = sum(kb for _, kb in warm) / n
    slope = sum((t - mt) * (kb - mk) for t, kb in warm) / sum((t - mt) ** 2 for t, _ in warm)
    print(f"after warm-up {warm[0][1] / 1024:.1f} MB, at the end {warm[-1][1] / 1024:.1f} MB, "
          f"peak {max(kb for _, kb in samples) / 1024:.1f} MB, slope {slope * 600 / 1024:+.2f} MB per 10 minutes")
PY

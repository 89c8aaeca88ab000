#!/usr/bin/env bash
# Benchmark (not a test): refresh-token grants per second against `todo-server serve` on SQLite
# (or PostgreSQL with DATABASE_URL=postgres://…), beside the machine's RSA-2048 signing rate
# measured in the same run; then ROPC sign-ins per second at the default bcrypt cost beside the
# hash-bound limit, with discovery latency measured under that load.
#
#   scripts/bench/token.sh            # release build, SQLite, 3 interleaved refresh rounds
#   ROUNDS=5 DURATION=20 CONNECTIONS=64 scripts/bench/token.sh
source "$(dirname "$0")/../lib.sh"
COST=${COST:-10}
CORES=$(nproc)
bench_setup --password-hash-cost "$COST"
BASE="http://127.0.0.1:$PORT"
TOKEN_PATH="/$TENANT/B2C_1_ROPC/oauth2/v2.0/token"
PASSWORD='Bench-Passw0rd'

# The refresh load and its baselines run in ROUNDS interleaved rounds (default 3), each with fresh
# tokens: a VM's rates swing between runs, so one pair of measurements could land the signing
# limit on a fast moment and the grants on a slow one. Medians are reported.
ROUNDS=${ROUNDS:-3}
USERS=16
for i in $(seq 1 $USERS); do
  echo "$PASSWORD" | "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email "bench$i@example.com" --name "Bench $i" --password-stdin >/dev/null
done
: >"$WORK/rounds"
for round in $(seq 1 "$ROUNDS"); do
  log "round $round of $ROUNDS: RSA-2048 signatures per second on one core (openssl speed, and the server's own signer)"
  SIGNS=$(openssl speed -seconds 3 rsa2048 2>/dev/null | awk '/^rsa 2048/ {print $6}')
  # The server signs with OpenSSL 3 where it can load it, else swift-crypto (RS256Signer): on a
  # CPU where the two differ, this says which the server got and what it allows.
  "$SERVER" crypto-cost --cost "$COST" --count 20 | tee "$WORK/crypto.txt"
  OWN_SIGNS=$(awk '/RS256 signatures per second/ {print $1}' "$WORK/crypto.txt")
  echo "openssl: $SIGNS signs/s per core; the server's signer: $OWN_SIGNS; $CORES cores; each refresh signs 2 JWTs"

  log "round $round: seeding $((CONNECTIONS * 2)) refresh tokens"
  : >"$WORK/tokens"
  for i in $(seq 1 $((CONNECTIONS * 2))); do
    curl -fs "$BASE$TOKEN_PATH" -d grant_type=password -d client_id="$CLIENT" -d "username=bench$(( (i % USERS) + 1 ))@example.com" \
      -d "password=$PASSWORD" -d "scope=openid offline_access $CLIENT" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["refresh_token"])' >>"$WORK/tokens"
  done

  log "round $round: refresh-token grants: wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s"
  TICKS_BEFORE=$(awk '{print $14 + $15}' "/proc/$PID/stat")
  TOKENS_FILE="$WORK/tokens" TOKEN_PATH="$TOKEN_PATH" CLIENT_ID="$CLIENT" THREADS=$THREADS \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s scripts/bench/refresh.lua "$BASE" | tee "$WORK/refresh.txt"
  TICKS_AFTER=$(awk '{print $14 + $15}' "/proc/$PID/stat")
  RPS=$(awk '/^Requests\/sec/ {print $2}' "$WORK/refresh.txt")
  CPU=$(python3 -c "print(($TICKS_AFTER - $TICKS_BEFORE) / $(getconf CLK_TCK) / $DURATION)")
  echo "$SIGNS $OWN_SIGNS $RPS $CPU" >>"$WORK/rounds"
  python3 -c "print(f'round $round: refresh grants/s {float(\"$RPS\"):.0f} = {float(\"$RPS\") / ($SIGNS * $CORES / 2) * 100:.0f}% of this round\'s signing limit')"
done
python3 - "$WORK/rounds" "$CORES" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
cores = int(sys.argv[2])
median = lambda column: statistics.median(row[column] for row in rows)
signs, own, rps, cpu = median(0), median(1), median(2), median(3)
limit, own_limit = signs * cores / 2, own * cores / 2
ratios = sorted(row[2] / (row[0] * cores / 2) * 100 for row in rows)
print(f"openssl: {signs:.0f} signs/s per core → limit {limit:.0f} refreshes/s; the server's signer {own:.0f} → {own_limit:.0f}/s (medians of {len(rows)} rounds)")
print(f"refresh grants/s {rps:.0f} = {rps / limit * 100:.0f}% of the signing limit ({limit:.0f}/s), "
      f"{rps / own_limit * 100:.0f}% of the server signer's ({own_limit:.0f}/s); per round {', '.join(f'{r:.0f}%' for r in ratios)}")
print(f"server CPU during the refresh load: {cpu:.2f} of {cores} cores")
ms = cpu / rps * 1000
sign = 2000 / own
print(f"server CPU per grant: {ms:.2f} ms, of which its 2 signatures {sign:.2f} ms and the rest {ms - sign:.2f} ms")
PY
echo "peak RSS after refresh load: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"

HASH_MS=$(awk '/ms per hash/ {print $1}' "$WORK/crypto.txt")
HASH_LIMIT=$(python3 -c "print(round($CORES * 1000 / $HASH_MS, 1))")
echo "$HASH_MS ms per hash → hash-bound limit $HASH_LIMIT sign-ins/s on $CORES cores"

log "ROPC sign-ins (wrk -t$THREADS -c16), with discovery latency probed at 20 requests/s alongside"
python3 scripts/bench/probe_latency.py "$BASE/$TENANT/B2C_1_susi/v2.0/.well-known/openid-configuration" "$((DURATION - 2))" 20 \
  >"$WORK/discovery.txt" &
PROBE=$!
USERS=$USERS PASSWORD="$PASSWORD" TOKEN_PATH="$TOKEN_PATH" CLIENT_ID="$CLIENT" \
  wrk -t"$THREADS" -c16 -d"${DURATION}s" --latency -s scripts/bench/ropc.lua "$BASE" | tee "$WORK/ropc.txt"
wait $PROBE
ROPC_RPS=$(awk '/^Requests\/sec/ {print $2}' "$WORK/ropc.txt")
python3 -c "print(f'ROPC sign-ins/s {float(\"$ROPC_RPS\"):.1f} = {float(\"$ROPC_RPS\")/$HASH_LIMIT*100:.0f}% of the hash-bound limit ($HASH_LIMIT/s)')"
echo "discovery under ROPC load: $(cat "$WORK/discovery.txt")"
echo "peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"

#!/usr/bin/env bash
# Benchmark (not a test): the server CPU an interactive sign-in costs on a custom policy
# (this project's local-accounts policies, Tests/interop/policies/local, shaped like the starter
# pack's LocalAccounts sign-in) beside the same sign-in on the built-in user flow, and on a policy
# that adds two nested sub-journeys running ten claims transformations
# (Tests/interop/policies/bench/B2C_1A_bench_rich.xml) beside the plain custom one, measured in one
# run in interleaved rounds. bcrypt cost 4 by default, so
# the password hash does not hide the journey's own cost (COST=10 for the production cost).
#
#   scripts/bench/policy.sh
#   BENCH_SERVER=.build/debug/todo-server ROUNDS=3 COUNT=60 scripts/bench/policy.sh
# Keep 3 × ROUNDS × COUNT under 600: one client address starts at most 600 sign-ins an hour (L-4).
source "$(dirname "$0")/../lib.sh"
COST=${COST:-4}
bench_setup --password-hash-cost "$COST"
PASSWORD='Bench-Passw0rd'
echo "$PASSWORD" | TODO_PASSWORD_HASH_COST=$COST "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email bench@example.com --name Bench --password-stdin >/dev/null
mkdir -p "$WORK/policies"
for file in "$ROOT"/Tests/interop/policies/local/*.xml "$ROOT"/Tests/interop/policies/bench/*.xml; do
  sed "s/TENANT/$TENANT/g" "$file" >"$WORK/policies/$(basename "$file")"
done
"$SERVER" policies keys create TokenSigningKeyContainer --data-dir "$WORK/data" "${DB_ARGS[@]}" >/dev/null
"$SERVER" policies keys generate TokenSigningKeyContainer --data-dir "$WORK/data" "${DB_ARGS[@]}" >/dev/null
"$SERVER" policies upload "$WORK/policies" --data-dir "$WORK/data" "${DB_ARGS[@]}" >/dev/null
log "interactive sign-ins: B2C_1_susi (built-in), B2C_1A_test_susi (custom policy), B2C_1A_bench_rich (sub-journeys, ten transformations), bcrypt cost $COST"
PYTHON=${PYTHON:-$( [ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}  # needs requests
"$PYTHON" "$ROOT/scripts/bench/policy_signin.py" "http://127.0.0.1:$PORT" "$TENANT" "$CLIENT" "$PID" bench@example.com "$PASSWORD" \
  B2C_1_susi,B2C_1A_test_susi,B2C_1A_bench_rich

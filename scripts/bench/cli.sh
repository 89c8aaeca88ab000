#!/usr/bin/env bash
# Benchmark (not a test): `todo list` end to end (process start, settings, token cache, silent
# token, HTTP, output) beside curl doing the same request with the same token, against a local
# release server, timed by hyperfine in the same run. Reports the CLI's mean wall time as a
# ratio to curl's.
source "$(dirname "$0")/../lib.sh"
RUNS=${RUNS:-50}
apt_install hyperfine
bench_setup
log "release build of todo"
swift build -c release --product todo >/dev/null
TODO="$(swift build -c release --show-bin-path)/todo"
export TODO_SETTINGS="$WORK/data/settings.json" TODO_TOKEN_CACHE="$WORK/cache.json" NO_COLOR=1
echo 'Bench-Passw0rd' | "$SERVER" users add --data-dir "$WORK/data" "${DB_ARGS[@]}" --email bench@example.com --name Bench --password-stdin >/dev/null
echo 'Bench-Passw0rd' | "$TODO" login --username bench@example.com --password-stdin >/dev/null
for i in $(seq 1 10); do "$TODO" add "task $i" >/dev/null; done
# The token the CLI holds, for curl (read from the cache the CLI wrote).
TOKEN=$(python3 -c "import json;c=json.load(open('$TODO_TOKEN_CACHE'));print(c['entries'][0]['accessTokens'][0]['token'])")
printf '%s' "Authorization: Bearer $TOKEN" >"$WORK/auth-header"
hyperfine --warmup 5 --runs "$RUNS" --export-json "$WORK/cli.json" \
  -n curl "curl -fs -H @$WORK/auth-header 'http://127.0.0.1:$API_PORT/api/tasks?limit=100'" \
  -n "todo list" "$TODO list"
python3 - "$WORK/cli.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
curl, cli = results["curl"]["mean"], results["todo list"]["mean"]
print(f"curl {curl*1000:.1f} ms, todo list {cli*1000:.1f} ms: the CLI takes {cli/curl:.1f}x curl's wall time")
PY

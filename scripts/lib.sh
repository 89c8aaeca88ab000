# Shared helpers for scripts/test and scripts/bench/*: start and stop a throw-away PostgreSQL
# and the todo-server, as a non-root user where PostgreSQL insists on it.
set -euo pipefail

repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

# log MESSAGE: starts a phase; prints how long the previous one took and the time since the start.
SCRIPT_START=${SCRIPT_START:-$SECONDS}
PHASE_START=$SECONDS
PHASE_NAME=
log() {
  local now=$SECONDS
  if [ -n "$PHASE_NAME" ]; then printf '    (%ss: %s)\n' "$((now - PHASE_START))" "$PHASE_NAME" >&2; fi
  printf '\n==> [%ss] %s\n' "$((now - SCRIPT_START))" "$*" >&2
  PHASE_START=$now
  PHASE_NAME=$*
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  # Installs Debian packages that are missing (CI runs as root on a fresh machine).
  local missing=()
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] || { echo "PostgreSQL binaries not found" >&2; return 1; }
  echo "$dir"
}

# start_postgres DIR: initdb + pg_ctl start in DIR as a non-root user; sets PG_URL, PG_DIR, PG_USER.
start_postgres() {
  apt_install postgresql
  PG_DIR="$1"
  local bin port
  bin=$(pg_bin)
  port=$(free_port)
  PG_USER=$(id -un)
  if [ "$(id -u)" = 0 ]; then PG_USER=postgres; fi
  mkdir -p "$PG_DIR"
  chown "$PG_USER" "$PG_DIR" 2>/dev/null || true
  chmod 700 "$PG_DIR"
  run_pg() { if [ "$(id -u)" = 0 ]; then su -s /bin/sh "$PG_USER" -c "$*"; else sh -c "$*"; fi; }
  run_pg "'$bin/initdb' -D '$PG_DIR/data' -U todo --auth=trust -E UTF8 >'$PG_DIR/initdb.log' 2>&1"
  run_pg "'$bin/pg_ctl' -D '$PG_DIR/data' -l '$PG_DIR/server.log' -w -o \"-p $port -k '$PG_DIR' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1000\" start >/dev/null"
  # $PG_DIR/ctl.sh stop|start: for tests that take the database away and bring it back.
  local as_user="sh -c"
  if [ "$(id -u)" = 0 ]; then as_user="su -s /bin/sh $PG_USER -c"; fi
  cat >"$PG_DIR/ctl.sh" <<CTL
#!/bin/sh
case "\$1" in
  stop) $as_user "'$bin/pg_ctl' -D '$PG_DIR/data' -m fast -w stop" ;;
  start) $as_user "'$bin/pg_ctl' -D '$PG_DIR/data' -l '$PG_DIR/server.log' -w -o \\"-p $port -k '$PG_DIR' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1000\\" start" ;;
esac
CTL
  chmod 755 "$PG_DIR/ctl.sh"
  run_pg "'$bin/createdb' -h 127.0.0.1 -p $port -U todo todo_test"
  PG_URL="postgres://todo@127.0.0.1:$port/todo_test"
  PG_PORT=$port
  export PG_URL PG_DIR PG_USER PG_PORT
}

stop_postgres() {
  [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR/data" ] || return 0
  local bin
  bin=$(pg_bin)
  if [ "$(id -u)" = 0 ]; then
    su -s /bin/sh "$PG_USER" -c "'$bin/pg_ctl' -D '$PG_DIR/data' -m fast stop" >/dev/null 2>&1 || true
  else
    "$bin/pg_ctl" -D "$PG_DIR/data" -m fast stop >/dev/null 2>&1 || true
  fi
}

# wait_for_url URL [seconds]
wait_for_url() {
  local url=$1 limit=${2:-60} i=0
  until curl -fsk -o /dev/null "$url"; do
    i=$((i + 1))
    [ $i -ge $((limit * 5)) ] && { echo "timed out waiting for $url" >&2; return 1; }
    sleep 0.2
  done
}

# bench_seed DATA_DIR PORT API_PORT CLIENT TENANT [DB ARGS...]: for scripts/bench/*: the bench user
# (bench@example.com) with 10 tasks on a running server; prints the user's access token.
bench_seed() {
  local data=$1 port=$2 api_port=$3 client=$4 tenant=$5 token i
  shift 5
  echo 'Bench-Passw0rd' | "$SERVER" users add --data-dir "$data" "$@" --email bench@example.com --name Bench --password-stdin >/dev/null
  token=$(curl -fs "http://127.0.0.1:$port/$tenant/B2C_1_ROPC/oauth2/v2.0/token" -d grant_type=password -d client_id="$client" \
    -d username=bench@example.com -d password=Bench-Passw0rd -d "scope=openid $client" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
  for i in $(seq 1 10); do
    curl -fs -o /dev/null -X POST "http://127.0.0.1:$api_port/api/tasks" -H "Authorization: Bearer $token" \
      -H 'Content-Type: application/json' -d "{\"title\":\"task $i\"}"
  done
  echo "$token"
}

# bench_setup [SERVE ARGS...]: for scripts/bench/*: a release build, a temp dir, PostgreSQL when
# DATABASE=postgres, and todo-server serve on free ports, stopped on exit, from the repository root. Sets
# ROOT, SERVER, WORK, DB_ARGS, PORT (identity), API_PORT, PID, CLIENT (dev client id), TENANT, and
# wrk's DURATION, CONNECTIONS and THREADS (15 s, 64, 2 unless set).
# bench_build: for scripts/bench/*: from the repository root, wrk and curl installed, a release
# build of todo-server (or $BENCH_SERVER) and a temp dir. Sets ROOT, SERVER and WORK.
bench_build() {
  ROOT=$(repo_root)
  cd "$ROOT"
  apt_install wrk openssl curl
  # BENCH_SERVER=/path/to/todo-server measures another build (a copy made before a change) with
  # the same script, for an A/B comparison in one sitting.
  if [ -n "${BENCH_SERVER:-}" ]; then
    # Relative to where the script was started, not the repository root it moved to.
    SERVER=$(cd "$OLDPWD" && realpath "$BENCH_SERVER")
    [ -x "$SERVER" ] || { echo "BENCH_SERVER=$BENCH_SERVER is not an executable file" >&2; exit 1; }
  else
    log "release build"
    swift build -c release --product todo-server >/dev/null
    SERVER=$(swift build -c release --show-bin-path)/todo-server
  fi
  WORK=$(mktemp -d /tmp/todob2c-bench.XXXXXX)
  chmod 755 "$WORK"
}

bench_setup() {
  # wrk's load, the same for every benchmark unless overridden.
  DURATION=${DURATION:-15}
  CONNECTIONS=${CONNECTIONS:-64}
  THREADS=${THREADS:-2}
  bench_build
  PID=
  trap 'set +e; [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; stop_postgres; rm -rf "$WORK"' EXIT
  DB_ARGS=()
  if [ "${DATABASE:-sqlite}" = postgres ]; then
    start_postgres "$WORK/pg"
    DB_ARGS=(--database-url "$PG_URL")
  fi
  PORT=$(free_port)
  API_PORT=$(free_port)
  "$SERVER" serve --data-dir "$WORK/data" --identity-port "$PORT" --api-port "$API_PORT" --log-level "${LOG_LEVEL:-info}" \
    "${DB_ARGS[@]}" "$@" >"$WORK/server.log" 2>&1 &
  PID=$!
  wait_for_url "http://127.0.0.1:$PORT/healthz" 60
  wait_for_url "http://127.0.0.1:$API_PORT/healthz" 60
  CLIENT=$(python3 -c "import json;print(json.load(open('$WORK/data/settings.json'))['clientId'])")
  TENANT=$(python3 -c "import json;print(json.load(open('$WORK/data/settings.json'))['tenant'])")
}

# start_scaleout SERVER WORK DATABASE_URL: two `todo-server serve` instances started at the same
# moment on one PostgreSQL database, each with its own data dir and the same data key, behind
# nginx (round robin). Sets and exports SCALE_* (ports, URLs, pids, data key) for
# Tests/scaleout; the caller stops SCALE_PIDS.
start_scaleout() {
  local server=$1 work=$2 database=$3
  apt_install nginx
  SCALE_DATA_KEY=$(python3 -c 'import base64,secrets; print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("="))')
  SCALE_LB_IDENTITY_PORT=$(free_port)
  SCALE_LB_API_PORT=$(free_port)
  SCALE_A_IDENTITY_PORT=$(free_port)
  SCALE_A_API_PORT=$(free_port)
  SCALE_B_IDENTITY_PORT=$(free_port)
  SCALE_B_API_PORT=$(free_port)
  SCALE_IDENTITY_URL="http://127.0.0.1:$SCALE_LB_IDENTITY_PORT"
  SCALE_API_URL="http://127.0.0.1:$SCALE_LB_API_PORT"
  SCALE_DATABASE_URL=$database
  SCALE_PIDS=()
  local name identity api
  for name in a b; do
    if [ $name = a ]; then identity=$SCALE_A_IDENTITY_PORT api=$SCALE_A_API_PORT; else identity=$SCALE_B_IDENTITY_PORT api=$SCALE_B_API_PORT; fi
    TODO_DATA_KEY=$SCALE_DATA_KEY "$server" serve --data-dir "$work/scale-$name" --database-url "$database" \
      --identity-port "$identity" --api-port "$api" --public-url "$SCALE_IDENTITY_URL" --public-api-url "$SCALE_API_URL" \
      --trusted-proxy 127.0.0.1 --password-hash-cost 4 >"$work/scale-$name.log" 2>&1 &
    SCALE_PIDS+=($!)
  done
  SCALE_A_PID=${SCALE_PIDS[0]}
  SCALE_B_PID=${SCALE_PIDS[1]}
  local nginx_dir="$work/nginx"
  mkdir -p "$nginx_dir/tmp"
  chmod 777 "$nginx_dir/tmp"
  sed -e "s|@DIR@|$nginx_dir|g" -e "s|@A_ID@|$SCALE_A_IDENTITY_PORT|g" -e "s|@B_ID@|$SCALE_B_IDENTITY_PORT|g" \
    -e "s|@A_API@|$SCALE_A_API_PORT|g" -e "s|@B_API@|$SCALE_B_API_PORT|g" -e "s|@LB_ID@|$SCALE_LB_IDENTITY_PORT|g" \
    -e "s|@LB_API@|$SCALE_LB_API_PORT|g" "$(repo_root)/scripts/scaleout-nginx.conf" >"$nginx_dir/nginx.conf"
  nginx -c "$nginx_dir/nginx.conf" -p "$nginx_dir" >"$work/nginx.log" 2>&1 &
  SCALE_PIDS+=($!)
  for port in $SCALE_A_IDENTITY_PORT $SCALE_A_API_PORT $SCALE_B_IDENTITY_PORT $SCALE_B_API_PORT; do
    wait_for_url "http://127.0.0.1:$port/readyz" 90
  done
  wait_for_url "$SCALE_IDENTITY_URL/healthz" 30
  wait_for_url "$SCALE_API_URL/healthz" 30
  export SCALE_DATA_KEY SCALE_LB_IDENTITY_PORT SCALE_LB_API_PORT SCALE_A_IDENTITY_PORT SCALE_A_API_PORT SCALE_B_IDENTITY_PORT \
    SCALE_B_API_PORT SCALE_IDENTITY_URL SCALE_API_URL SCALE_DATABASE_URL SCALE_A_PID SCALE_B_PID
  export SCALE_SETTINGS="$work/scale-a/settings.json"
  export SCALE_LOGS="$work"  # scale-a.log and scale-b.log: a failing test quotes their errors
}

#!/usr/bin/env bash
# Prefect's server on PostgreSQL: the shared API of a pool of machines (issue 34; docs/many-machines.md).
#
#   bash deployments/start-prefect-server.sh            # PostgreSQL (started if needed), then the server
#   bash deployments/start-prefect-server.sh --postgres-only   # PostgreSQL only; prints the database URL
#   bash deployments/start-prefect-server.sh --stop     # stops this script's PostgreSQL
#   bash deployments/start-prefect-server.sh --help
#
# Idempotent. The first time it creates a PostgreSQL cluster (Debian's `postgresql` package:
# initdb/pg_ctl of /usr/lib/postgresql/<version>/bin) in $SWARM_EVO_SERVER_DIR/postgres, a role and
# database `prefect` with a random password (kept in $SWARM_EVO_SERVER_DIR/prefect-password, mode
# 600), and the API's credentials `swarm-evo:<random>` (kept in $SWARM_EVO_SERVER_DIR/prefect-api-auth,
# mode 600); every time it starts that PostgreSQL when it is not running, then runs
#   prefect server start --host $SWARM_EVO_SERVER_HOST --port $SWARM_EVO_SERVER_PORT
# in the foreground (exec; Ctrl-C stops the server, PostgreSQL keeps running; `--stop` stops it)
# with PREFECT_SERVER_DATABASE_CONNECTION_URL and PREFECT_SERVER_API_AUTH_STRING in its environment.
# The API answers no request without those credentials (HTTP basic authentication; only GET
# /api/health and /api/ready are open). No secret is ever on a command line (`ps` shows none).
# Workers and `swarm-evo` commands on other machines set, besides PREFECT_API_URL=http://<this host>:<port>/api,
# the one line the script prints (copy the file there first, mode 600):
#   export PREFECT_API_AUTH_STRING="$(cat prefect-api-auth)"
# The credentials travel as plain HTTP: keep the port on a private network or behind TLS.
#
# PostgreSQL refuses to run as root: as root the cluster belongs to $SWARM_EVO_PG_OS_USER
# (default `postgres`, the user Debian's package creates) and its commands run through `runuser`;
# the default directory is then /var/lib/swarm-evo/prefect-server (root's home is closed to other users).
#
# Settings (environment variables, defaults in brackets):
#   SWARM_EVO_SERVER_DIR   state directory [~/.local/share/swarm-evo/prefect-server; root: /var/lib/swarm-evo/prefect-server]
#   SWARM_EVO_SERVER_HOST  address the API listens on [0.0.0.0: every interface, so workers elsewhere reach it;
#                          they authenticate, above]
#   SWARM_EVO_SERVER_PORT  API port [4200]
#   SWARM_EVO_PG_PORT      PostgreSQL port, on 127.0.0.1 only [5433: leaves 5432 to a system cluster]
#   SWARM_EVO_PG_BIN       directory of initdb/pg_ctl [the newest /usr/lib/postgresql/*/bin, else PATH]
#   SWARM_EVO_PG_OS_USER   OS user that owns PostgreSQL when run as root [postgres]
#   PREFECT                the prefect command [prefect on PATH]
#   PREFECT_SERVER_UI_API_URL  the API URL the UI's browser uses [http://<host>:<port>/api]
# Install PostgreSQL first if missing (Debian/Ubuntu, as root):
#   DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
set -euo pipefail

die() { echo "start-prefect-server: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

mode=server
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --postgres-only) mode=postgres ;;
  --stop) mode=stop ;;
  "") ;;
  *) die "unknown argument $1 (see --help)" ;;
esac

as_root=false
[ "$(id -u)" = 0 ] && as_root=true
if $as_root; then
  default_dir=/var/lib/swarm-evo/prefect-server
else
  default_dir="${XDG_DATA_HOME:-$HOME/.local/share}/swarm-evo/prefect-server"
fi
dir="${SWARM_EVO_SERVER_DIR:-$default_dir}"
host="${SWARM_EVO_SERVER_HOST:-0.0.0.0}"
port="${SWARM_EVO_SERVER_PORT:-4200}"
pg_port="${SWARM_EVO_PG_PORT:-5433}"
pg_user="${SWARM_EVO_PG_OS_USER:-postgres}"
prefect_cmd="${PREFECT:-prefect}"

pg_bin="${SWARM_EVO_PG_BIN:-}"
if [ -z "$pg_bin" ]; then
  pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  [ -n "$pg_bin" ] || pg_bin="$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")"
fi
[ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/pg_ctl" ] || die "no PostgreSQL found (initdb, pg_ctl): install it with
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql   (as root), or set SWARM_EVO_PG_BIN"

pgdata="$dir/postgres"
password_file="$dir/prefect-password"
auth_file="$dir/prefect-api-auth"
log="$dir/postgres.log"

# Run a PostgreSQL command as the cluster's owner: ourselves, or $pg_user when we are root.
as_pg() {
  if $as_root; then
    runuser -u "$pg_user" -- "$@"
  else
    "$@"
  fi
}

mkdir -p "$dir"
chmod 700 "$dir"
if $as_root; then
  id "$pg_user" >/dev/null 2>&1 || die "PostgreSQL cannot run as root and OS user $pg_user does not exist:
  create it (Debian's postgresql package does) or set SWARM_EVO_PG_OS_USER"
  chmod 711 "$dir"   # the cluster's owner must reach $pgdata; the password file stays 600
fi

pg_running() { as_pg "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; }

if [ "$mode" = stop ]; then
  if [ -f "$pgdata/PG_VERSION" ] && pg_running; then
    as_pg "$pg_bin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
    echo "PostgreSQL in $pgdata stopped"
  else
    echo "PostgreSQL in $pgdata is not running"
  fi
  exit 0
fi

if [ ! -f "$password_file" ]; then
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$password_file")
fi
if [ ! -f "$auth_file" ]; then   # HTTP basic credentials "user:password" (Prefect's server.api.auth_string)
  (umask 077; { printf 'swarm-evo:'; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; } > "$auth_file")
fi
chmod 600 "$password_file" "$auth_file"
password="$(cat "$password_file")"

if [ ! -f "$pgdata/PG_VERSION" ]; then
  echo "creating a PostgreSQL cluster in $pgdata"
  mkdir -p "$pgdata"
  $as_root && chown "$pg_user" "$pgdata"
  chmod 700 "$pgdata"
  # local (socket) connections: trust, but the socket lives in $pgdata (mode 700, the owner only);
  # TCP (127.0.0.1 only): the prefect role's password.
  as_pg "$pg_bin/initdb" -D "$pgdata" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { tail -20 "$dir/initdb.log" >&2; die "initdb failed"; }
fi

if ! pg_running; then
  echo "starting PostgreSQL on 127.0.0.1:$pg_port (log: $log)"
  touch "$log"; $as_root && chown "$pg_user" "$log"
  as_pg "$pg_bin/pg_ctl" -D "$pgdata" -l "$log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories='$pgdata' -c max_connections=200" \
    start >/dev/null || { tail -20 "$log" >&2; die "PostgreSQL did not start (port $pg_port taken? set SWARM_EVO_PG_PORT)"; }
fi
actual_port="$(sed -n 4p "$pgdata/postmaster.pid" 2>/dev/null || echo "$pg_port")"
[ "$actual_port" = "$pg_port" ] || echo "note: PostgreSQL already runs on port $actual_port (not $pg_port): using $actual_port"
pg_port="$actual_port"

psql_bin="$pg_bin/psql"; [ -x "$psql_bin" ] || psql_bin="$(command -v psql)" || die "psql not found"
# The statement goes in on stdin (printf is a builtin): the password never is an argument of a process.
sql() { printf '%s\n' "$1" | as_pg "$psql_bin" -h "$pgdata" -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA; }
if [ "$(sql "SELECT 1 FROM pg_roles WHERE rolname = 'prefect'")" != 1 ]; then
  sql "CREATE ROLE prefect LOGIN PASSWORD '$password'" >/dev/null
else
  sql "ALTER ROLE prefect PASSWORD '$password'" >/dev/null   # the file is the truth
fi
if [ "$(sql "SELECT 1 FROM pg_database WHERE datname = 'prefect'")" != 1 ]; then
  sql "CREATE DATABASE prefect OWNER prefect" >/dev/null
  echo "created role and database prefect"
fi

export PREFECT_SERVER_DATABASE_CONNECTION_URL="postgresql+asyncpg://prefect:$password@127.0.0.1:$pg_port/prefect"
# the API hides the URL (a secret) but shows the driver: `swarm-evo pool setup` refuses a server on SQLite
export PREFECT_SERVER_DATABASE_DRIVER=postgresql+asyncpg
if [ "$mode" = postgres ]; then
  echo "PostgreSQL ready: PREFECT_SERVER_DATABASE_CONNECTION_URL=postgresql+asyncpg://prefect:<$password_file>@127.0.0.1:$pg_port/prefect"
  exit 0
fi

command -v "$prefect_cmd" >/dev/null || die "prefect not found: activate the project's venv (pip install -e .) or set PREFECT"
shown_host="$host"
if [ "$host" = 0.0.0.0 ]; then shown_host="$(hostname -f 2>/dev/null || hostname)"; fi
export PREFECT_SERVER_UI_API_URL="${PREFECT_SERVER_UI_API_URL:-http://$shown_host:$port/api}"
export PREFECT_SERVER_ANALYTICS_ENABLED="${PREFECT_SERVER_ANALYTICS_ENABLED:-false}" DO_NOT_TRACK="${DO_NOT_TRACK:-1}"
PREFECT_SERVER_API_AUTH_STRING="$(cat "$auth_file")"
export PREFECT_SERVER_API_AUTH_STRING
echo "Prefect server on PostgreSQL 127.0.0.1:$pg_port/prefect; workers and swarm-evo use"
echo "  PREFECT_API_URL=http://$shown_host:$port/api"
echo "and authenticate with the credentials in $auth_file (copy it to each machine, mode 600):"
echo "  export PREFECT_API_AUTH_STRING=\"\$(cat $auth_file)\""
echo "UI: http://$shown_host:$port (it asks for the same credentials)"
exec "$prefect_cmd" server start --host "$host" --port "$port"

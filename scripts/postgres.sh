#!/usr/bin/env bash
# Start and stop a throwaway, loopback-only PostgreSQL for the tests of
# leasefence/sqlgate. The server comes from the distribution's packages
# (Debian's postgresql, installed with apt-get if absent), keeps its data in a
# temporary directory, listens on 127.0.0.1 only and runs as a non-root user.
# Everything it stored is deleted by 'stop'.
#
#	scripts/postgres.sh start
#	eval "$(scripts/postgres.sh env)"
#	go test ./leasefence/sqlgate/ ./bench/
#	scripts/postgres.sh stop
#
# The port is a free one, picked at start (LEASEFENCE_PG_PORT chooses it),
# and the state is this clone's: see scripts/lib/services.sh.
set -euo pipefail
# shellcheck source=lib/services.sh
source "$(dirname "$0")/lib/services.sh"

HOST="127.0.0.1"
DB_USER="leasefence"
DB_NAME="leasefence"
READY_TIMEOUT="${LEASEFENCE_PG_READY_TIMEOUT:-60}"

CACHE_DIR="$(services_cache_dir "$0")"
STATE="$CACHE_DIR/postgres.state" # "<dir> <port>" of this clone's server
PORT="" # the recorded server's (recorded), or the one start picks

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $(basename "$0") <command>

commands:
  install   install Debian's postgresql if it is missing, and nothing else
  start     install Debian's postgresql if needed, start a throwaway server on
            $HOST and a free port (data in a temp dir, run as a non-root user),
            wait until ready
  stop      stop the server started by this script and delete its data
  status    exit 0 if running and ready, non-zero otherwise
  env       print the shell export the tests read (LEASEFENCE_PG_URL)

port: a free one, chosen at start (set LEASEFENCE_PG_PORT to choose it)
state: $CACHE_DIR (this clone's; set LEASEFENCE_CACHE to move it)
EOF
}

# bindir prints the directory of the newest installed server's binaries.
bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	[[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]] || return 1
	echo "$d"
}

cmd_install() {
	if bindir >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is not available: install the server binaries (initdb, pg_ctl) yourself"
	[[ "$(id -u)" == 0 ]] || die "PostgreSQL is not installed; run this as root once so that apt-get can install it"
	log "installing postgresql with apt-get..."
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	bindir >/dev/null || die "apt-get installed postgresql but no server binaries were found under /usr/lib/postgresql"
	# The package starts a cluster of its own on port 5432; this script
	# never uses it, and it is the distribution's to manage.
}

# The server must not run as root (postgres refuses to). As root, run it as
# the 'postgres' user the package created; otherwise as the caller.
RUN_AS=()
run_as_setup() {
	if [[ "$(id -u)" == 0 ]]; then
		id postgres >/dev/null 2>&1 || die "running as root and there is no 'postgres' user to run the server as"
		RUN_AS=(runuser -u postgres --)
	fi
}

# recorded sets DIR and PORT to the recorded server's directory and port;
# it fails when this clone records no server, or its data is gone.
recorded() {
	[[ -f "$STATE" ]] || return 1
	local d p
	read -r d p <"$STATE" || return 1
	[[ -n "$d" && -n "$p" && -f "$d/data/PG_VERSION" ]] || return 1
	DIR="$d"
	PORT="$p"
}

# postmaster_alive reports whether the server of data directory $1/data
# still runs: the first line of postmaster.pid is its pid.
postmaster_alive() {
	local pid
	[[ -f "$1/data/postmaster.pid" ]] || return 1
	pid="$(head -n 1 "$1/data/postmaster.pid")"
	[[ -n "$pid" ]] && running "$pid"
}

is_ready() {
	local bin
	bin="$(bindir)" || return 1
	"$bin/pg_isready" -q -h "$HOST" -p "$PORT" -d "$DB_NAME" -U "$DB_USER"
}

print_info() {
	cat <<EOF
PostgreSQL running, loopback only:
  url  : $(url)
  data : $1/data (deleted by '$0 stop')
  log  : $1/server.log
EOF
}

url() { echo "postgres://$DB_USER@$HOST:$PORT/$DB_NAME?sslmode=disable"; }

cmd_start() {
	local dir
	if recorded; then
		dir="$DIR"
		if is_ready; then
			log "already running"
			print_info "$dir"
			return 0
		fi
		if postmaster_alive "$dir"; then
			die "a server from $dir is running but not ready; see $dir/server.log or run '$0 stop'"
		fi
		# The recorded server is gone (killed, or the machine restarted):
		# its record and data are leftovers, and a fresh cluster replaces them.
		log "the server recorded in $dir is gone; removing what it left and starting afresh"
		rm -rf "$dir" "$STATE"
	fi
	cmd_install
	run_as_setup
	local bin
	bin="$(bindir)"
	PORT="$(free_port "${LEASEFENCE_PG_PORT:-}")"
	if is_ready; then
		die "something already answers on $HOST:$PORT; set LEASEFENCE_PG_PORT to another port"
	fi
	mkdir -p "$CACHE_DIR"
	dir="$(mktemp -d "${TMPDIR:-/tmp}/leasefence-pg.XXXXXX")"
	chmod 0755 "$dir"
	if [[ ${#RUN_AS[@]} -gt 0 ]]; then chown postgres: "$dir"; fi
	echo "$dir $PORT" >"$STATE"
	log "initialising a cluster in $dir/data"
	# trust authentication: the server listens on loopback only and is
	# thrown away; the tests also log in as roles they create themselves.
	"${RUN_AS[@]}" "$bin/initdb" -D "$dir/data" -U "$DB_USER" --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
		{ tail -n 20 "$dir/initdb.log" >&2; die "initdb failed"; }
	log "starting on $HOST:$PORT"
	"${RUN_AS[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$READY_TIMEOUT" \
		-o "-c listen_addresses=$HOST -p $PORT -c unix_socket_directories=$dir -c fsync=off -c max_connections=200" start >/dev/null ||
		{ tail -n 20 "$dir/server.log" >&2; die "the server did not start"; }
	"${RUN_AS[@]}" "$bin/createdb" -h "$HOST" -p "$PORT" -U "$DB_USER" "$DB_NAME"
	print_info "$dir"
}

cmd_stop() {
	local dir
	if ! recorded; then
		rm -f "$STATE"
		log "not running"
		return 0
	fi
	dir="$DIR"
	run_as_setup
	local bin
	bin="$(bindir)"
	"${RUN_AS[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || log "pg_ctl stop failed; deleting the data anyway"
	rm -rf "$dir" "$STATE"
	log "stopped and deleted $dir"
}

cmd_status() {
	local dir
	if ! recorded; then
		echo "postgres: not running"
		return 1
	fi
	dir="$DIR"
	if ! is_ready; then
		echo "postgres: recorded at $dir but not ready; see $dir/server.log"
		return 1
	fi
	echo "postgres: running and ready, $(url)"
}

cmd_env() {
	recorded || die "not running; run '$0 start' first"
	echo "export LEASEFENCE_PG_URL='$(url)'"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
-h | --help | help) usage; exit 0 ;;
*) usage; exit 2 ;;
esac

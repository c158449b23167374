#!/usr/bin/env bash
# Start and stop a throwaway, loopback-only Redis for the tests and the
# benchmarks of leasefence/redislease. The server comes from the
# distribution's packages (Debian's redis-server, installed with apt-get if
# absent), keeps its data in a temporary directory, listens on 127.0.0.1 only,
# on a free port, and writes every change to its append-only file with
# appendfsync always: the setting under which the fence counter survives a
# restart. Everything it stored is deleted by 'stop'.
#
#	scripts/redis.sh start
#	eval "$(scripts/redis.sh env)"
#	(cd leasefence/redislease && go test ./...)
#	scripts/redis.sh stop
#
# Its state is this clone's: see scripts/lib/services.sh.
set -euo pipefail
# shellcheck source=lib/services.sh
source "$(dirname "$0")/lib/services.sh"

HOST="127.0.0.1"
READY_TIMEOUT="${LEASEFENCE_REDIS_READY_TIMEOUT:-30}"

CACHE_DIR="$(services_cache_dir "$0")"
STATE="$CACHE_DIR/redis.state" # "<dir> <port>" of this clone's server

log() { printf 'redis.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $(basename "$0") <command>

commands:
  install   install Debian's redis-server if it is missing, and nothing else
  start     install Debian's redis-server if needed, start a throwaway server on
            $HOST and a free port (data in a temp dir, AOF with appendfsync always),
            wait until it answers
  stop      stop the server started by this script and delete its data
  status    exit 0 if running and answering, non-zero otherwise
  env       print the shell export the tests read (LEASEFENCE_REDIS_URL)

port: a free one, chosen at start (set LEASEFENCE_REDIS_PORT to choose it)
state: $CACHE_DIR (this clone's; set LEASEFENCE_CACHE to move it)
EOF
}

cmd_install() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null || die "redis-server is not installed and apt-get is not available: install redis-server and redis-cli yourself"
	[[ "$(id -u)" == 0 ]] || die "redis-server is not installed; run this as root once so that apt-get can install it"
	log "installing redis-server with apt-get..."
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
	command -v redis-server >/dev/null || die "apt-get installed redis-server but no redis-server is on PATH"
	# The package may start a server of its own on port 6379; this script
	# never uses it, and it is the distribution's to manage.
}

# state prints "<dir> <port>" of the recorded server, if its directory is there.
state() {
	[[ -f "$STATE" ]] || return 1
	local dir port
	read -r dir port <"$STATE" || return 1
	[[ -n "$dir" && -n "$port" && -d "$dir" ]] || return 1
	echo "$dir $port"
}

answers() { redis-cli -h "$HOST" -p "$1" ping 2>/dev/null | grep -qx PONG; }

# pid_alive reports whether the server whose data directory is $1 still runs.
pid_alive() {
	local pid
	[[ -f "$1/redis.pid" ]] || return 1
	pid="$(<"$1/redis.pid")"
	[[ -n "$pid" ]] && running "$pid"
}

url() { echo "redis://$HOST:$1/0"; }

print_info() {
	cat <<EOF
Redis running, loopback only, AOF with appendfsync always:
  url  : $(url "$2")
  data : $1 (deleted by '$0 stop')
  log  : $1/server.log
EOF
}

cmd_start() {
	local st dir port
	if st="$(state)"; then
		read -r dir port <<<"$st"
		# Only the recorded process is this clone's server: another clone's
		# may have taken the port since this one's died.
		if pid_alive "$dir"; then
			if answers "$port"; then
				log "already running"
				print_info "$dir" "$port"
				return 0
			fi
			die "a server in $dir on port $port is running but does not answer; see $dir/server.log or run '$0 stop'"
		fi
		# The recorded server is gone (killed, or the machine restarted):
		# its record and data are leftovers, and a fresh server replaces them.
		log "the server recorded in $dir is gone; removing what it left and starting afresh"
		rm -rf "$dir" "$STATE"
	fi
	cmd_install
	port="$(free_port "${LEASEFENCE_REDIS_PORT:-}")"
	if answers "$port"; then
		die "something already answers on $HOST:$port; set LEASEFENCE_REDIS_PORT to another port"
	fi
	mkdir -p "$CACHE_DIR"
	dir="$(mktemp -d "${TMPDIR:-/tmp}/leasefence-redis.XXXXXX")"
	echo "$dir $port" >"$STATE"
	log "starting on $HOST:$port"
	# No RDB snapshots: the append-only file, fsynced before every reply, is
	# the only persistence, as the package's doc asks of a deployment.
	redis-server --bind "$HOST" --port "$port" --protected-mode yes \
		--dir "$dir" --appendonly yes --appendfsync always --save '' \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/server.log" ||
		die "redis-server did not start"
	local waited=0
	until answers "$port"; do
		((waited++ < READY_TIMEOUT * 10)) || { tail -n 20 "$dir/server.log" >&2; die "the server did not answer within ${READY_TIMEOUT}s"; }
		sleep 0.1
	done
	print_info "$dir" "$port"
}

cmd_stop() {
	local st dir port
	if ! st="$(state)"; then
		rm -f "$STATE"
		log "not running"
		return 0
	fi
	read -r dir port <<<"$st"
	# Shut down only this clone's own server, known by its pid file: when it
	# is gone, whatever answers on its old port is someone else's.
	if pid_alive "$dir"; then
		redis-cli -h "$HOST" -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$(<"$dir/redis.pid")" 2>/dev/null || true
	fi
	# Wait for the process to go before deleting what it writes to.
	if [[ -f "$dir/redis.pid" ]]; then
		local pid waited=0
		pid="$(<"$dir/redis.pid")"
		while kill -0 "$pid" 2>/dev/null && ((waited++ < 50)); do sleep 0.1; done
	fi
	rm -rf "$dir" "$STATE"
	log "stopped and deleted $dir"
}

cmd_status() {
	local st dir port
	if ! st="$(state)"; then
		echo "redis: not running"
		return 1
	fi
	read -r dir port <<<"$st"
	if ! answers "$port"; then
		echo "redis: recorded at $dir on port $port but not answering; see $dir/server.log"
		return 1
	fi
	echo "redis: running and answering, $(url "$port")"
}

cmd_env() {
	local st dir port
	st="$(state)" || die "not running; run '$0 start' first"
	read -r dir port <<<"$st"
	echo "export LEASEFENCE_REDIS_URL='$(url "$port")'"
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

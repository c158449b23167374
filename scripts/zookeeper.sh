#!/usr/bin/env bash
# Start and stop a throwaway, loopback-only standalone ZooKeeper for the
# zookeeper and zookeeper-fenced contenders (realtime/zklock). The server
# comes from the distribution's packages (Debian's zookeeper, installed with
# apt-get if absent; it runs on the java already on the machine), keeps its
# data in a temporary directory, listens on 127.0.0.1 only, on a free port,
# and grants the session timeouts the lab's TTLs ask for (a tick of 100 ms,
# timeouts from 200 ms to 10 min), as the server realtime/zklock starts
# itself does. Everything it stored is deleted by 'stop'.
#
#	scripts/zookeeper.sh start
#	eval "$(scripts/zookeeper.sh env)"
#	go test ./realtime/zklock
#	scripts/zookeeper.sh stop
#
# With LEASEFENCE_ZK_ADDR set, the contenders run on this server (each run
# under a znode of its own, deleted after it) instead of starting one per
# run. Its state is this clone's: see scripts/lib/services.sh.
set -euo pipefail
# shellcheck source=lib/services.sh
source "$(dirname "$0")/lib/services.sh"

HOST="127.0.0.1"
READY_TIMEOUT="${LEASEFENCE_ZK_READY_TIMEOUT:-30}"
JAR="${LEASEFENCE_ZK_JAR:-/usr/share/java/zookeeper.jar}"

CACHE_DIR="$(services_cache_dir "$0")"
STATE="$CACHE_DIR/zookeeper.state" # "<dir> <port>" of this clone's server

log() { printf 'zookeeper.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $(basename "$0") <command>

commands:
  install   install Debian's zookeeper if it is missing, and nothing else
  start     install Debian's zookeeper if needed, start a throwaway standalone
            server on $HOST and a free port (data in a temp dir), wait until
            it serves
  stop      stop the server started by this script and delete its data
  status    exit 0 if running and serving, non-zero otherwise
  env       print the shell export the tests and the lab read (LEASEFENCE_ZK_ADDR)

port: a free one, chosen at start (set LEASEFENCE_ZK_PORT to choose it)
state: $CACHE_DIR (this clone's; set LEASEFENCE_CACHE to move it)
EOF
}

cmd_install() {
	command -v java >/dev/null || die "no java on PATH: ZooKeeper runs on it (apt-get install default-jre-headless)"
	if [[ -f "$JAR" ]]; then
		return 0
	fi
	command -v apt-get >/dev/null || die "ZooKeeper is not installed ($JAR is missing) and apt-get is not available: install it yourself and set LEASEFENCE_ZK_JAR"
	[[ "$(id -u)" == 0 ]] || die "ZooKeeper is not installed; run this as root once so that apt-get can install it"
	log "installing zookeeper with apt-get..."
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null
	[[ -f "$JAR" ]] || die "apt-get installed zookeeper but $JAR is missing"
	# The package starts no server (zookeeperd would); this script starts
	# its own.
}

# state prints "<dir> <port>" of the recorded server, if its directory is there.
state() {
	[[ -f "$STATE" ]] || return 1
	local dir port
	read -r dir port <"$STATE" || return 1
	[[ -n "$dir" && -n "$port" && -d "$dir" ]] || return 1
	echo "$dir $port"
}

# serving reports whether the server on port $1 answers the four-letter
# word srvr as a standalone server that serves (before it does, it answers
# that it is not serving requests).
serving() {
	local reply
	reply="$(timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1 && printf srvr >&3 && cat <&3" 2>/dev/null)" || return 1
	grep -q '^Mode: standalone' <<<"$reply"
}

# pid_alive reports whether the server whose data directory is $1 still runs.
pid_alive() {
	local pid
	[[ -f "$1/zookeeper.pid" ]] || return 1
	pid="$(<"$1/zookeeper.pid")"
	[[ -n "$pid" ]] && running "$pid"
}

addr() { echo "$HOST:$1"; }

print_info() {
	cat <<EOF
ZooKeeper running, standalone, loopback only:
  addr : $(addr "$2")
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
			if serving "$port"; then
				log "already running"
				print_info "$dir" "$port"
				return 0
			fi
			die "a server in $dir on port $port is running but does not serve; see $dir/server.log or run '$0 stop'"
		fi
		log "the server recorded in $dir is gone; removing what it left and starting afresh"
		rm -rf "$dir" "$STATE"
	fi
	cmd_install
	port="$(free_port "${LEASEFENCE_ZK_PORT:-}")"
	if serving "$port"; then
		die "a ZooKeeper already serves on $HOST:$port; set LEASEFENCE_ZK_PORT to another port"
	fi
	mkdir -p "$CACHE_DIR"
	dir="$(mktemp -d "${TMPDIR:-/tmp}/leasefence-zookeeper.XXXXXX")"
	echo "$dir $port" >"$STATE"
	# The settings of realtime/zklock's own server (server.go): sessions
	# expire at a tick's grain, and every TTL the lab asks for is granted
	# as asked.
	cat >"$dir/zoo.cfg" <<EOF
tickTime=100
minSessionTimeout=200
maxSessionTimeout=600000
dataDir=$dir/data
clientPort=$port
clientPortAddress=$HOST
admin.enableServer=false
4lw.commands.whitelist=srvr,conf
EOF
	log "starting on $HOST:$port"
	(
		cd "$dir"
		setsid java -Xms16m -XX:+UseSerialGC -cp "$JAR" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
			>"$dir/server.log" 2>&1 </dev/null &
		echo $! >"$dir/zookeeper.pid"
	)
	local waited=0
	until serving "$port"; do
		pid_alive "$dir" || { tail -n 20 "$dir/server.log" >&2; die "the server exited at start"; }
		((waited++ < READY_TIMEOUT * 10)) || { tail -n 20 "$dir/server.log" >&2; die "the server did not serve within ${READY_TIMEOUT}s"; }
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
	# Stop only this clone's own server, known by its pid file.
	if pid_alive "$dir"; then
		local pid waited=0
		pid="$(<"$dir/zookeeper.pid")"
		kill "$pid" 2>/dev/null || true
		# Wait for the process to go before deleting what it writes to.
		while running "$pid" && ((waited++ < 50)); do sleep 0.1; done
		running "$pid" && kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir" "$STATE"
	log "stopped and deleted $dir"
}

cmd_status() {
	local st dir port
	if ! st="$(state)"; then
		echo "zookeeper: not running"
		return 1
	fi
	read -r dir port <<<"$st"
	if ! serving "$port"; then
		echo "zookeeper: recorded at $dir on port $port but not serving; see $dir/server.log"
		return 1
	fi
	echo "zookeeper: running and serving, $(addr "$port")"
}

cmd_env() {
	local st dir port
	st="$(state)" || die "not running; run '$0 start' first"
	read -r dir port <<<"$st"
	echo "export LEASEFENCE_ZK_ADDR='$(addr "$port")'"
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

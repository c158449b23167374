#!/usr/bin/env bash
# Start and stop Redis as teams deploy it, on loopback: a primary, replicas
# that copy it asynchronously, and three Sentinels that fail over to a
# replica when the primary stops answering. Every process comes from the
# distribution's packages (Debian's redis-server and redis-sentinel,
# installed with apt-get if absent), listens on 127.0.0.1 only, on a free
# port, and keeps its configuration, data and log under this clone's
# service state ($LEASEFENCE_CACHE, default <repo>/.cache/services). Every
# server writes each change to its append-only file with appendfsync
# always, so what a failover loses is what replication lost. 'stop' ends
# every process (a paused one too) and deletes everything.
#
#	scripts/redis-sentinel.sh start
#	eval "$(scripts/redis-sentinel.sh env)"   # LEASEFENCE_REDIS_SENTINELS, LEASEFENCE_REDIS_MASTER
#	scripts/redis-sentinel.sh status          # who is the primary now
#	scripts/redis-sentinel.sh stop
#
# Applications reach the primary through the Sentinels (go-redis:
# redis.NewFailoverClient with MasterName and SentinelAddrs), never by its
# address, which changes at a failover.
#
# Its state is this clone's: see scripts/lib/services.sh.
set -euo pipefail
# shellcheck source=lib/services.sh
source "$(dirname "$0")/lib/services.sh"

HOST="127.0.0.1"
READY_TIMEOUT="${LEASEFENCE_REDIS_READY_TIMEOUT:-30}"
MASTER="${LEASEFENCE_REDIS_MASTER_NAME:-leasefence}"
REPLICAS="${LEASEFENCE_REDIS_REPLICAS:-2}"
SENTINELS=3
QUORUM=2
DOWN_AFTER_MS="${LEASEFENCE_SENTINEL_DOWN_AFTER_MS:-1000}"
FAILOVER_TIMEOUT_MS="${LEASEFENCE_SENTINEL_FAILOVER_TIMEOUT_MS:-5000}"

CACHE_DIR="$(services_cache_dir "$0")"
DIR="$CACHE_DIR/redis-sentinel" # one directory a process, and 'ports'
PORTS="$DIR/ports"              # "<name> <port>" a line: redis-0 (the first primary), redis-1.., sentinel-0..

log() { printf 'redis-sentinel.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $(basename "$0") <command>

commands:
  install   install Debian's redis-server and redis-sentinel if missing, and nothing else
  start     install Debian's redis-server and redis-sentinel if needed; start a
            primary, $REPLICAS replicas and $SENTINELS Sentinels (quorum $QUORUM) on $HOST and free
            ports, state in $DIR; wait until the replicas copy the primary and
            the Sentinels know each other
  stop      end every process started here (a paused one too), delete the state
  status    exit 0 if every process answers; print who is the primary
  env       print the shell exports: LEASEFENCE_REDIS_SENTINELS (host:port,...)
            and LEASEFENCE_REDIS_MASTER (the name the Sentinels monitor)

settings (environment): LEASEFENCE_CACHE, LEASEFENCE_REDIS_REPLICAS (default 2),
LEASEFENCE_REDIS_MASTER_NAME (default leasefence), LEASEFENCE_SENTINEL_DOWN_AFTER_MS
(default 1000), LEASEFENCE_SENTINEL_FAILOVER_TIMEOUT_MS (default 5000)
EOF
}

cmd_install() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-sentinel >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null || die "redis-server, redis-sentinel or redis-cli is missing and apt-get is not available: install them yourself"
	[[ "$(id -u)" == 0 ]] || die "redis-server, redis-sentinel or redis-cli is missing; run this as root once so that apt-get can install them"
	log "installing redis-server and redis-sentinel with apt-get..."
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-sentinel >/dev/null
	command -v redis-sentinel >/dev/null || die "apt-get installed redis-sentinel but no redis-sentinel is on PATH"
	# The packages may start servers of their own (ports 6379 and 26379);
	# this script never uses them, and they are the distribution's to manage.
}

# cli PORT ARGS...: redis-cli, given up after 2s: a paused server takes
# the connection and never answers.
cli() { timeout 2 redis-cli -h "$HOST" -p "$1" "${@:2}" 2>/dev/null; }
answers() { cli "$1" ping | grep -qx PONG; }

# port_of NAME prints the recorded port of process NAME.
port_of() { awk -v n="$1" '$1 == n { print $2 }' "$PORTS"; }
names() { awk '{ print $1 }' "$PORTS"; }
sentinel_addrs() { awk -v h="$HOST" '$1 ~ /^sentinel-/ { printf "%s%s:%s", sep, h, $2; sep = "," }' "$PORTS"; }

pid_of() { [[ -f "$DIR/$1/redis.pid" ]] && cat "$DIR/$1/redis.pid"; }

# any_running reports whether a recorded process still runs.
any_running() {
	local n pid
	for n in $(names); do
		if pid="$(pid_of "$n")" && running "$pid"; then return 0; fi
	done
	return 1
}

# free_ports N prints N distinct free ports, held open together while the
# kernel picks them.
free_ports() {
	python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1" 2>/dev/null ||
		for ((i = 0; i < $1; i++)); do printf '%d ' $((20000 + RANDOM % 20000)); done
}

# common_conf NAME PORT: what every process's configuration file says.
common_conf() {
	cat <<EOF
bind $HOST
port $2
protected-mode yes
daemonize yes
dir "$DIR/$1"
pidfile "$DIR/$1/redis.pid"
logfile "$DIR/$1/server.log"
EOF
}

start_server() { # name port primary-port|""
	local name=$1 port=$2 primary=$3
	mkdir -p "$DIR/$name"
	{
		common_conf "$name" "$port"
		# No RDB snapshots: the append-only file, fsynced before every
		# reply, is the only persistence.
		printf 'appendonly yes\nappendfsync always\nsave ""\n'
		[[ -z "$primary" ]] || printf 'replicaof %s %s\n' "$HOST" "$primary"
	} >"$DIR/$name/redis.conf"
	redis-server "$DIR/$name/redis.conf" || die "$name did not start; see $DIR/$name/server.log"
}

start_sentinel() { # name port primary-port
	local name=$1 port=$2 primary=$3
	mkdir -p "$DIR/$name"
	{
		common_conf "$name" "$port"
		cat <<EOF
sentinel resolve-hostnames no
sentinel monitor $MASTER $HOST $primary $QUORUM
sentinel down-after-milliseconds $MASTER $DOWN_AFTER_MS
sentinel failover-timeout $MASTER $FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $MASTER 1
EOF
	} >"$DIR/$name/sentinel.conf"
	redis-sentinel "$DIR/$name/sentinel.conf" || die "$name did not start; see $DIR/$name/server.log"
}

# wait_until SECONDS WHAT COMMAND...: run COMMAND every 0.1s until it succeeds.
wait_until() {
	local limit=$1 what=$2 waited=0
	shift 2
	until "$@"; do
		((waited++ < limit * 10)) || die "$what within ${limit}s; the logs are in $DIR/*/server.log"
		sleep 0.1
	done
}

replica_synced() { cli "$1" info replication | tr -d '\r' | grep -qx 'master_link_status:up'; }

# sentinel_ready PORT: the Sentinel knows every replica and the other Sentinels.
sentinel_ready() {
	local info
	info="$(cli "$1" sentinel master "$MASTER" | tr -d '\r' | paste - - )" || return 1
	grep -qx "num-slaves	$REPLICAS" <<<"$info" && grep -qx "num-other-sentinels	$((SENTINELS - 1))" <<<"$info"
}

cmd_start() {
	if [[ -f "$PORTS" ]]; then
		if cmd_status >/dev/null; then
			log "already running"
			cmd_status
			return 0
		fi
		any_running && die "a deployment recorded in $DIR is running but not every process answers; see '$0 status', or '$0 stop'"
		# Every recorded process is gone (killed, or the machine restarted):
		# what they left is stale, and a fresh deployment replaces it.
		log "the deployment recorded in $DIR is gone; removing what it left and starting afresh"
		rm -rf "$DIR"
	fi
	[[ "$REPLICAS" =~ ^[1-9][0-9]*$ ]] || die "LEASEFENCE_REDIS_REPLICAS=$REPLICAS: want a count >= 1"
	cmd_install
	mkdir -p "$DIR"
	local ports i=0 p primary
	read -r -a ports <<<"$(free_ports $((1 + REPLICAS + SENTINELS)))"
	for p in "${ports[@]}"; do
		answers "$p" && die "something already answers on $HOST:$p; run start again"
	done
	primary=${ports[0]}
	: >"$PORTS"
	for ((i = 0; i <= REPLICAS; i++)); do echo "redis-$i ${ports[i]}" >>"$PORTS"; done
	for ((i = 0; i < SENTINELS; i++)); do echo "sentinel-$i ${ports[1 + REPLICAS + i]}" >>"$PORTS"; done

	log "starting a primary on $HOST:$primary and $REPLICAS replicas"
	start_server redis-0 "$primary" ""
	for ((i = 1; i <= REPLICAS; i++)); do start_server "redis-$i" "${ports[i]}" "$primary"; done
	for ((i = 0; i <= REPLICAS; i++)); do wait_until "$READY_TIMEOUT" "redis-$i did not answer" answers "${ports[i]}"; done
	for ((i = 1; i <= REPLICAS; i++)); do
		wait_until "$READY_TIMEOUT" "redis-$i did not sync with the primary" replica_synced "${ports[i]}"
	done
	log "starting $SENTINELS Sentinels (master name $MASTER, quorum $QUORUM, down after ${DOWN_AFTER_MS}ms)"
	for ((i = 0; i < SENTINELS; i++)); do start_sentinel "sentinel-$i" "${ports[1 + REPLICAS + i]}" "$primary"; done
	for ((i = 0; i < SENTINELS; i++)); do
		wait_until "$READY_TIMEOUT" "sentinel-$i did not discover the replicas and the other Sentinels" sentinel_ready "${ports[1 + REPLICAS + i]}"
	done
	cmd_status
}

cmd_stop() {
	if [[ ! -f "$PORTS" ]]; then
		rm -rf "$DIR"
		log "not running"
		return 0
	fi
	# Sentinels first, so that none fails over while the servers go.
	local n pid waited
	for n in $(names | sort -r); do
		pid="$(pid_of "$n")" || continue
		running "$pid" || continue
		kill -CONT "$pid" 2>/dev/null || true # a paused process cannot exit
		kill -TERM "$pid" 2>/dev/null || true
		waited=0
		while running "$pid" && ((waited++ < 50)); do sleep 0.1; done
		if running "$pid"; then
			kill -KILL "$pid" 2>/dev/null || true
			log "$n (pid $pid) did not stop on SIGTERM: killed"
		fi
	done
	rm -rf "$DIR"
	log "stopped and deleted $DIR"
}

cmd_status() {
	if [[ ! -f "$PORTS" ]]; then
		echo "redis-sentinel: not running"
		return 1
	fi
	local n port pid ok=0 primary=""
	for n in $(names); do
		port="$(port_of "$n")"
		# A port answers for this deployment only while its own process
		# runs: another clone's server may have taken a dead one's port.
		if ! pid="$(pid_of "$n")" || ! running "$pid"; then
			echo "  $n $HOST:$port: not running (see $DIR/$n/server.log)"
			ok=1
		elif answers "$port"; then
			if [[ "$n" == sentinel-* ]]; then
				[[ -n "$primary" ]] || primary="$(cli "$port" sentinel get-master-addr-by-name "$MASTER" | paste -sd: -)"
				echo "  $n $HOST:$port: sentinel"
			else
				echo "  $n $HOST:$port: $(cli "$port" role | head -n1)"
			fi
		elif [[ -r "/proc/$pid/status" ]] && grep -q '^State:[[:space:]]*T' "/proc/$pid/status"; then
			echo "  $n $HOST:$port: paused (SIGSTOP), not answering"
			ok=1
		else
			echo "  $n $HOST:$port: not answering (see $DIR/$n/server.log)"
			ok=1
		fi
	done
	echo "redis-sentinel: master $MASTER is ${primary:-unknown}; sentinels $(sentinel_addrs)"
	return $ok
}

cmd_env() {
	[[ -f "$PORTS" ]] || die "not running; run '$0 start' first"
	echo "export LEASEFENCE_REDIS_SENTINELS='$(sentinel_addrs)'"
	echo "export LEASEFENCE_REDIS_MASTER='$MASTER'"
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

# Shared by the scripts that start throwaway servers (scripts/postgres.sh,
# scripts/redis.sh): source it, do not run it.
#
# The convention: a server's state (its data directory and port) lives in
# $LEASEFENCE_CACHE, by default "<repository top>/.cache/services"
# (gitignored), so each clone records, finds and stops only its own
# servers: two clones side by side never stop each other's. Ports are free
# ones, picked at start.

# services_cache_dir prints the state directory of the clone that holds
# the script $1.
services_cache_dir() {
	if [[ -n "${LEASEFENCE_CACHE:-}" ]]; then
		echo "$LEASEFENCE_CACHE"
		return
	fi
	local here top
	here="$(cd "$(dirname "$1")" && pwd)"
	top="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null)" || top="$(dirname "$here")"
	echo "$top/.cache/services"
}

# free_port prints $1 if set (a port asked for), else a port nothing
# listens on, from the kernel's choice.
free_port() {
	if [[ -n "${1:-}" ]]; then
		echo "$1"
		return
	fi
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

# running reports whether process $1 runs: a zombie (killed, and not yet
# reaped, as where nothing reaps orphans) does not.
running() {
	kill -0 "$1" 2>/dev/null || return 1
	[[ -r "/proc/$1/status" ]] || return 0
	! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}

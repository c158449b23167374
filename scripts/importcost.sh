#!/usr/bin/env bash
# What a user pays for importing the library: a scratch service on
# google.golang.org/grpc v1.70.0 imports one of the library's modules (a
# replace points at this checkout) and runs `go mod tidy`.
#
#   leasefence:           grpc stays at v1.70.0 and the module graph gains
#                         no module but leasefence itself.
#   etcdlease, sqlgate,
#   redislease:           the graph gains no charm module, no etcd server
#                         (nor bbolt, raft), no OpenTelemetry SDK, no SQL
#                         driver, no porcupine.
#
# Prints each module's graph growth and exits non-zero on any breach.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

grpc=v1.70.0
lib=github.com/leasefence/lab/leasefence
forbidden='^(github\.com/charmbracelet/|go\.etcd\.io/etcd/server/|go\.etcd\.io/bbolt|go\.etcd\.io/raft/|go\.opentelemetry\.io/otel/sdk|github\.com/jackc/|modernc\.org/|github\.com/anishathalye/porcupine)'

# service DIR IMPORT...: a tidy module in DIR whose main package imports
# grpc and IMPORT...; prints its module graph, one path a line.
service() {
	local dir=$1; shift
	mkdir -p "$dir"
	cat >"$dir/go.mod" <<MOD
module example.com/service

go 1.26.0

require google.golang.org/grpc $grpc

replace (
	$lib => $root/leasefence
	$lib/etcdlease => $root/leasefence/etcdlease
	$lib/sqlgate => $root/leasefence/sqlgate
	$lib/redislease => $root/leasefence/redislease
)
MOD
	{
		echo 'package main'
		echo 'import ('
		echo '	_ "google.golang.org/grpc"'
		for p in "$@"; do echo "	_ \"$p\""; done
		echo ')'
		echo 'func main() {}'
	} >"$dir/main.go"
	if ! (cd "$dir" && go mod tidy && go build -o /dev/null .) 2>"$dir/log"; then
		cat "$dir/log" >&2
		return 1
	fi
	(cd "$dir" && go list -m -f '{{.Path}}' all) | sort
}

grpcVersion() { (cd "$1" && go list -m -f '{{.Version}}' google.golang.org/grpc); }

# grpcWhy DIR: the modules of DIR's graph that require the grpc it selected.
grpcWhy() {
	local v who
	v=$(grpcVersion "$1")
	who=$( (cd "$1" && go mod graph) | awk -v m="google.golang.org/grpc@$v" '$2 == m && $1 !~ /^example\.com\// { print $1 }' | sort -u | paste -sd, -)
	echo "${who:-the service alone}"
}

fail=0
service "$scratch/base" >"$scratch/base.txt"
for pkg in "$lib" "$lib/etcdlease" "$lib/sqlgate" "$lib/redislease"; do
	name=${pkg##*/}
	service "$scratch/$name" "$pkg" >"$scratch/$name.txt"
	gained=$(comm -13 "$scratch/base.txt" "$scratch/$name.txt")
	echo "== importing $pkg: grpc $(grpcVersion "$scratch/$name") (required by $(grpcWhy "$scratch/$name")), $(echo "$gained" | grep -c .) modules gained"
	echo "$gained" | sed 's/^/   + /'
	if [ "$pkg" = "$lib" ]; then
		if [ "$(grpcVersion "$scratch/$name")" != "$grpc" ]; then
			echo "FAIL: importing $pkg moved grpc off $grpc"; fail=1
		fi
		if [ "$gained" != "$lib" ]; then
			echo "FAIL: importing $pkg gained modules besides itself"; fail=1
		fi
	elif bad=$(echo "$gained" | grep -E "$forbidden"); then
		echo "FAIL: importing $pkg gained:"; echo "$bad"; fail=1
	fi
done
exit $fail

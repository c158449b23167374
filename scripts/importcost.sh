#!/usr/bin/env bash
# What a user pays for importing the library: a scratch service on
# google.golang.org/grpc v1.70.0 imports one of the library's modules (a
# replace points at this checkout) and runs `go mod tidy`.
#
#   leasefence:           grpc stays at v1.70.0 and the module graph gains
#                         no module but leasefence itself.
#   sqllease:             grpc stays at v1.70.0 and the module graph gains
#                         leasefence and sqllease only: no driver, not even
#                         in the graph (its tests live in leasefence/tests).
#   fencetoken, fencehttp, fencegrpc:
#                         grpc stays at v1.70.0 and the graph gains only
#                         leasefence, the imported module, the modules it
#                         builds on (fencetoken) and one JWT library.
#   leaseotel:            grpc stays at v1.70.0 and the build gains only
#                         leasefence, leaseotel and the OpenTelemetry API
#                         (go.opentelemetry.io/otel, its metric and trace
#                         and log modules, and what the API builds on:
#                         go-logr, otel/auto/sdk); no SDK, no exporter.
#   etcdlease, sqlgate,
#   redislease:           the build gains no charm module, no etcd server
#                         (nor bbolt, raft), no OpenTelemetry SDK, no SQL
#                         driver, no porcupine. The module graph may list
#                         what a store's own tests require (sqlgate's
#                         examples run on SQLite): the go command reads
#                         those modules' go.mod files, and compiles none of
#                         them into the service. Both lists are printed.
#   every module:         the module graph lists no etcd server (nor bbolt,
#                         raft), not even unbuilt: every importer's go.sum
#                         and dependency scanner would carry it. Examples
#                         that start an embedded etcd live where the server
#                         is required already (the leasefence/tests module).
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
# etcd's server and what only it requires: in no importer's module graph.
graphForbidden='^(go\.etcd\.io/etcd/server/|go\.etcd\.io/bbolt|go\.etcd\.io/raft/)'

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
	$lib/etcdlease/etcdembed => $root/leasefence/etcdlease/etcdembed
	$lib/etcdlease/etcdtest => $root/leasefence/etcdlease/etcdtest
	$lib/sqlgate => $root/leasefence/sqlgate
	$lib/sqllease => $root/leasefence/sqllease
	$lib/fencetoken => $root/leasefence/fencetoken
	$lib/fencehttp => $root/leasefence/fencehttp
	$lib/fencegrpc => $root/leasefence/fencegrpc
	$lib/redislease => $root/leasefence/redislease
	$lib/leaseotel => $root/leasefence/leaseotel
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
	(cd "$dir" && go list -deps -f '{{with .Module}}{{.Path}}{{end}}' .) | sort -u >"$dir/built.txt"
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
# allowed PKG: the only modules importing PKG may add to the graph, one a
# line, sorted; empty for a store, which is checked against $forbidden.
jwt=github.com/golang-jwt/jwt/v5
allowed() {
	case $1 in
	"$lib") echo "$lib" ;;
	"$lib/sqllease") printf '%s\n' "$lib" "$lib/sqllease" ;;
	"$lib/fencetoken") printf '%s\n' "$jwt" "$lib" "$lib/fencetoken" ;;
	"$lib/fencehttp") printf '%s\n' "$jwt" "$lib" "$lib/fencehttp" "$lib/fencetoken" ;;
	"$lib/fencegrpc") printf '%s\n' "$jwt" "$lib" "$lib/fencegrpc" "$lib/fencetoken" ;;
	esac | sort
}

# otelapi: the modules a build on the OpenTelemetry API alone may gain.
otelapi="^($lib|$lib/leaseotel|go\.opentelemetry\.io/otel|go\.opentelemetry\.io/otel/(metric|trace|log)|go\.opentelemetry\.io/auto/sdk|github\.com/go-logr/(logr|stdr))\$"

for pkg in "$lib" "$lib/fencetoken" "$lib/fencehttp" "$lib/fencegrpc" "$lib/leaseotel" "$lib/etcdlease" "$lib/sqlgate" "$lib/sqllease" "$lib/redislease"; do
	name=${pkg##*/}
	service "$scratch/$name" "$pkg" >"$scratch/$name.txt"
	gained=$(comm -13 "$scratch/base.txt" "$scratch/$name.txt")
	echo "== importing $pkg: grpc $(grpcVersion "$scratch/$name") (required by $(grpcWhy "$scratch/$name")), $(echo "$gained" | grep -c .) modules gained"
	built=$(comm -12 <(echo "$gained") "$scratch/$name/built.txt")
	echo "$gained" | while read -r m; do
		if grep -qx "$m" <<<"$built"; then echo "   + $m"; else echo "   + $m (graph only: not built)"; fi
	done
	if [ "$pkg" = "$lib/leaseotel" ]; then
		if [ "$(grpcVersion "$scratch/$name")" != "$grpc" ]; then
			echo "FAIL: importing $pkg moved grpc off $grpc"; fail=1
		fi
		if bad=$(echo "$built" | grep -vE "$otelapi"); then
			echo "FAIL: importing $pkg builds more than the OpenTelemetry API:"; echo "$bad"; fail=1
		fi
	elif want=$(allowed "$pkg") && [ -n "$want" ]; then
		if [ "$(grpcVersion "$scratch/$name")" != "$grpc" ]; then
			echo "FAIL: importing $pkg moved grpc off $grpc"; fail=1
		fi
		if [ "$gained" != "$want" ]; then
			echo "FAIL: importing $pkg gained modules besides:"; echo "$want"; fail=1
		fi
	elif bad=$(echo "$built" | grep -E "$forbidden"); then
		echo "FAIL: importing $pkg builds:"; echo "$bad"; fail=1
	fi
	if bad=$(echo "$gained" | grep -E "$graphForbidden"); then
		echo "FAIL: importing $pkg puts etcd's server in the module graph:"; echo "$bad"; fail=1
	fi
done
exit $fail

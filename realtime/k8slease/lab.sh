#!/bin/sh
# lab.sh runs the lab with the contenders k8s-leaderelection and
# k8s-leaderelection-fenced: the lab's own command (cmd/lab), built in this
# module, which pins client-go, with one file more (linked.go.txt, given by
# go build -overlay) that imports this package; the lab's module never
# names client-go, and its build never compiles it. The arguments are the
# lab's, the working directory the caller's:
#
#	realtime/k8slease/lab.sh run realtime/k8slease/testdata/k8s-paused-leader.yaml
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '{"Replace":{"%s":"%s"}}\n' "$root/cmd/lab/k8slease_linked.go" "$here/linked.go.txt" >"$tmp/overlay.json"
GOWORK=off go -C "$here" build -overlay "$tmp/overlay.json" -o "$tmp/lab" github.com/leasefence/lab/cmd/lab
status=0
"$tmp/lab" "$@" || status=$?
exit "$status"

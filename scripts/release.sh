#!/usr/bin/env bash
# Prepares a release of the library's modules at one version:
#
#   scripts/release.sh v0.x.y
#
# sets every requirement of one of them to v0.x.y, in every go.mod of the
# repository (the replace directives stay: they apply only where the module
# is the main module, so an importer never sees them), tidies, and prints
# the tags to push once the change is committed. Every library module is
# tagged at the same version on the same commit, with its directory as the
# tag's prefix, as the go command expects of a nested module.
set -euo pipefail
version=${1:-}
if ! [[ $version =~ ^v0\.[0-9]+\.[0-9]+$ ]]; then
	echo "usage: $0 v0.x.y" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
prefix=github.com/leasefence/lab
# The library's modules: every one under leasefence/ but its test module.
libs=$(git ls-files -- 'leasefence/go.mod' 'leasefence/*/go.mod' | xargs -n1 dirname | grep -vx leasefence/tests | sort)
for m in $(git ls-files -- go.mod '*/go.mod' | xargs -n1 dirname); do
	required=$(cd "$m" && GOWORK=off go mod edit -json | sed -n 's/.*"Path": "\(github\.com\/leasefence\/lab\/[^"]*\)".*/\1/p' | sort -u)
	for lib in $libs; do
		if grep -qx "$prefix/$lib" <<<"$required"; then
			(cd "$m" && GOWORK=off go mod edit -require="$prefix/$lib@$version")
		fi
	done
done
for m in $(git ls-files -- go.mod '*/go.mod' | xargs -n1 dirname); do
	(cd "$m" && GOWORK=off go mod tidy)
done
echo "commit the go.mod changes, then:"
for lib in $libs; do
	echo "  git tag $lib/$version"
done
tags=$(for lib in $libs; do echo "$lib/$version"; done | paste -sd' ' -)
echo "  git push origin $tags"

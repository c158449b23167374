#!/usr/bin/env bash
# Runs the benchmark suite into new.txt (in the current directory) and
# summarises it with benchstat:
#
#   bench/run.sh             # 10 runs of each benchmark
#   COUNT=6 bench/run.sh     # fewer, faster
#   OLD=old.txt bench/run.sh # also compare with an earlier new.txt
#   OUT=other.txt bench/run.sh
#
# The whole suite runs at the machine's GOMAXPROCS, then the simulator and
# the tracing cost again with -cpu 1 for the one-core figures. The figure bench/scaling.svg is
# redrawn from the results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

count=${COUNT:-10}
out=${OUT:-new.txt}

benchstat=$(command -v benchstat || true)
if [ -z "$benchstat" ] && [ -x "$(go env GOPATH)/bin/benchstat" ]; then
	benchstat=$(go env GOPATH)/bin/benchstat
fi
if [ -z "$benchstat" ]; then
	echo "installing benchstat" >&2
	go install golang.org/x/perf/cmd/benchstat@latest
	benchstat=$(go env GOPATH)/bin/benchstat
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
(cd "$root" && go test -run '^$' -bench . -benchmem -count "$count" ./bench) | tee "$out"
(cd "$root" && go test -run '^$' -bench '^Benchmark(Simulator|CrowdTracing)' -cpu 1 -benchmem -count "$count" ./bench) | tee -a "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

(cd "$root" && go run ./bench/plot -) <"$out" >"$root/bench/scaling.svg"

# Each measurement beside its baseline (the first column), with the
# difference between them.
for name in GateCommit Coordinator AcquireRoundTrip SimulatorCeiling; do
	"$benchstat" -filter ".name:$name" -col /impl "$out"
done
"$benchstat" -filter .name:RunPeakRSS -col /duration "$out"
"$benchstat" -filter .name:CrowdTracing -col /trace "$out"
# Everything, by name; against the earlier run when there is one.
if [ -n "${OLD:-}" ]; then
	"$benchstat" "$OLD" "$out"
else
	"$benchstat" "$out"
fi

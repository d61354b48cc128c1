#!/usr/bin/env bash
# Measures the peak memory (max RSS) and time of `vram replay` and `vram
# analyze` on two generated 200 MB text traces, the figures of BENCHMARKS.md
# ("Replay and analyze of large traces"):
#   ordinary.trace   200 MB of alloc/free_requested/free_completed lines
#   oom.trace.gz     200 MB of "oom 0 0 0" lines, a 388 KB gzip file
# The traces are written by memory/testdata/genbig into a temporary
# directory and removed afterwards; nothing is written into the repository.
#
#   scripts/bench-replay-memory.sh            # builds vram from this tree
#   scripts/bench-replay-memory.sh ./vram-old # measures another binary
#
# It needs GNU time (/usr/bin/time). Run it on a quiet machine, once: each
# command reads 200 MB, several times over.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vram=${1:-}
if [[ -z "$vram" ]]; then
	go build -o "$work/vram" ./cmd/vram
	vram=$work/vram
fi
go build -o "$work/genbig" ./memory/testdata/genbig
"$work/genbig" -kind ordinary -size 200MB -o "$work/ordinary.trace"
"$work/genbig" -kind oom -size 200MB -gzip -o "$work/oom.trace.gz"
ls -l "$work/ordinary.trace" "$work/oom.trace.gz"
for cmd in replay analyze; do
	for f in ordinary.trace oom.trace.gz; do
		/usr/bin/time -f "vram $cmd $f: %e s elapsed, %U s user, %S s system, max RSS %M KB" \
			"$vram" "$cmd" "$work/$f" >"$work/out" 2>"$work/err" || true
		tail -n 1 "$work/err"
		echo "  output: $(wc -l <"$work/out") lines, $(wc -c <"$work/out") bytes"
	done
done

#!/usr/bin/env bash
# Long fuzzing runs, outside CI.
#
#   scripts/fuzz.sh [options] [TARGET|PACKAGE ...]
#
# Runs every fuzz target of the module (the Fuzz* functions of *_test.go
# files), or those named (FuzzReadJSON) or in the packages named
# (./memory/trace), one after the other, each for the same time. A plain
# `go test` runs only the seed corpora under testdata/fuzz; this script
# runs the engine itself.
#
# Options:
#   -t DURATION   fuzzing time per target, as go test -fuzztime takes it (10m)
#   -m LIMIT      -fuzzminimizetime: the most spent minimising one new or
#                 failing input, as executions (250x) or a duration (5s).
#                 Go's default, 60s, lets minimisation take most of a run:
#                 the engine minimises every input that adds coverage, with
#                 up to quadratically many executions in its length. A count
#                 scales with each target's speed (they differ a hundredfold),
#                 and, unlike a duration, running out of it keeps what was
#                 minimised: with a duration, Go 1.26 stops the worker process
#                 and restarts it.
#   -p N          -parallel: fuzzing processes per target (the number of CPUs)
#   -o DIR        directory for the logs (fuzz-logs/DATE-TIME)
#   -c DIR        keep the engine's corpus in DIR/TARGET instead of Go's
#                 cache; a new DIR starts from the seed corpora alone
#   -M MIB        address-space limit of each process, in MiB (16384; 0 for
#                 none), so that an input that makes a reader allocate what it
#                 claims fails as a crash instead of exhausting the machine
#   -l            list the targets and exit
#   -s            rewrite the seed corpora (TestFuzzSeeds -update-fuzz-seeds)
#                 and exit
#
# For each target the log DIR/TARGET.log holds go test's output with the
# engine's debug lines (GODEBUG=fuzzdebug=1); DIR/summary.txt has one line
# per target: the outcome, executions per second, new inputs, and the share
# of the time spent minimising (estimated from the debug lines).
#
# A failing input is written by go test to the package's
# testdata/fuzz/TARGET/ directory and copied to DIR; the script prints the
# command that reruns it. Once committed it is a regression test that every
# `go test` runs, so commit it with the fix. The engine's growing corpus is
# kept in Go's cache (go env GOCACHE)/fuzz, so a later run continues where
# this one stopped; `go clean -fuzzcache` removes it.
#
# Exit status: 0 if every target ran without failure, 1 otherwise, 2 for
# bad usage.
set -u -o pipefail

duration=10m
minimize=250x
parallel=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
logdir=""
cachedir=""
mem_mib=16384
list=0
seeds=0

usage() {
	sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0" >&2
	exit 2
}

while getopts "t:m:p:o:c:M:lsh" opt; do
	case $opt in
	t) duration=$OPTARG ;;
	m) minimize=$OPTARG ;;
	p) parallel=$OPTARG ;;
	o) logdir=$OPTARG ;;
	c) cachedir=$OPTARG ;;
	M) mem_mib=$OPTARG ;;
	l) list=1 ;;
	s) seeds=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))

# -o and -c are relative to where the script was started; it runs in the
# module root.
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac }
[ -z "$logdir" ] || logdir=$(abs "$logdir")
[ -z "$cachedir" ] || cachedir=$(abs "$cachedir")
cd "$(dirname "$0")/.." || exit 2

# targets prints "PACKAGE_DIR TARGET" for every fuzz target.
targets() {
	grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
		sed -E 's|^\./(.*)/[^/]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*|./\1 \2|; s|^\./[^/]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*|. \1|' |
		sort -u
}

if [ "$seeds" = 1 ]; then
	pkgs=$(grep -rl --include='*_test.go' '^func TestFuzzSeeds(' . | xargs -n1 dirname | sort -u)
	# shellcheck disable=SC2086
	exec go test -count=1 -run '^TestFuzzSeeds$' $pkgs -args -update-fuzz-seeds
fi

all=$(targets)
if [ "$list" = 1 ]; then
	echo "$all"
	exit 0
fi

selected=""
if [ $# -eq 0 ]; then
	selected=$all
else
	for want in "$@"; do
		want=${want%/}
		case $want in
		Fuzz*) hit=$(echo "$all" | awk -v t="$want" '$2 == t') ;;
		*) [ "${want#./}" = "$want" ] && [ "$want" != . ] && want=./$want
			hit=$(echo "$all" | awk -v p="$want" '$1 == p') ;;
		esac
		if [ -z "$hit" ]; then
			echo "fuzz.sh: no fuzz target or package $want (scripts/fuzz.sh -l lists them)" >&2
			exit 2
		fi
		selected=$(printf '%s\n%s' "$selected" "$hit")
	done
fi
selected=$(echo "$selected" | sed '/^$/d')

[ -n "$logdir" ] || logdir=fuzz-logs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$logdir" || exit 2
[ -z "$cachedir" ] || mkdir -p "$cachedir" || exit 2
summary=$logdir/summary.txt
: >"$summary"
echo "fuzzing $(echo "$selected" | wc -l) target(s) for $duration each, -fuzzminimizetime $minimize, -parallel $parallel; logs in $logdir"

# report LOG PARALLEL MINIMIZE prints the summary fields of one target's log.
report() {
	awk -v par="$2" -v minimize="$3" '
	BEGIN { limit = (minimize ~ /x$/) ? 1e9 : dur(minimize) }
	function clock(ts,   a) { split(ts, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
	function dur(d,   v, n, u) { # 1h2m3s, 3s, 250ms
		v = 0; n = ""
		while (d != "") {
			u = substr(d, 1, 1); d = substr(d, 2)
			if (u ~ /[0-9.]/) { n = n u; continue }
			if (u == "h") v += n * 3600
			else if (u == "m" && substr(d, 1, 1) == "s") { v += n / 1000; d = substr(d, 2) }
			else if (u == "m") v += n * 60
			else if (u == "s") v += n
			n = ""
		}
		return v
	}
	/^fuzz: elapsed: .*execs: / {
		e = $3; sub(/,$/, "", e); elapsed = dur(e)
		execs = $5; interesting = $9
	}
	function field(name,   v) { v = $0; sub(".*[ ,]" name ": ", "", v); sub(/,.*/, "", v); return v }
	/ DEBUG queueing input for minimization/ { queued[field("id")] = clock($2) }
	/ DEBUG input minimized/ {
		# "minimizing took: D" is exact; D is 0s when the minimisation
		# ran into -fuzzminimizetime, so count that limit, or the time
		# since it can have started if that is shorter.
		m = clock($2); id = field("original id")
		start = (id in queued) ? queued[id] : last
		if (par == 1 && last > start) start = last
		took = $0; sub(/.*minimizing took: /, "", took); took = dur(took)
		if (took == 0 && m > start) took = (m - start < limit) ? m - start : limit
		busy += took
		last = m
	}
	END {
		rate = elapsed > 0 ? execs / elapsed : 0
		share = elapsed > 0 ? 100 * busy / (elapsed * par) : 0
		printf "%d execs in %ds (%.0f/s), %d new inputs, minimising ~%.0f%% of the time", execs, elapsed, rate, interesting, share
	}' "$1"
}

ulimit_cmd=""
if [ "$mem_mib" != 0 ]; then
	ulimit_cmd="ulimit -v $((mem_mib * 1024));"
fi

failed=0
while read -r pkg target; do
	log=$logdir/$target.log
	printf '%-18s %-22s ' "$target" "$pkg"
	before=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null)
	args=()
	[ -z "$cachedir" ] || args=(-args "-test.fuzzcachedir=$cachedir/$target")
	GODEBUG=fuzzdebug=1 bash -c "$ulimit_cmd"' exec go test -run "^$" -fuzz "^$1\$" -fuzztime "$2" -fuzzminimizetime "$3" -parallel "$4" "$5" "${@:6}"' \
		_ "$target" "$duration" "$minimize" "$parallel" "$pkg" "${args[@]}" >"$log" 2>&1
	status=$?
	line="$(report "$log" "$parallel" "$minimize")"
	after=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null)
	if [ $status -eq 0 ]; then
		result=ok
	elif [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log"; then
		# Go 1.26's coordinator can report the end of -fuzztime as this
		# error, with no failing input (go.dev/issue/75804, fixed in 1.27).
		result=ok
		line="$line; go test reported the end of -fuzztime as a failure (go.dev/issue/75804), no failing input"
	else
		result=FAIL
		failed=1
		for f in $(comm -13 <(echo "$before") <(echo "$after")); do
			cp "$pkg/testdata/fuzz/$target/$f" "$logdir/$target-$f"
			line="$line; failing input $pkg/testdata/fuzz/$target/$f (rerun: go test -run '$target/$f' $pkg)"
		done
	fi
	echo "$result $line"
	printf '%-18s %-5s %s\n' "$target" "$result" "$line" >>"$summary"
done <<<"$selected"

[ $failed -eq 0 ] || echo "some targets failed: see $summary and the logs in $logdir" >&2
exit $failed

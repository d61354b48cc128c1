#!/usr/bin/env bash
# gpu-test.sh builds small, stripped, cgo-free test binaries for the packages
# that touch CUDA, a stripped vram binary and every example under examples/,
# packs them into one compressed archive, and runs them on a GPU machine.
#
#   scripts/gpu-test.sh [build]   build .gpu/bins.tar.xz (here, where Go is)
#   scripts/gpu-test.sh run       run what it holds (there, where the GPU is)
#
# The GPU machine has no Go: build here, carry .gpu/ with the call (it is
# git-ignored; a call carries at most 64 MiB with the working tree, so the
# binaries travel compressed and the build fails when the archive comes near
# that) and run "scripts/gpu-test.sh run" there from the repository root.
#
# The run unpacks the archive into a temporary directory, then, in order:
#   - each test binary, in its package's directory (tests read their files
#     from there), with VRAM_REQUIRE_CUDA=1 so that a missing GPU or library
#     fails instead of skipping; the root package's binary runs every test
#     of the root package, its GPU tests (TestCUDA*) included;
#   - every example, from the repository root as "go run ./examples/NAME"
#     would run it, with a time limit, checking that it exits with status 0;
#   - "vram doctor", as text and as JSON, which must pass.
# The whole run keeps to a budget (GPU_TEST_BUDGET seconds, default 420):
# each test binary gets at most what is left, and a step that no longer fits
# is reported as not run, which fails the run.
#
# Without a GPU the run still goes through every step, without
# VRAM_REQUIRE_CUDA, so that the CUDA tests skip; the summary says NO GPU,
# counts the skips, and the exit status is 3, never 0: such a run tested
# nothing GPU-facing. Exit status 1 means a step failed.
#
# Logs go to $OUT when it is set (else .gpu/out): summary.txt, doctor.txt
# and logs.tar.gz with every step's log; the summary is also printed last.
set -euo pipefail

# Packages with CUDA tests, as "path" or "path:test regexp". Add new ones here.
PKGS=(
	.
	native/load
	native/cuda
	native/nvrtc
	native/cublas
	native/cudnn
	backend/cuda
	native/nvml
	native/nccl
	"parallel:NCCL|TestCUDA"
	amp
	nn/models
	monitor
	"cmd/vram:TestDoctor|TestReplayDevice"
	"data:TestCUDA"
)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=.gpu
PACK=$BIN/bins.tar.xz
LIMIT_MIB=56                                   # of the archive; the working tree travels too
BUDGET_S=${GPU_TEST_BUDGET:-420}               # the whole run
TEST_TIMEOUT_S=${GPU_TEST_TIMEOUT:-240}        # one test binary at most
EXAMPLE_TIMEOUT_S=${GPU_TEST_EXAMPLE_TIMEOUT:-90} # one example

name_of() { # native/cuda -> native_cuda, . -> root
	local p=${1%%:*}
	[[ $p == . ]] && p=root
	echo "${p//\//_}"
}

# examples lists the directories under examples/ that hold a program.
examples() {
	local d
	for d in "$ROOT"/examples/*/; do
		[[ -f $d/main.go ]] && basename "$d"
	done
}

build() {
	cd "$ROOT"
	local stage=$BIN/bin
	rm -rf "$stage" "$PACK" "$BIN"/*.test "$BIN"/vram
	mkdir -p "$stage/examples"
	export CGO_ENABLED=0
	for entry in "${PKGS[@]}"; do
		pkg=${entry%%:*}
		echo "build ./$pkg (tests)"
		go test -c -trimpath -ldflags='-s -w' -o "$stage/$(name_of "$pkg").test" "./$pkg"
	done
	echo "build the vram binary"
	go build -trimpath -ldflags='-s -w' -o "$stage/vram" ./cmd/vram
	local list
	list=$(examples)
	[[ -n $list ]] || {
		echo "no example under examples/" >&2
		exit 1
	}
	echo "build the examples:" $list
	go build -trimpath -ldflags='-s -w' -o "$stage/examples/" $(printf './examples/%s ' $list)
	for ex in $list; do
		[[ -x $stage/examples/$ex ]] || {
			echo "examples/$ex did not build a binary" >&2
			exit 1
		}
	done
	local raw
	raw=$(du -sk "$stage" | cut -f1)
	tar -C "$BIN" -cf - bin | xz -T0 -9 >"$PACK"
	rm -rf "$stage"
	local kib
	kib=$(du -sk "$PACK" | cut -f1)
	printf '%s: %d MiB of binaries packed into %d MiB\n' "$PACK" $((raw / 1024)) $((kib / 1024))
	if ((kib > LIMIT_MIB * 1024)); then
		echo "error: $PACK is over $LIMIT_MIB MiB; a device call carries at most 64 MiB with the working tree" >&2
		exit 1
	fi
}

# gpu_present reports whether this machine has an NVIDIA GPU; it sets
# gpu_note to what it saw.
gpu_present() {
	local list=""
	if command -v nvidia-smi >/dev/null 2>&1 && list=$(nvidia-smi -L 2>&1) && grep -q '^GPU ' <<<"$list"; then
		gpu_note=$(grep -c '^GPU ' <<<"$list")" GPU(s): "$(grep '^GPU ' <<<"$list" | head -1)
		return 0
	fi
	if compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
		gpu_note="device files $(echo /dev/nvidia[0-9]*), nvidia-smi does not list them"
		return 0
	fi
	if [[ -n ${list:-} ]]; then
		gpu_note="no NVIDIA GPU: nvidia-smi -L says \"$(head -1 <<<"$list")\" and there is no /dev/nvidia0"
	else
		gpu_note="no NVIDIA GPU: nvidia-smi is not installed and there is no /dev/nvidia0"
	fi
	return 1
}

run() {
	cd "$ROOT"
	local t0=$SECONDS
	local deadline=$((t0 + BUDGET_S))
	local out=${OUT:-$ROOT/$BIN/out}
	mkdir -p "$out"
	work=$(mktemp -d "${TMPDIR:-/tmp}/vram-gpu-test.XXXXXX") # global: the trap runs after run returns
	trap 'rm -rf "$work"' EXIT
	local logs=$work/logs
	mkdir -p "$logs"
	if [[ ! -f $PACK ]]; then
		echo "no $PACK: run \"scripts/gpu-test.sh build\" where Go is, and carry .gpu" | tee "$out/summary.txt" >&2
		return 1
	fi
	tar -C "$work" -xJf "$PACK"
	local bin=$work/bin

	local gpu=1 gpu_note=""
	if gpu_present; then
		export VRAM_REQUIRE_CUDA=1
	else
		gpu=0
		unset VRAM_REQUIRE_CUDA
	fi
	export NCCL_NVLS_ENABLE=0
	echo "gpu: $gpu_note"
	if ((gpu)); then
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | sed 's/^/gpu: /' || true
	fi

	local rows=() failed=0 skips=0 steps=0
	row() { rows+=("$(printf '%-26s %-8s %s' "$1" "$2" "$3")"); }

	# tests
	local entry pkg filter name log rc ms pass fail skip status left limit start
	for entry in "${PKGS[@]}"; do
		pkg=${entry%%:*}
		filter=""
		[[ $entry == *:* ]] && filter=${entry#*:}
		name=$(name_of "$pkg")
		log=$logs/$name.log
		steps=$((steps + 1))
		if [[ ! -x $bin/$name.test ]]; then
			row "$pkg" MISSING "no $name.test in $PACK: build again"
			failed=$((failed + 1))
			continue
		fi
		left=$((deadline - SECONDS))
		if ((left < 30)); then
			row "$pkg" "NOT RUN" "out of time (GPU_TEST_BUDGET=${BUDGET_S}s)"
			failed=$((failed + 1))
			continue
		fi
		limit=$((left - 15 < TEST_TIMEOUT_S ? left - 15 : TEST_TIMEOUT_S))
		args=(-test.v -test.count=1 "-test.timeout=${limit}s")
		[[ -n $filter ]] && args+=(-test.run "$filter")
		start=$SECONDS
		set +e
		(cd "$ROOT/$pkg" && timeout --kill-after=10 $((limit + 10)) "$bin/$name.test" "${args[@]}") >"$log" 2>&1
		rc=$?
		set -e
		ms=$(((SECONDS - start) * 1000))
		pass=$(grep -c -- '^--- PASS' "$log" || true)
		fail=$(grep -c -- '--- FAIL' "$log" || true)
		skip=$(grep -c -- '--- SKIP' "$log" || true)
		skips=$((skips + skip))
		status=ok
		if ((rc != 0)); then
			status=FAIL
			((rc == 124 || rc == 137)) && status=TIMEOUT
			failed=$((failed + 1))
		elif ((!gpu && skip > 0)); then
			status=skipped
		fi
		row "$pkg" "$status" "$(printf 'pass %-3s fail %-3s skip %-3s %4d s' "$pass" "$fail" "$skip" $((ms / 1000)))"
	done

	# examples
	local ex bad_examples=()
	for ex in $(examples); do
		log=$logs/example_$ex.log
		steps=$((steps + 1))
		if [[ ! -x $bin/examples/$ex ]]; then
			row "examples/$ex" MISSING "not in $PACK: build again"
			failed=$((failed + 1))
			continue
		fi
		left=$((deadline - SECONDS))
		if ((left < 10)); then
			row "examples/$ex" "NOT RUN" "out of time (GPU_TEST_BUDGET=${BUDGET_S}s)"
			failed=$((failed + 1))
			continue
		fi
		limit=$((left - 5 < EXAMPLE_TIMEOUT_S ? left - 5 : EXAMPLE_TIMEOUT_S))
		start=$SECONDS
		set +e
		(cd "$ROOT" && timeout --kill-after=5 "$limit" "$bin/examples/$ex") >"$log" 2>&1
		rc=$?
		set -e
		status=ok
		if ((rc != 0)); then
			status=FAIL
			((rc == 124 || rc == 137)) && status=TIMEOUT
			failed=$((failed + 1))
		fi
		[[ $status == ok ]] || bad_examples+=("$ex")
		row "examples/$ex" "$status" "$(printf 'exit %-3d %4d s' "$rc" $((SECONDS - start)))"
	done

	# vram doctor, as text and as JSON
	steps=$((steps + 1))
	left=$((deadline - SECONDS))
	limit=$(((left - 5) / 2 < 120 ? (left - 5) / 2 : 120))
	local drc=-1 jrc=-1
	: >"$logs/doctor.txt"
	if ((limit >= 10)); then
		set +e
		(cd "$work" && timeout --kill-after=5 "$limit" "$bin/vram" doctor) >"$logs/doctor.txt" 2>&1
		drc=$?
		(cd "$work" && timeout --kill-after=5 "$limit" "$bin/vram" doctor --json) >"$logs/doctor.json" 2>"$logs/doctor.stderr"
		jrc=$?
		set -e
	fi
	status=ok
	if ((limit < 10)); then
		status="NOT RUN"
		failed=$((failed + 1))
	elif ((gpu)); then
		if ((drc != 0 || jrc != 0)); then
			status=FAIL
			failed=$((failed + 1))
		fi
	elif grep -q '^CUDA not checked: ' "$logs/doctor.txt" && ! grep -q 'FAILED' "$logs/doctor.txt"; then
		status=skipped # exit 1 without a GPU, as it must: CPU and sim checks passed
	else
		status=FAIL
		failed=$((failed + 1))
	fi
	if [[ $status == "NOT RUN" ]]; then
		row "vram doctor" "$status" "out of time (GPU_TEST_BUDGET=${BUDGET_S}s)"
	else
		row "vram doctor" "$status" "exit $drc (--json: exit $jrc)"
	fi

	{
		echo "== failures =="
		grep -h -B2 -A12 -- '--- FAIL' "$logs"/*.log 2>/dev/null | head -80 || true
		for ex in "${bad_examples[@]}"; do
			echo "-- examples/$ex (last lines)"
			tail -20 "$logs/example_$ex.log"
		done
		echo
		echo "== vram doctor =="
		cat "$logs/doctor.txt"
	} >"$work/details.txt"
	cat "$work/details.txt"

	local elapsed=$((SECONDS - t0)) verdict code
	if ((failed > 0)); then
		verdict="FAILED: $failed of $steps steps"
		code=1
	elif ((!gpu)); then
		verdict="NO GPU: the CUDA tests skipped ($skips skips) and the examples ran on the CPU and sim; nothing GPU-facing was tested (exit 3)"
		code=3
	else
		verdict="all $steps steps passed on the GPU"
		code=0
	fi
	{
		echo
		echo "== summary ($elapsed s of a ${BUDGET_S} s budget; logs in $out/logs.tar.gz) =="
		echo "gpu: $gpu_note"
		printf '%s\n' "${rows[@]}"
		echo "$verdict"
	} | tee "$out/summary.txt"
	cp "$logs/doctor.txt" "$out/doctor.txt"
	cp "$out/summary.txt" "$logs/summary.txt"
	tar -C "$work" -czf "$out/logs.tar.gz" logs
	return $code
}

case "${1:-build}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 [build|run]" >&2
	exit 2
	;;
esac

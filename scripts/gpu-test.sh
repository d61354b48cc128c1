#!/usr/bin/env bash
# gpu-test.sh builds small, stripped, cgo-free test binaries for the packages
# that touch CUDA, plus a stripped vram binary, and runs them on a GPU machine.
#
#   scripts/gpu-test.sh          build into .gpu/ (here, where Go is)
#   scripts/gpu-test.sh run      run what .gpu/ holds (there, where the GPU is)
#
# The GPU machine has no Go: build here, carry .gpu/ with the call (it is
# git-ignored) and run "scripts/gpu-test.sh run" there from the repository
# root. Each test binary runs in its package's directory (tests read their
# files from there) with VRAM_REQUIRE_CUDA=1, so a missing GPU or library
# fails instead of skipping; then "vram doctor" runs, as text and as JSON.
# Logs go to $OUT (or .gpu/logs when OUT is unset) and a summary table is
# printed last. A device call carries at most 64 MiB: the build prints the
# total and warns when it comes near.
set -euo pipefail

# Packages with CUDA tests, as "path" or "path:test regexp". Add new ones here.
PKGS=(
	.
	native/load
	native/cuda
	native/nvrtc
	native/cublas
	backend/cuda
	native/nvml
	monitor
	"cmd/vram:TestDoctor"
)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=.gpu
LIMIT_MIB=60

name_of() { # native/cuda -> native_cuda, . -> root
	local p=${1%%:*}
	[[ $p == . ]] && p=root
	echo "${p//\//_}"
}

build() {
	cd "$ROOT"
	mkdir -p "$BIN"
	rm -f "$BIN"/*.test "$BIN"/vram
	export CGO_ENABLED=0
	for entry in "${PKGS[@]}"; do
		pkg=${entry%%:*}
		echo "build ./$pkg"
		go test -c -trimpath -ldflags='-s -w' -o "$BIN/$(name_of "$pkg").test" "./$pkg"
	done
	echo "build the vram binary"
	go build -trimpath -ldflags='-s -w' -o "$BIN/vram" ./cmd/vram
	local kib
	kib=$(du -sk "$BIN" | cut -f1)
	printf '%s: %d MiB\n' "$BIN" $((kib / 1024))
	if ((kib > LIMIT_MIB * 1024)); then
		echo "warning: $BIN is over $LIMIT_MIB MiB; a device call carries at most 64 MiB with the working tree" >&2
	fi
}

run() {
	cd "$ROOT"
	local out=${OUT:-$ROOT/$BIN/logs}
	mkdir -p "$out"
	export VRAM_REQUIRE_CUDA=1 NCCL_NVLS_ENABLE=0
	local rows=() failed=0
	nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' || true
	for entry in "${PKGS[@]}"; do
		pkg=${entry%%:*}
		filter=""
		[[ $entry == *:* ]] && filter=${entry#*:}
		name=$(name_of "$pkg")
		bin="$ROOT/$BIN/$name.test"
		log="$out/$name.log"
		if [[ ! -x $bin ]]; then
			rows+=("$(printf '%-24s %-6s %s' "$pkg" MISSING "no $BIN/$name.test: run the build here first")")
			failed=1
			continue
		fi
		args=(-test.v -test.count=1 -test.timeout=5m)
		[[ -n $filter ]] && args+=(-test.run "$filter")
		start=${EPOCHREALTIME/./}
		set +e
		(cd "$ROOT/$pkg" && "$bin" "${args[@]}") >"$log" 2>&1
		rc=$?
		set -e
		ms=$(((${EPOCHREALTIME/./} - start) / 1000))
		pass=$(grep -c -- '^--- PASS' "$log" || true)
		fail=$(grep -c -- '--- FAIL' "$log" || true)
		skip=$(grep -c -- '--- SKIP' "$log" || true)
		status=ok
		if ((rc != 0)); then
			status=FAIL
			failed=1
		fi
		rows+=("$(printf '%-24s %-6s pass %-3s fail %-3s skip %-3s %7d ms' "$pkg" "$status" "$pass" "$fail" "$skip" "$ms")")
	done

	set +e
	"$ROOT/$BIN/vram" doctor >"$out/doctor.txt" 2>&1
	drc=$?
	"$ROOT/$BIN/vram" doctor --json >"$out/doctor.json" 2>"$out/doctor.stderr"
	set -e
	dstatus=ok
	if ((drc != 0)); then
		dstatus=FAIL
		failed=1
	fi
	rows+=("$(printf '%-24s %-6s exit %d' "vram doctor" "$dstatus" "$drc")")

	echo
	echo "== failures =="
	grep -h -B2 -A12 -- '--- FAIL' "$out"/*.log 2>/dev/null | head -80 || true
	echo
	echo "== vram doctor =="
	cat "$out/doctor.txt"
	echo
	echo "== summary (logs in $out) =="
	printf '%s\n' "${rows[@]}"
	return $failed
}

case "${1:-build}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 [build|run]" >&2
	exit 2
	;;
esac

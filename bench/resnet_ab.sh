#!/usr/bin/env bash
# resnet_ab.sh times the ResNet-50 training step (channels-last, replayed as
# a CUDA graph, float32 and bf16) of two or more vram-bench binaries in turn,
# A then B (then C...), twice, with PyTorch's fastest setting for the step (torch.compile and a
# whole-step CUDA graph, bench/torch_resnet_compile.py) between the rounds,
# all in one call on the GPU machine: a change is judged against the card's
# drift within the call rather than against numbers from another machine.
# Build both sides here, the change and its base:
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .gpu/vram-bench ./bench/cuda
#   git worktree add /tmp/base BASE && (cd /tmp/base && CGO_ENABLED=0 go build \
#     -trimpath -ldflags='-s -w' -o "$OLDPWD/.gpu/vram-bench-base" ./bench/cuda)
#
# then, there: bench/resnet_ab.sh [BIN...] (default .gpu/vram-bench-base and
# .gpu/vram-bench, called A and B; more binaries are C, D, ... in the order
# given; logs and JSON under $OUT).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/.gpu/logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=("$ROOT/.gpu/vram-bench-base" "$ROOT/.gpu/vram-bench")
names=(A B C D E F)
steps=resnet50_step_cl_f32_graph,resnet50_step_cl_bf16_graph
for round in 1 2; do
	for i in "${!bins[@]}"; do
		side=${names[$i]}
		timeout 120 "${bins[$i]}" -only "$steps" -quick >"$OUT/resnet_${side}_$round.json" 2>"$OUT/resnet_${side}_$round.log"
		echo "$side round $round (rc $?):"
		grep -h '"resnet50_step' "$OUT/resnet_${side}_$round.json" | cut -c1-110
	done
	if [ "$round" = 1 ]; then
		for p in f32 bf16; do
			timeout 200 python3 "$ROOT/bench/torch_resnet_compile.py" compile-graph "$p" 2>&1 | grep median
		done
	fi
done

#!/usr/bin/env bash
# run.sh runs vram's CUDA benchmarks and PyTorch's in one call on the GPU
# machine and prints the table of ratios. Build the vram side first, here:
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .gpu/vram-bench ./bench/cuda
#
# then, there: bench/run.sh [name-prefixes] (logs and JSON under $OUT).
# Names: alloc_free thread copy ewise gemm tiny mlp overlap ddp amp ckpt
# findbatch allreduce (comma-separated prefixes; none: all).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/.gpu/logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
only=${1:-}
"$ROOT/.gpu/vram-bench" -only "$only" >"$OUT/bench_vram.json" 2>"$OUT/bench_vram.log" || { cat "$OUT/bench_vram.log"; }
python3 "$ROOT/bench/torch_bench.py" "$only" >"$OUT/bench_torch.json" 2>"$OUT/bench_torch.log" || { tail -5 "$OUT/bench_torch.log"; }
python3 "$ROOT/bench/compare.py" "$OUT/bench_vram.json" "$OUT/bench_torch.json" | tee "$OUT/bench_table.md"

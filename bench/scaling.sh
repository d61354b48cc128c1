#!/usr/bin/env bash
# scaling.sh runs the multi-GPU scaling runs on every GPU count of this
# machine that is a power of two (1, 2, 4, 8): vram's MLP step under DDP and
# its all-reduce (bench/scaling, one process per GPU under "vram run"),
# next to PyTorch's (bench/torch_scaling.py under torchrun), in one call,
# and prints the table for BENCHMARKS.md: step time, rows/s, weak-scaling
# efficiency (throughput at N GPUs over N times that at one) and the
# all-reduce's bus bandwidth, vram against PyTorch.
#
#   CGO_ENABLED=0 go build -o BIN/vram ./cmd/vram
#   CGO_ENABLED=0 go build -o BIN/scaling ./bench/scaling
#   for e in dataparallel modelparallel pipeline; do CGO_ENABLED=0 go build -o BIN/$e ./examples/$e; done
#   bench/scaling.sh BIN [OUT]
#
# With the examples in BIN it also runs them on all the GPUs (DataParallel
# with the loss on each GPU: memory and time per GPU; the two-sub-network
# model on cuda:0 and cuda:1; naive model parallel against
# parallel.Pipeline), and "vram smi" once, into OUT/*.log.
#
# The JSON rows go to OUT/scaling.jsonl (OUT defaults to $OUT, else a new
# temporary folder), the ranks' logs beside them.
set -euo pipefail
bin=${1:?usage: bench/scaling.sh BIN [OUT] (BIN holds the vram and scaling binaries)}
out=${2:-${OUT:-$(mktemp -d)}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$gpus" -lt 1 ]; then
	echo "scaling.sh: no GPU here (nvidia-smi lists none)" >&2
	exit 1
fi
rows=$out/scaling.jsonl
: > "$rows"
# vram's ranks prefix their lines with "[rank N] ": keep rank 0's JSON.
vramrows() { sed -n 's/^\[rank 0\] \({.*}\)$/\1/p'; }
for n in 1 2 4 8; do
	[ "$n" -le "$gpus" ] || break
	echo "== $n GPU(s)" >&2
	timeout 300 "$bin/vram" run --nproc-per-node "$n" "$bin/scaling" -mode ddp 2> "$out/vram_ddp_$n.log" | vramrows >> "$rows" || echo "vram ddp on $n GPUs failed: $out/vram_ddp_$n.log" >&2
	timeout 300 torchrun --standalone --nproc-per-node "$n" "$here/torch_scaling.py" ddp > "$out/torch_ddp_$n.out" 2> "$out/torch_ddp_$n.log" || echo "torch ddp on $n GPUs failed: $out/torch_ddp_$n.log" >&2
	grep '^{' "$out/torch_ddp_$n.out" >> "$rows" || true
	if [ "$n" -ge 2 ]; then
		timeout 300 "$bin/vram" run --nproc-per-node "$n" "$bin/scaling" -mode allreduce -size-mib 1024 2> "$out/vram_ar_$n.log" | vramrows >> "$rows" || echo "vram all-reduce on $n GPUs failed: $out/vram_ar_$n.log" >&2
		timeout 300 torchrun --standalone --nproc-per-node "$n" "$here/torch_scaling.py" allreduce 1024 > "$out/torch_ar_$n.out" 2> "$out/torch_ar_$n.log" || echo "torch all-reduce on $n GPUs failed: $out/torch_ar_$n.log" >&2
		grep '^{' "$out/torch_ar_$n.out" >> "$rows" || true
	fi
done
for e in dataparallel modelparallel pipeline; do
	if [ -x "$bin/$e" ]; then
		timeout 300 "$bin/$e" > "$out/$e.log" 2>&1 || echo "$e failed: $out/$e.log" >&2
	fi
done
"$bin/vram" smi > "$out/smi.log" 2>&1 || true
python3 - "$rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v = {(r["name"], r["ranks"]): r["value"] for r in rows}
ns = sorted({r["ranks"] for r in rows})
def get(name, n):
    return v.get((name, n))
def f(x, fmt="%.2f"):
    return fmt % x if x is not None else "-"
print("| GPUs | vram step (ms) | vram rows/s | vram efficiency | PyTorch DDP step (ms) | PyTorch rows/s | PyTorch efficiency | vram bus bandwidth (GB/s) | PyTorch NCCL bus bandwidth (GB/s) | vram / PyTorch |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n in ns:
    cells = [str(n)]
    for p in ("", "torch_"):
        step, thr, one = get(p + "ddp_mlp_step", n), get(p + "ddp_mlp_throughput", n), get(p + "ddp_mlp_throughput", 1)
        eff = thr / (n * one) if thr and one else None
        cells += [f(step), f(thr, "%.0f"), f(eff * 100 if eff else None, "%.1f%%")]
    bv, bt = get("allreduce_busbw", n), get("torch_allreduce_busbw", n)
    cells += [f(bv, "%.1f"), f(bt, "%.1f"), f(bv / bt if bv and bt else None, "%.3f")]
    print("| " + " | ".join(cells) + " |")
PY

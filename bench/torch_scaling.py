"""PyTorch's side of the multi-GPU scaling runs (bench/scaling.sh): the
same MLP step under DistributedDataParallel with a fixed batch per rank,
and the in-place all-reduce of a large float32 tensor, one process per GPU
under torchrun. Rank 0 prints one JSON object a line, named as
bench/scaling's rows with a "torch_" prefix:

    torchrun --nproc-per-node 2 bench/torch_scaling.py ddp
    torchrun --nproc-per-node 8 bench/torch_scaling.py allreduce 1024

The DDP step is PyTorch's fastest eager setting for it: fused AdamW and
gradient_as_bucket_view=True. Timing matches bench/scaling: a barrier (an
all-reduce of one value, read back) before and after the timed steps, and
around each timed all-reduce.
"""
import json, os, statistics, sys, time
import torch
import torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "ddp"
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
dist.init_process_group("nccl", device_id=dev)
torch.backends.cuda.matmul.allow_tf32 = False  # vram's float32 GEMMs are float32


def barrier():
    t = torch.zeros(1, device=dev)
    dist.all_reduce(t)
    t.item()


def emit(name, value, unit, note):
    if rank == 0:
        print(json.dumps({"name": "torch_" + name, "value": value, "unit": unit, "note": note, "ranks": size}), flush=True)


if mode == "ddp":
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    torch.manual_seed(1 + rank)
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(width, width))
        if i < 3:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)

    def step():
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.reset_peak_memory_stats(dev)
    barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    barrier()
    ms = (time.perf_counter() - t0) * 1000 / steps
    note = f"4 x Linear {width} + ReLU, {batch} rows a rank, MSE, fused AdamW, DDP(gradient_as_bucket_view=True) over NCCL"
    emit("ddp_mlp_step", ms, "ms", note)
    emit("ddp_mlp_throughput", batch * size / ms * 1000, "rows/s", note)
    emit("ddp_mlp_peak_allocated_rank0", torch.cuda.max_memory_allocated(dev) / 2**30, "GiB", "max_memory_allocated on rank 0")
elif mode == "allreduce":
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    n = mib * 2**20 // 4
    t = torch.ones(n, device=dev)
    ts = []
    for i in range(3 + reps):
        t.fill_(1)
        barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        barrier()
        if i >= 3:
            ts.append(time.perf_counter() - t0)
    assert t[0].item() == size and t[-1].item() == size, "the all-reduced ones are wrong"
    sec = statistics.median(ts)
    alg = n * 4 / sec / 1e9
    note = f"{mib} MiB float32, sum in place, NCCL, median of {reps}"
    emit("allreduce_time", sec * 1000, "ms", note)
    emit("allreduce_algbw", alg, "GB/s", note)
    emit("allreduce_busbw", alg * 2 * (size - 1) / size, "GB/s", note + "; bus bandwidth = algorithm bandwidth x 2(n-1)/n")
else:
    sys.exit(f"unknown mode {mode!r}: want ddp or allreduce")
dist.destroy_process_group()

"""PyTorch's side of vram's CUDA benchmarks (bench/cuda/main.go): the same
names, units and measurements, one JSON object a line. Run on the GPU
machine by bench/run.sh."""
import json
import statistics
import sys
import time

import torch

def emit(name, value, unit, note=""):
    print(json.dumps({"name": name, "value": value, "unit": unit, "note": note}), flush=True)

def gpu_time(fn, warm=3, reps=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1000)
    return statistics.median(ts)

def wall(fn, reps=5):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)

def time_it(f, reps=10):
    """Median wall time of f in ms, each run synchronized, after 3 warm-ups."""
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1000

only = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else None
def want(name):
    return only is None or any(name.startswith(p) for p in only)

dev = torch.device("cuda:0")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

if want("alloc_free"):
    torch.empty(1 << 20, dtype=torch.uint8, device=dev)
    n = 100000
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            x = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
            del x
        ts.append((time.perf_counter() - t0) / n)
    emit("alloc_free_1MiB_cuda", statistics.median(ts) * 1e6, "us", "torch.empty + del (Python included)")

if want("copy"):
    n = 1 << 30
    dv = torch.empty(n, dtype=torch.uint8, device=dev)
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(n, dtype=torch.uint8)
    emit("copy_h2d_1GiB_pinned", n / wall(lambda: dv.copy_(pinned)) / 1e9, "GB/s", "dv.copy_(pinned)")
    emit("copy_d2h_1GiB_pinned", n / wall(lambda: pinned.copy_(dv)) / 1e9, "GB/s", "pinned.copy_(dv)")
    emit("copy_h2d_1GiB_pageable", n / wall(lambda: dv.copy_(pageable)) / 1e9, "GB/s", "")
    emit("copy_d2h_1GiB_pageable", n / wall(lambda: pageable.copy_(dv)) / 1e9, "GB/s", "")
    dv2 = torch.empty_like(dv)
    emit("copy_d2d_1GiB", 2 * n / gpu_time(lambda: dv2.copy_(dv)) / 1e12, "TB/s", "bytes read + written")
    del dv, dv2, pinned, pageable
    if torch.cuda.device_count() >= 2:
        src = torch.ones(n, dtype=torch.uint8, device="cuda:0")
        dst = torch.empty(n, dtype=torch.uint8, device="cuda:1")
        emit("copy_peer_1GiB", n / wall(lambda: (dst.copy_(src), torch.cuda.synchronize(1)), reps=10) / 1e9, "GB/s", "cuda:0 -> cuda:1 copy_")
        del src, dst

if want("ewise"):
    n = 1 << 28
    a = torch.full((n,), 1.5, device=dev)
    b = torch.full((n,), -0.25, device=dev)
    c = torch.empty_like(a)
    emit("ewise_add_2p28_f32", 12 * n / gpu_time(lambda: torch.add(a, b, out=c)) / 1e12, "TB/s", "")
    emit("ewise_gelu_2p28_f32", 8 * n / gpu_time(lambda: torch.nn.functional.gelu(a)) / 1e12, "TB/s", "new output from the cache")
    emit("ewise_mul_scalar_inplace_2p28_f32", 8 * n / gpu_time(lambda: a.mul_(1.0000001)) / 1e12, "TB/s", "")
    x2, bias = a.view(-1, 4096), b[:4096]
    emit("ewise_bias_gelu_2p28_f32", 8 * n / gpu_time(lambda: torch.nn.functional.gelu(x2 + bias)) / 1e12, "TB/s", "eager: x + bias, then gelu (two kernels)")
    emit("ewise_bias_relu_2p28_f32", 8 * n / gpu_time(lambda: torch.relu(x2 + bias)) / 1e12, "TB/s", "eager: x + bias, then relu (two kernels)")
    at, bt, ct = a.view(1 << 14, 1 << 14), b.view(1 << 14, 1 << 14).t(), c.view(1 << 14, 1 << 14)
    emit("ewise_add_transposed_2p28_f32", 12 * n / gpu_time(lambda: torch.add(at, bt, out=ct)) / 1e12, "TB/s", "")
    emit("ewise_copy_transposed_2p28_f32", 8 * n / gpu_time(lambda: ct.copy_(bt)) / 1e12, "TB/s", "ct.copy_(b.t())")
    s = torch.empty((), device=dev)
    emit("reduce_sum_2p28_f32", 4 * n / gpu_time(lambda: torch.sum(a, dim=0, out=s)) / 1e12, "TB/s", "")
    del a, b, c

if want("gemm"):
    n = 8192
    for name, dt, tf32 in [("gemm_8192_bf16", torch.bfloat16, False), ("gemm_8192_f32_tf32", torch.float32, True), ("gemm_8192_f32", torch.float32, False)]:
        if not want(name):
            continue
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device=dev).to(dt)
        b = torch.randn(n, n, device=dev).to(dt)
        o = torch.empty(n, n, device=dev, dtype=dt)
        reps = 5 if (dt == torch.float32 and not tf32) else 20
        t = gpu_time(lambda: torch.matmul(a, b, out=o), warm=2, reps=reps)
        emit(name, 2 * n ** 3 / t / 1e12, "TFLOP/s", "")
        del a, b, o
    torch.backends.cuda.matmul.allow_tf32 = False

if want("tiny"):
    x = torch.ones(1, device=dev)
    n = 100000
    for _ in range(1000):
        y = x + 1
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        y = x + 1
    torch.cuda.synchronize()
    emit("tiny_x_plus_1", (time.perf_counter() - t0) / n * 1e6, "us", "y = x + 1")
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    emit("tiny_x_add_inplace", (time.perf_counter() - t0) / n * 1e6, "us", "x.add_(1)")

if want("mlp"):
    width, batch = 4096, 1024
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(width, width))
        if i < 3:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)
    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    def fwd():
        loss = torch.nn.functional.mse_loss(model(x), y)
        del loss
    def fwd_bwd():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.zero_grad(set_to_none=True)
    emit("mlp_fwd_f32", time_it(fwd), "ms", "forward and loss")
    emit("mlp_fwdbwd_f32", time_it(fwd_bwd), "ms", "forward, loss and backward")
    emit("mlp_step_f32", time_it(step), "ms", "eager, default AdamW (foreach)")
    emit("mlp_peak_reserved", torch.cuda.max_memory_reserved() / (1 << 30), "GiB", "")

if want("overlap"):
    # A 1 GiB non-blocking copy from pinned memory on one side stream and an
    # 8192^3 float32 GEMM (no TF32) on another: alone, then at once.
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192
    pinned = torch.zeros(1 << 28).pin_memory()
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    cs, gs = torch.cuda.Stream(), torch.cuda.Stream()
    def start_copy():
        with torch.cuda.stream(cs):
            return pinned.to(dev, non_blocking=True)
    def start_gemm():
        with torch.cuda.stream(gs):
            return a @ b
    def timed(fn, reps=7):
        ts = []
        for i in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            outs = fn()
            torch.cuda.synchronize()
            if i > 0:
                ts.append((time.perf_counter() - t0) * 1e3)
            del outs
        return statistics.median(ts)
    tc = timed(lambda: [start_copy()])
    tg = timed(lambda: [start_gemm()])
    tb = timed(lambda: [start_copy(), start_gemm()])
    emit("overlap_copy_h2d_1GiB", tc, "ms", "pinned.to(non_blocking=True) on a side stream, alone")
    emit("overlap_gemm_8192_f32", tg, "ms", "a @ b on another stream, alone")
    emit("overlap_both", tb, "ms", "both at once")
    emit("overlap_ratio", tb / max(tc, tg), "x", "both / the longer alone (target <= 1.1)")
    del pinned, a, b

if want("allreduce"):
    # One rank on cuda:0 with the nccl backend, as vram's side runs it
    # through parallel.NewNCCLGroup: each repetition is all_reduce in place
    # and a wait for the current stream (the collective runs on PyTorch's
    # NCCL stream, which the current one waits for).
    import os
    import socket
    import torch.distributed as dist
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1)
    stream = torch.cuda.current_stream()
    def run(x, op, warm, n):
        for _ in range(warm):
            dist.all_reduce(x, op=op)
        stream.synchronize()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            dist.all_reduce(x, op=op)
            stream.synchronize()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)
    small = torch.ones(1, device=dev)
    emit("allreduce_4B", run(small, dist.ReduceOp.SUM, 200, 2000) * 1e6, "us", "dist.all_reduce (sum, 1 rank) + stream sync, median of 2000")
    size = 1 << 30
    big = torch.ones(size // 4, device=dev)
    emit("allreduce_1GiB", size / run(big, dist.ReduceOp.SUM, 3, 20) / 1e9, "GB/s", "sum in place, 1 rank: size / (call + sync)")
    emit("allreduce_avg_1GiB", size / run(big, dist.ReduceOp.AVG, 3, 20) / 1e9, "GB/s", "avg in place, 1 rank: size / (call + sync)")
    del small, big
    dist.destroy_process_group()

if want("ddp"):
    # The MLP step plainly and under DistributedDataParallel, world size 1,
    # NCCL, in one process.
    import os, socket
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1)
    width, batch = 4096, 1024
    def build():
        torch.manual_seed(1)
        layers = []
        for i in range(4):
            layers.append(torch.nn.Linear(width, width))
            if i < 3:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers).to(dev)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)
    m = build()
    o = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    def plain():
        torch.nn.functional.mse_loss(m(x), y).backward()
        o.step()
        o.zero_grad(set_to_none=True)
    tp = time_it(plain)
    m2 = DDP(build(), device_ids=[0], gradient_as_bucket_view=True)
    o2 = torch.optim.AdamW(m2.parameters(), lr=1e-3, weight_decay=0.01)
    def ddp_step():
        torch.nn.functional.mse_loss(m2(x), y).backward()
        o2.step()
        o2.zero_grad(set_to_none=False)
    td = time_it(ddp_step)
    emit("ddp_plain_mlp_step_f32", tp, "ms", "plain eager step, same process")
    emit("ddp_mlp_step_f32", td, "ms", "DDP(gradient_as_bucket_view=True), world size 1, NCCL")
    emit("ddp_overhead", td / tp, "x", "DDP step / plain step")
    dist.destroy_process_group()

if want("amp"):
    # The MLP step under autocast: bf16, and fp16 with a GradScaler; eager
    # with fused AdamW (PyTorch's fastest eager optimizer setting).
    width, batch = 4096, 1024
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(width, width))
        if i < 3:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)
    for name, fused in [("foreach", False), ("fused", True)]:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=fused)
        def bf16():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        scaler = torch.amp.GradScaler("cuda")
        def fp16():
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        suffix = "" if fused else "_foreach"
        emit("amp_mlp_step_bf16" + suffix, time_it(bf16), "ms", "bf16 autocast, AdamW " + name)
        emit("amp_mlp_step_fp16_scaler" + suffix, time_it(fp16), "ms", "fp16 autocast + GradScaler, AdamW " + name)
        del opt
    # The bf16 step with the forward pass and loss under torch.compile (the
    # backward compiled with it by AOTAutograd), fused AdamW outside:
    # default mode, and "reduce-overhead" (CUDA graphs). Compiling and the
    # graph recording happen in the warm-up steps, outside the timing. A
    # failure to compile skips the row with its reason on stderr.
    import copy
    for name, mode in [("compile", "default"), ("cudagraphs", "reduce-overhead")]:
        try:
            torch._dynamo.reset()
            m = copy.deepcopy(model)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
            def loss_fn(x, y):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return torch.nn.functional.mse_loss(m(x), y)
            closs = torch.compile(loss_fn, mode=mode)
            mark = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)
            def step():
                mark()
                loss = closs(x, y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            for _ in range(5):
                step()
            torch.cuda.synchronize()
            warm = time.perf_counter() - t0
            emit("amp_mlp_step_bf16_" + name, time_it(step, reps=20), "ms",
                 "bf16 autocast, torch.compile(mode=%r), fused AdamW; compile + warm-up %.1f s excluded" % (mode, warm))
            del m, opt, closs
        except Exception as e:  # noqa: BLE001: any compiler failure skips the row
            print("amp_mlp_step_bf16_%s skipped: torch.compile(mode=%r) failed: %s: %s" % (name, mode, type(e).__name__, str(e).splitlines()[0] if str(e) else ""), file=sys.stderr, flush=True)
    torch._dynamo.reset()

if want("ckpt"):
    # Activation checkpointing: 16 x (Linear 4096 + GELU), batch 8192, MSE,
    # SGD, float32 with TF32 off; plain, and every block under
    # torch.utils.checkpoint (non-reentrant). The peak is max_memory_allocated
    # during one step, from the memory held between steps (parameters, x,
    # y), minus the parameters' bytes.
    import torch.utils.checkpoint as cp
    width, batch, layers = 4096, 8192, 16
    torch.manual_seed(1)
    blocks = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()).to(dev) for _ in range(layers)]
    params = [p for b in blocks for p in b.parameters()]
    param_bytes = sum(p.numel() * p.element_size() for p in params)
    opt = torch.optim.SGD(params, lr=1e-4)
    x = torch.randn(batch, width, device=dev)
    y = torch.randn(batch, width, device=dev)
    res = {}
    for mode in ["plain", "checkpointed"]:
        def step(ckpt=(mode == "checkpointed")):
            h = x
            for b in blocks:
                h = cp.checkpoint(b, h, use_reentrant=False) if ckpt else b(h)
            torch.nn.functional.mse_loss(h, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        step()
        step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - param_bytes
        res[mode] = (peak, time_it(step, reps=5))
    emit("ckpt_plain_peak_above_params", res["plain"][0] / 1e9, "GB", "max_memory_allocated during a step - parameter bytes")
    emit("ckpt_checkpointed_peak_above_params", res["checkpointed"][0] / 1e9, "GB", "torch.utils.checkpoint(block, use_reentrant=False) per block")
    emit("ckpt_plain_step", res["plain"][1], "ms", "forward, loss, backward, SGD step")
    emit("ckpt_checkpointed_step", res["checkpointed"][1], "ms", "every block recomputed in backward")
    emit("ckpt_time_overhead", res["checkpointed"][1] / res["plain"][1], "x", "checkpointed step / plain step")
    del blocks, params, opt, x, y
    torch.cuda.empty_cache()

# The ResNet-50 convolutions forward and backward (bench/cuda/conv.go):
# float32 NCHW with TF32 (PyTorch's default for cuDNN) and bfloat16
# channels_last, cudnn.benchmark off and on, fixed shapes and shapes that
# change every step. PyTorch keeps one algorithm cache for both modes, so
# each (config, mode) runs in a child process of its own, with empty caches.
RESNET_CONVS = [  # name, c, hw, o, k, stride, pad
    ("stem_7x7_s2", 3, 224, 64, 7, 2, 3),
    ("l1_1x1_reduce", 256, 56, 64, 1, 1, 0),
    ("l1_3x3", 64, 56, 64, 3, 1, 1),
    ("l1_1x1_expand", 64, 56, 256, 1, 1, 0),
    ("l2_3x3_s2", 128, 56, 128, 3, 2, 1),
    ("l3_3x3", 256, 14, 256, 3, 1, 1),
    ("l4_3x3", 512, 7, 512, 3, 1, 1),
]

def conv_child(cfg, bench, steps, reps):
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = bench
    dtype = torch.float32 if cfg == "fp32" else torch.bfloat16
    fmt = torch.contiguous_format if cfg == "fp32" else torch.channels_last
    def bufs(batch):
        out = []
        for _, c, hw, o, k, s, p in RESNET_CONVS:
            oh = (hw + 2 * p - k) // s + 1
            mk = lambda *shape: torch.full(shape, 0.01, dtype=dtype, device=dev).contiguous(memory_format=fmt)
            out.append((mk(batch, c, hw, hw), mk(o, c, k, k), mk(batch, o, oh, oh), s, p))
        return out
    def step(bs):
        for x, w, g, s, p in bs:
            torch.nn.functional.conv2d(x, w, None, s, p)
            torch.ops.aten.convolution_backward(g, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, True, False])
    mode = "bench_on" if bench else "bench_off"
    prefix = "conv_resnet50_" + cfg + "_"
    bs = bufs(64)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step(bs)
    torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1000
    emit(prefix + "fixed_" + mode, time_it(lambda: step(bs), reps), "ms", "conv2d + aten.convolution_backward, batch 64, steady state")
    emit(prefix + "first_step_" + mode, first, "ms", "the first step (cudnnFind in benchmark mode)")
    del bs
    ts = []
    for i in range(steps):
        bs = bufs(63 - i)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(bs)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1000)
        del bs
    emit(prefix + "varying_" + mode, statistics.median(ts), "ms", "a new batch size every step (%d..%d)" % (63, 64 - steps))

if len(sys.argv) > 2 and sys.argv[1] == "conv-child":
    cfg, bench, steps, reps = sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
    conv_child(cfg, bench, steps, reps)
elif want("conv"):
    import subprocess
    for cfg in ["fp32", "bf16_cl"]:
        for bench in ["0", "1"]:
            r = subprocess.run([sys.executable, __file__, "conv-child", cfg, bench, "8", "20"],
                               stdout=subprocess.PIPE, text=True, check=False)
            sys.stdout.write(r.stdout)
            sys.stdout.flush()

RESNET_MODES = [("nchw_f32", torch.contiguous_format, False, True), ("nchw_bf16", torch.contiguous_format, True, True),
                ("cl_f32", torch.channels_last, False, True), ("cl_bf16", torch.channels_last, True, True),
                ("nchw_f32_nobench", torch.contiguous_format, False, False), ("cl_bf16_nobench", torch.channels_last, True, False)]
if any(want("resnet50_step_" + m[0]) for m in RESNET_MODES):
    # The ResNet-50 training step of issue 14: batch 64 at 224x224, 1000
    # classes, cross entropy, SGD with momentum 0.9, cudnn.benchmark on and
    # PyTorch's default TF32 convolutions; NCHW and channels_last, float32
    # and bf16 autocast; two modes with cudnn.benchmark off for what the
    # search gains. Each mode builds a fresh model and resets the peak
    # statistics after emptying the cache, so its peaks are its own.
    try:
        import torchvision
        resnet50, origin = torchvision.models.resnet50, "torchvision " + torchvision.__version__
    except ImportError:
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nn", "models", "testdata"))
        from torchvision_resnet import ResNet, Bottleneck
        resnet50, origin = (lambda: ResNet(Bottleneck, [3, 4, 6, 3])), "a local definition (no torchvision)"
    torch.backends.cudnn.allow_tf32 = True
    batch = 64
    for mode, fmt, bf16, bench in RESNET_MODES:
        if not want("resnet50_step_" + mode):
            continue
        torch.backends.cudnn.benchmark = bench
        torch.manual_seed(0)
        model = resnet50().to(dev, memory_format=fmt)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=fmt)
        y = torch.randint(0, 1000, (batch,), device=dev)
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        first = (time.perf_counter() - t0) * 1000
        ms = time_it(step, reps=10)
        what = ("bf16 autocast" if bf16 else "float32, TF32 convolutions") + (", channels_last" if fmt is torch.channels_last else ", NCHW")
        what += ", cudnn.benchmark" if bench else ", cudnn heuristics"
        emit("resnet50_step_" + mode, ms, "ms", "batch 64, 224x224, SGD momentum, " + what + ", " + origin)
        emit("resnet50_first_step_" + mode, first, "ms", "the first step, algorithm choice (benchmark search) included")
        emit("resnet50_peak_allocated_" + mode, torch.cuda.max_memory_allocated() / (1 << 30), "GiB", "max_memory_allocated")
        emit("resnet50_peak_reserved_" + mode, torch.cuda.max_memory_reserved() / (1 << 30), "GiB", "max_memory_reserved")
        del model, opt, x, y
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False

if want("int8"):
    # Inference of the MLP (4 x Linear 4096 + ReLU) with float32, bfloat16
    # and int8 weights. Core PyTorch has no weight-only int8 linear on CUDA
    # (quantize_dynamic runs on the CPU), so the int8 rows use torchao's
    # int8 weight-only quantization when it is installed, and otherwise an
    # eager layer that dequantizes its weight (per-channel scales) and
    # calls F.linear, the way vram's composed path does.
    width = 4096
    base = torch.cuda.memory_allocated()
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(width, width))
        if i < 3:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev).eval()
    # The model's own tensors (weights, biases, scales), as vram counts them.
    gib = lambda: sum(t.numel() * t.element_size() for t in model.state_dict().values()) / (1 << 30)

    def infer(name, note, dt):
        for batch in (1024, 16):
            x = torch.randn(batch, width, device=dev, dtype=dt)
            with torch.no_grad():
                emit("int8_mlp_infer_%s_b%d" % (name, batch), time_it(lambda: model(x), reps=20), "ms", note)

    emit("int8_mlp_params_f32", gib(), "GiB", "4 x Linear 4096, float32")
    infer("f32", "float32 weights and activations", torch.float32)
    model = model.to(torch.bfloat16)
    emit("int8_mlp_params_bf16", gib(), "GiB", "bfloat16 weights")
    infer("bf16", "bfloat16 weights and activations", torch.bfloat16)
    model = model.to(torch.float32)

    class DequantLinear(torch.nn.Module):
        def __init__(self, lin):
            super().__init__()
            w = lin.weight.detach()
            scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
            self.register_buffer("wq", torch.round(w / scale).clamp(-127, 127).to(torch.int8))
            self.register_buffer("scale", scale)
            self.register_buffer("bias", lin.bias.detach().clone())

        def forward(self, x):
            w = self.wq.to(x.dtype) * self.scale.to(x.dtype)
            return torch.nn.functional.linear(x, w, self.bias.to(x.dtype))

    how = "eager dequantize + F.linear"
    try:
        from torchao.quantization import quantize_
        try:
            from torchao.quantization import Int8WeightOnlyConfig as cfg
            cfg = cfg()
        except ImportError:
            from torchao.quantization import int8_weight_only
            cfg = int8_weight_only()
        model = model.to(torch.bfloat16)
        quantize_(model, cfg)
        how = "torchao int8 weight-only"
    except Exception:
        for i, m in enumerate(model):
            if isinstance(m, torch.nn.Linear):
                model[i] = DequantLinear(m)
    torch.cuda.synchronize()
    emit("int8_mlp_params_int8", gib(), "GiB", "int8 weights (" + how + ")")
    if how == "eager dequantize + F.linear":
        infer("int8_f32", "int8 weights, float32 activations (" + how + ")", torch.float32)
    infer("int8_bf16", "int8 weights, bfloat16 activations (" + how + ")", torch.bfloat16)
    x = torch.randn(1024, width, device=dev, dtype=torch.bfloat16)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        model(x)
    torch.cuda.synchronize()
    emit("int8_mlp_infer_peak_extra", (torch.cuda.max_memory_allocated() - before) / (1 << 20), "MiB",
         "peak above parameters and input, int8 bf16 forward at batch 1024 (" + how + ")")

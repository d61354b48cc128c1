"""PyTorch's fastest settings for the ResNet-50 training step of issue 14.

The step of bench/torch_bench.py's resnet part (torchvision ResNet-50, batch
64 at 224x224, 1000 classes, cross entropy, SGD with momentum 0.9, lr 0.1),
channels_last, cudnn.benchmark, with torch.compile and fused SGD:

    python3 bench/torch_resnet_compile.py default bf16
    python3 bench/torch_resnet_compile.py reduce-overhead bf16   # CUDA graphs
    python3 bench/torch_resnet_compile.py default f32
    python3 bench/torch_resnet_compile.py graph bf16            # whole step, one CUDA graph
    python3 bench/torch_resnet_compile.py compile-graph bf16    # torch.compile, whole step captured

"graph" captures the whole eager step (forward, backward, fused SGD step, gradients
set to none) with torch.cuda.graph after warm-up steps on a side stream, as
PyTorch's documentation shows for whole-network capture, and replays it;
"compile-graph" does the same with the torch.compile'd model (default mode).
Each run compiles in its own process (about a minute), runs 3 warm-up steps
and prints the median of 15 synchronized steps. With PROFILE=1 in the
environment it then runs one more step between cudaProfilerStart and
cudaProfilerStop, for a profiler started with profiling from the start off
(ncu --profile-from-start off --graph-profiling node).
"""
import os, sys, time, torch, torchvision
mode, prec = sys.argv[1], sys.argv[2]
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = True
dev = torch.device("cuda")
torch.manual_seed(0)
fmt = torch.channels_last
model = torchvision.models.resnet50().to(dev, memory_format=fmt)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
whole = mode in ("graph", "compile-graph")
if mode == "graph":
    cm = model
elif mode == "compile-graph":
    cm = torch.compile(model)
else:
    cm = torch.compile(model, mode=None if mode == "default" else mode)
x = torch.randn(64, 3, 224, 224, device=dev).to(memory_format=fmt)
y = torch.randint(0, 1000, (64,), device=dev)
bf16 = prec == "bf16"
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        loss = torch.nn.functional.cross_entropy(cm(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
t0 = time.perf_counter()
if whole:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    step = g.replay
    step()
else:
    for _ in range(3):
        step()
torch.cuda.synchronize()
warm = time.perf_counter() - t0
ts = []
for _ in range(15):
    torch.cuda.synchronize(); t = time.perf_counter(); step(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1000)
ts.sort()
print(f"torch.compile mode={mode} {prec} channels_last fused SGD: median {ts[len(ts)//2]:.2f} ms (min {ts[0]:.2f}), compile+3 warm-up steps {warm:.1f} s, peak allocated {torch.cuda.max_memory_allocated()/2**30:.2f} GiB, reserved {torch.cuda.max_memory_reserved()/2**30:.2f} GiB", flush=True)
if os.environ.get("PROFILE") == "1":
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()

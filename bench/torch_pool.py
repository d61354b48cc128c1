"""Times the poolings of a ResNet-50 step in PyTorch, as bench/cuda's
-only pool does in vram: batch 64, channels-last, float32 and bf16, the
stem's 3x3 max pooling with stride 2 (64 channels, 112x112) and the head's
global average (2048 channels, 7x7), forward and backward (PyTorch's own
backward kernels, max pooling's from its saved indices), GPU time between
CUDA events over 20 runs."""
import torch
import torch.nn.functional as F

aten = torch.ops.aten


def timed(fn, runs=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(runs):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000 / runs


for dt in (torch.float32, torch.bfloat16):
    x = torch.randn(64, 64, 112, 112, device="cuda", dtype=dt).to(memory_format=torch.channels_last)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    dy = torch.randn_like(y)
    fwd = timed(lambda: F.max_pool2d(x, 3, 2, 1))
    bwd = timed(lambda: aten.max_pool2d_with_indices_backward(dy, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx))
    print(f"torch pool stem_max {dt}: fwd {fwd:.1f} us, bwd {bwd:.1f} us")
    x = torch.randn(64, 2048, 7, 7, device="cuda", dtype=dt).to(memory_format=torch.channels_last)
    y = F.adaptive_avg_pool2d(x, 1)
    dy = torch.randn_like(y)
    fwd = timed(lambda: F.adaptive_avg_pool2d(x, 1))
    bwd = timed(lambda: aten._adaptive_avg_pool2d_backward(dy, x))
    print(f"torch pool head_avg {dt}: fwd {fwd:.1f} us, bwd {bwd:.1f} us")

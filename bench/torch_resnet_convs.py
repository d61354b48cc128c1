"""Times each distinct convolution of a ResNet-50 step in PyTorch, as
bench/cuda's resnet_convs does in vram: batch 64, channels_last, float32
(TF32 convolutions) and bf16, cudnn.benchmark on, forward, input gradient
and filter gradient (aten.convolution_backward with one output each).

    python3 bench/torch_resnet_convs.py

One line per convolution and direction, then per dtype and direction the
sum over a step (each convolution times its count in ResNet-50).
"""
import time, torch
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = True
dev = torch.device("cuda")
convs = [  # name, c, hw, o, k, stride, pad, count
    ("stem_7x7_s2", 3, 224, 64, 7, 2, 3, 1),
    ("l1_1x1_64_64", 64, 56, 64, 1, 1, 0, 1),
    ("l1_3x3_64", 64, 56, 64, 3, 1, 1, 3),
    ("l1_1x1_64_256", 64, 56, 256, 1, 1, 0, 4),
    ("l1_1x1_256_64", 256, 56, 64, 1, 1, 0, 2),
    ("l2_1x1_256_128", 256, 56, 128, 1, 1, 0, 1),
    ("l2_3x3_128_s2", 128, 56, 128, 3, 2, 1, 1),
    ("l2_1x1_128_512", 128, 28, 512, 1, 1, 0, 4),
    ("l2_down_256_512_s2", 256, 56, 512, 1, 2, 0, 1),
    ("l2_1x1_512_128", 512, 28, 128, 1, 1, 0, 3),
    ("l2_3x3_128", 128, 28, 128, 3, 1, 1, 3),
    ("l3_1x1_512_256", 512, 28, 256, 1, 1, 0, 1),
    ("l3_3x3_256_s2", 256, 28, 256, 3, 2, 1, 1),
    ("l3_1x1_256_1024", 256, 14, 1024, 1, 1, 0, 6),
    ("l3_down_512_1024_s2", 512, 28, 1024, 1, 2, 0, 1),
    ("l3_1x1_1024_256", 1024, 14, 256, 1, 1, 0, 5),
    ("l3_3x3_256", 256, 14, 256, 3, 1, 1, 5),
    ("l4_1x1_1024_512", 1024, 14, 512, 1, 1, 0, 1),
    ("l4_3x3_512_s2", 512, 14, 512, 3, 2, 1, 1),
    ("l4_1x1_512_2048", 512, 7, 2048, 1, 1, 0, 3),
    ("l4_down_1024_2048_s2", 1024, 14, 2048, 1, 2, 0, 1),
    ("l4_1x1_2048_512", 2048, 7, 512, 1, 1, 0, 2),
    ("l4_3x3_512", 512, 7, 512, 3, 1, 1, 2),
]
cl = torch.channels_last
runs = 20
for dt, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
    sums = {}
    for (cname, c, hw, o, k, st, pad, count) in convs:
        x = torch.full((64, c, hw, hw), 0.01, device=dev, dtype=dt).to(memory_format=cl)
        w = torch.full((o, c, k, k), 0.01, device=dev, dtype=dt).to(memory_format=cl)
        y = torch.nn.functional.conv2d(x, w, None, st, pad)
        gy = torch.full_like(y, 0.01).to(memory_format=cl)
        ops = {
            "fwd": lambda: torch.nn.functional.conv2d(x, w, None, st, pad),
            "dgrad": lambda: torch.ops.aten.convolution_backward(gy, x, w, None, (st, st), (pad, pad), (1, 1), False, (0, 0), 1, (True, False, False)),
            "wgrad": lambda: torch.ops.aten.convolution_backward(gy, x, w, None, (st, st), (pad, pad), (1, 1), False, (0, 0), 1, (False, True, False)),
        }
        for dname, f in ops.items():
            for _ in range(4):
                f()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(runs):
                f()
            b.record()
            torch.cuda.synchronize()
            us = a.elapsed_time(b) * 1000 / runs
            print(f"torch_convs {name} {cname} {dname}: {us:.1f} us", flush=True)
            sums[dname] = sums.get(dname, 0) + us * count
    for dname, v in sums.items():
        print(f"torch_convs {name} {dname} step sum: {v/1000:.3f} ms", flush=True)

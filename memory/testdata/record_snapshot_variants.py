"""Record PyTorch memory snapshots under the settings PyTorch users change,
for vram analyze's and vram replay's tests.

Usage (on a machine with a CUDA GPU and PyTorch; nothing is downloaded):

    python3 record_snapshot_variants.py OUTDIR [NAME...]

record_snapshots.py records the defaults of _record_memory_history(); this
script records the variations: other history settings (stacks="python",
context="alloc" and "state", a small max_entries whose ring has wrapped,
history stopped and started again, none at all), other allocator settings
(expandable_segments, max_split_size_mb, garbage_collection_threshold,
empty_cache mid-run), CUDA graphs' private pools, a side stream, and
out-of-memory errors under those settings and at the device's own capacity;
then rounding settings (roundup_power2_divisions, its list form),
autocast with a GradScaler, torch.compile, PYTORCH_NO_CUDA_MEMORY_CACHING,
a one-entry ring, a history stopped before the dump, a setting changed
mid-run, a user's MemPool, raw caching_allocator_alloc, and out-of-memory
errors in backward, in the small pool and with expandable segments.
Each workload runs in a fresh process with PYTORCH_CUDA_ALLOC_CONF set as
the workload says (unset otherwise), and writes its snapshot with
torch.cuda.memory._dump_snapshot while its tensors are live (in the
handler of an out-of-memory error, for those that run out), gzip-compressed, as
pytorch_v_NAME.pickle.gz. OUTDIR/pytorch_snapshot_variants.json says per
file what the snapshot does not hold: the allocator setting and history
arguments, the limit the process was allowed, PyTorch's own peaks and
counters, and the OutOfMemoryError's message.
"""

import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys

GiB = 1 << 30
MiB = 1 << 20

# name: (allocator setting, history arguments or None for no history,
# limit in bytes or None)
WORKLOADS = {
    "train_python_stacks": ("", {"stacks": "python"}, None),
    "train_alloc_context": ("", {"context": "alloc"}, None),
    "train_state_context": ("", {"context": "state"}, None),
    "train_ring_wrapped": ("", {"max_entries": 400}, None),
    "train_history_restarted": ("", {}, None),
    "train_no_history": ("", None, None),
    "train_expandable": ("expandable_segments:True", {}, None),
    "train_empty_cache": ("", {}, None),
    "train_cuda_graph": ("", {}, None),
    "side_stream": ("", {}, None),
    "oom_train_expandable": ("expandable_segments:True", {}, 3 * GiB // 2),
    "oom_train_max_split": ("max_split_size_mb:64", {}, 3 * GiB // 2),
    "oom_train_gc_threshold": ("garbage_collection_threshold:0.6", {}, 3 * GiB // 2),
    "oom_fragmented_python": ("", {"stacks": "python"}, 2 * GiB),
    "oom_device_capacity": ("", {}, None),
    "oom_device_fragmented": ("", {}, None),
    "train_roundup_list": ("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", {}, None),
    "train_roundup_4": ("roundup_power2_divisions:4", {}, None),
    "train_amp": ("", {}, None),
    "train_compiled": ("", {}, None),
    "train_no_caching": ("", {}, None),
    "train_max_entries_1": ("", {"max_entries": 1}, None),
    "train_history_stopped": ("", {}, None),
    "train_settings_changed": ("", {}, None),
    "mem_pool": ("", {}, None),
    "raw_caching_alloc": ("", {}, None),
    "oom_backward": ("", {}, 2 * GiB),
    "oom_small_pool": ("", {}, GiB // 2),
    "oom_expandable_device": ("expandable_segments:True", {}, None),
    "oom_python_stacks_expandable": ("expandable_segments:True,max_split_size_mb:128", {"stacks": "python"}, GiB),
}


def mib(n):
    import torch

    return torch.empty(int(n * MiB), dtype=torch.uint8, device="cuda")


def make_model(torch, dim=256, layers=4):
    layer = torch.nn.TransformerEncoderLayer(dim, 8, 4 * dim, batch_first=True)
    return torch.nn.Sequential(torch.nn.Embedding(1000, dim), torch.nn.TransformerEncoder(layer, layers),
                               torch.nn.Linear(dim, 1000)).cuda()


def train_step(torch, model, opt, batch, seq):
    ids = torch.randint(0, 1000, (batch, seq), device="cuda")
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def train_some(torch, seqs=(64, 256, 128, 512, 96, 384)):
    model = make_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for seq in seqs:
        train_step(torch, model, opt, 16, seq)
    return model, opt


def train_until_oom(torch):
    model = make_model(torch, dim=512, layers=6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seq = 128
    while True:
        train_step(torch, model, opt, 32, seq)
        seq += 128


def workload(torch, name, history, keep):
    if name == "train_history_restarted":
        model, opt = train_some(torch, (64, 256))
        torch.cuda.memory._record_memory_history(enabled=None)
        keep.append(mib(30))  # allocated while nothing records
        train_step(torch, model, opt, 16, 512)
        torch.cuda.memory._record_memory_history(**history)
        del keep[:]  # freed with no allocation recorded
        for seq in (128, 384):
            train_step(torch, model, opt, 16, seq)
        keep.extend([model, opt])
    elif name == "train_empty_cache":
        model, opt = train_some(torch, (512, 64))
        torch.cuda.empty_cache()  # segments given back mid-run
        for seq in (256, 128):
            train_step(torch, model, opt, 16, seq)
        keep.extend([model, opt])
    elif name == "train_cuda_graph":
        model = make_model(torch)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        ids = torch.randint(0, 1000, (16, 128), device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):  # a private memory pool
            loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
            loss.backward()
            opt.step()
        for _ in range(3):
            ids.copy_(torch.randint(0, 1000, (16, 128), device="cuda"))
            graph.replay()
        keep.extend([graph, model, opt, ids, loss])
    elif name == "side_stream":
        side = torch.cuda.Stream()
        a = mib(64)
        with torch.cuda.stream(side):
            b = mib(128)
            c = b[: 32 * MiB].clone()
            a.record_stream(side)
        del a, b  # a's block waits for the side stream's work
        torch.cuda.synchronize()
        d = mib(96)
        keep.extend([c, d])
    elif name in ("oom_train_expandable", "oom_train_max_split", "oom_train_gc_threshold"):
        train_until_oom(torch)
    elif name == "oom_fragmented_python":
        keep.append(mib(900))
        a, b = mib(400), mib(400)
        del a, b
        keep.append(mib(100))
        keep.append(mib(350))
        keep.append(mib(500))  # fails: no room for a new segment
    elif name == "oom_device_capacity":
        free, _ = torch.cuda.mem_get_info()
        keep.append(mib(free // MiB - 4 * 1024))  # all but about 4 GiB of what is free
        for _ in range(64):
            keep.append(mib(1024))  # fails after three or four
    elif name == "oom_device_fragmented":
        # The device nearly full, a tenth of it in 1 GiB segments that each
        # hold a live 600 MiB tensor and 424 MiB cached but free: a 1.5 GiB
        # request finds no cached block and no room on the device, although
        # the cache and the device hold more than that together.
        free, _ = torch.cuda.mem_get_info()
        keep.append(mib(free // MiB - 11 * 1024))
        gib = [mib(1024) for _ in range(10)]
        del gib[::2]
        keep.extend(gib)
        keep.extend(mib(600) for _ in range(5))
        keep.append(mib(1536))
    elif name == "train_amp":
        model = make_model(torch, dim=384)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        scaler = torch.amp.GradScaler("cuda")
        for seq in (64, 256, 128, 384):
            ids = torch.randint(0, 1000, (16, seq), device="cuda")
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        keep.extend([model, opt, scaler])
    elif name == "train_compiled":
        model = make_model(torch)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        step = torch.compile(model)
        for seq in (128, 128, 128):
            ids = torch.randint(0, 1000, (16, seq), device="cuda")
            loss = torch.nn.functional.cross_entropy(step(ids).flatten(0, 1), ids.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        keep.extend([model, opt])
    elif name == "train_history_stopped":
        model, opt = train_some(torch, (64, 256))
        torch.cuda.memory._record_memory_history(enabled=None)
        keep.append(mib(40))  # allocated after the history stopped
        train_step(torch, model, opt, 16, 512)
        keep.extend([model, opt])
    elif name == "train_settings_changed":
        model, opt = train_some(torch, (64, 256))
        torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        for seq in (512, 128):
            train_step(torch, model, opt, 16, seq)
        keep.extend([model, opt])
    elif name == "mem_pool":
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            a = mib(48)
            b = mib(3)
        c = mib(48)
        del a
        keep.extend([pool, b, c])
        keep.extend(train_some(torch, (64, 128)))
    elif name == "raw_caching_alloc":
        ptrs = [torch.cuda.caching_allocator_alloc(n * MiB) for n in (1, 5, 30, 300)]
        torch.cuda.caching_allocator_delete(ptrs[1])
        keep.append(ptrs)
        keep.extend(train_some(torch, (64, 128)))
    elif name == "oom_backward":
        # Forward fits; the gradients of the large layers do not.
        model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(16)]).cuda()
        x = torch.randn(2048, 4096, device="cuda")
        keep.extend([model, x])
        out = model(x)
        keep.append(out)
        out.square().mean().backward()
    elif name == "oom_small_pool":
        for i in range(10 ** 6):
            keep.append(torch.empty(128 * 1024 + 512 * (i % 7), dtype=torch.uint8, device="cuda"))
            if i % 3 == 0:
                keep[i // 2] = None
    elif name == "oom_expandable_device":
        free, _ = torch.cuda.mem_get_info()
        keep.append(mib(free // MiB - 3 * 1024))
        for n in range(1, 64):
            keep.append(mib(700))
            if n % 2 and n > 1:
                keep[-2] = None  # a 700 MiB hole between live ones
    elif name == "oom_python_stacks_expandable":
        keep.append(mib(300))
        parts = [mib(90) for _ in range(6)]
        del parts[1::2]
        keep.extend(parts)
        keep.append(mib(700))  # fails: 1 GiB allowed
    else:
        keep.extend(train_some(torch))


def run(name, path):
    import torch

    torch.manual_seed(0)
    conf, history, limit = WORKLOADS[name]
    total = torch.cuda.mem_get_info()[1]
    fraction = None
    if limit is not None:
        fraction = limit / total
        torch.cuda.set_per_process_memory_fraction(fraction)
    if history is not None:
        torch.cuda.memory._record_memory_history(**history)
    message = ""
    keep = []
    raw = path + ".raw"

    def dump():
        # Written while the workload's tensors are live: in the handler of
        # an out-of-memory error, as a user dumps one, or with keep.
        if history is None:
            with open(raw, "wb") as f:  # what _dump_snapshot writes, with no history
                pickle.dump(torch.cuda.memory._snapshot(), f)
        else:
            torch.cuda.memory._dump_snapshot(raw)
        return torch.cuda.memory_stats(), torch.cuda.memory._snapshot()

    try:
        workload(torch, name, history, keep)
        st, snap = dump()
    except torch.cuda.OutOfMemoryError as e:
        message = str(e)
        st, snap = dump()
    meta = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "device_total_bytes": total,
        "alloc_conf": conf,
        "history": history,
        "fraction": fraction,
        "allowed_bytes": None if fraction is None else int(fraction * total),
        "peak_reserved_bytes": st["reserved_bytes.all.peak"],
        "peak_requested_bytes": st["requested_bytes.all.peak"],
        "peak_allocated_bytes": st["allocated_bytes.all.peak"],
        "reserved_bytes": st["reserved_bytes.all.current"],
        "allocated_bytes": st["allocated_bytes.all.current"],
        "segments_allocated": st["segment.all.allocated"],
        "segments_freed": st["segment.all.freed"],
        "num_ooms": st["num_ooms"],
        "oom_message": message,
        "snapshot_segments": len(snap["segments"]),
        "trace_entries": sum(len(t) for t in snap["device_traces"]),
    }
    return meta, raw


def child(name, path):
    if name == "train_no_caching":
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    meta, raw = run(name, path)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(json.dumps(meta))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) < 2:
        raise SystemExit("usage: record_snapshot_variants.py OUTDIR [NAME...]; names: " + ", ".join(WORKLOADS))
    out = sys.argv[1]
    names = sys.argv[2:] or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit("unknown workload %s; known: %s" % (", ".join(unknown), ", ".join(WORKLOADS)))
    os.makedirs(out, exist_ok=True)
    index = os.path.join(out, "pytorch_snapshot_variants.json")
    results = {}
    if os.path.exists(index):
        with open(index) as f:
            results = json.load(f)
    failed = []
    for name in names:
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env.pop("PYTORCH_ALLOC_CONF", None)
        if WORKLOADS[name][0]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = WORKLOADS[name][0]
        file = "pytorch_v_%s.pickle.gz" % name
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, os.path.join(out, file)],
                               env=env, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            print(name, "timed out", file=sys.stderr)
            failed.append(name)
            continue
        if p.returncode != 0:
            print(name, "failed:", p.stderr[-3000:], file=sys.stderr)
            failed.append(name)
            continue
        meta = json.loads(p.stdout.strip().splitlines()[-1])
        results[file] = meta
        print(file, json.dumps(meta), flush=True)
        with open(index, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
            f.write("\n")
    if failed:
        raise SystemExit("failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()

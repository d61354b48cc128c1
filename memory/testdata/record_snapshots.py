"""Record PyTorch memory snapshots with the default settings of
torch.cuda.memory._record_memory_history(), for vram analyze's tests.

Usage (on a machine with a CUDA GPU and PyTorch; nothing else is needed and
nothing is downloaded):

    python3 record_snapshots.py OUTDIR

Each workload runs in a fresh process with PYTORCH_CUDA_ALLOC_CONF unset
(expandable_segments off) and records its history with
_record_memory_history() and no arguments: stacks="all" (C++ and Python
frames), context="all", every entry kept. The snapshot is written with
torch.cuda.memory._dump_snapshot and gzip-compressed:

  pytorch_train_default.pickle.gz  a small transformer trained with AdamW for a
                                   few steps of varying sequence length
  pytorch_oom_fragmented.pickle.gz under set_per_process_memory_fraction (a
                                   2 GiB limit), tensors freed and reallocated
                                   so that cached blocks are split among live
                                   ones; then a request that fails although the
                                   live tensors and it take less than the limit
  pytorch_oom_missing.pickle.gz    under the same limit, live tensors and a
                                   request that take more than the limit
  pytorch_oom_train.pickle.gz      under a 1.5 GiB limit, a training loop whose
                                   sequence length grows until it runs out

OUTDIR/pytorch_snapshots.json says, per file, what vram's tests need to know
and the snapshot does not hold: the limit the process was allowed
(allowed_bytes = int(fraction * device total), as PyTorch computes it), the
fraction and the device's total memory, PyTorch's own peaks, the
OutOfMemoryError's message, and what the test expects of the fix check
("fits": some setting fits; "missing": the live tensors and the request alone
exceed the limit; "": anything). Copy OUTDIR/* into analyze/testdata/; the
analyze tests pick up every file that pytorch_snapshots.json lists.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys

GiB = 1 << 30
MiB = 1 << 20

WORKLOADS = {
    # name: (limit in bytes or None, expectation)
    "train_default": (None, ""),
    "oom_fragmented": (2 * GiB, "fits"),
    "oom_missing": (2 * GiB, "missing"),
    "oom_train": (3 * GiB // 2, ""),
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


def fragment(keep):
    """Frees two 400 MiB blocks and reallocates smaller ones into them, so
    that each of the two cached segments holds a live block."""
    a, b = mib(400), mib(400)
    del a, b
    keep.append(mib(100))  # splits the first cached 400 MiB block
    keep.append(mib(350))  # too large for the 300 MiB left: splits the second


def run(name):
    import torch

    torch.manual_seed(0)
    limit, _ = WORKLOADS[name]
    total = torch.cuda.mem_get_info()[1]
    fraction = None
    if limit is not None:
        fraction = limit / total
        torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.memory._record_memory_history()  # the defaults: stacks="all"
    message = ""
    keep = []
    try:
        if name == "train_default":
            model = make_model(torch)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for seq in (64, 256, 128, 512, 96, 384):
                train_step(torch, model, opt, 16, seq)
        elif name == "oom_fragmented":
            keep.append(mib(900))  # other live state
            fragment(keep)  # 1.32 GiB live, 1.66 GiB reserved, 350 MiB of it cached in pieces
            keep.append(mib(500))  # fails: 1.81 GiB live with it, but no room for a new segment
        elif name == "oom_missing":
            keep.append(mib(1200))
            keep.append(mib(600))
            keep.append(mib(500))  # 2.25 GiB live: more than the 2 GiB allowed
        elif name == "oom_train":
            model = make_model(torch, dim=512, layers=6)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            seq = 128
            while True:
                train_step(torch, model, opt, 32, seq)
                seq += 128
    except torch.cuda.OutOfMemoryError as e:
        message = str(e)
    st = torch.cuda.memory_stats()
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "device_total_bytes": total,
        "fraction": fraction,
        "allowed_bytes": None if fraction is None else int(fraction * total),
        "peak_reserved_bytes": st["reserved_bytes.all.peak"],
        "peak_requested_bytes": st["requested_bytes.all.peak"],
        "num_ooms": st["num_ooms"],
        "oom_message": message,
    }, torch


def child(name, path):
    meta, torch = run(name)
    raw = path + ".raw"
    torch.cuda.memory._dump_snapshot(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(json.dumps(meta))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    results = {}
    for name, (_, expect) in WORKLOADS.items():
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env.pop("PYTORCH_ALLOC_CONF", None)
        file = "pytorch_%s.pickle.gz" % name
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, os.path.join(out, file)],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-4000:], file=sys.stderr)
            raise SystemExit(name + " failed")
        meta = json.loads(p.stdout.strip().splitlines()[-1])
        meta["expect"] = expect
        results[file] = meta
        print(file, json.dumps(meta), flush=True)
    with open(os.path.join(out, "pytorch_snapshots.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()

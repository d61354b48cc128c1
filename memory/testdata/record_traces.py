"""Record real allocation traces of PyTorch workloads on a CUDA GPU.

Usage (on a machine with a GPU and PyTorch, transformers and torchvision):

    python3 record_traces.py [--cap SIZE] [--seed N] [--timeout SECONDS] OUTDIR [workload ...]
    python3 record_traces.py "$OUT" bert_infer_varlen gpt_generate_kvcache two_models
    python3 record_traces.py --cap 1.2GiB "$OUT" bert_infer_varlen

OUTDIR is made if missing. Each workload's result is added to
OUTDIR/pytorch_peaks.json as soon as it is recorded (the entries of
workloads not recorded this time stay), with the seconds each run took; a
workload that fails or runs past --timeout (120 s) is reported and the
others still run.

With --cap SIZE (bytes, or a number with KiB, MiB, GiB, MB or GB) each run is
limited to SIZE with torch.cuda.set_per_process_memory_fraction, as a user
who shares a GPU would run it: PyTorch then gives segments back mid-run to
make room (and may run out of memory, which is recorded too). The traces
are named <workload>_cap<MiB>.trace.gz; `vram replay --fit` on them should
say that the run freed segments under a cap and which capacity reproduces it.

With --seed N (other than 0) the workloads draw their batch sizes, lengths
and inputs from seed N rather than 0, and the traces are named
<workload>_seedN.trace.gz: the same kind of run with other requests, to check
a policy on runs it was not tuned on.

For each workload this runs the same seeded program twice, in fresh
processes: once with PyTorch's default caching allocator while recording the
allocation history from process start (torch.cuda.memory._record_memory_history),
which it writes as OUTDIR/<workload>.trace.gz in the text format of vram's
DESIGN.md ("action addr size stream"), and once with
expandable_segments:True. PyTorch's own peak reserved and requested bytes
of both runs go into the trace's header comments and into
OUTDIR/pytorch_peaks.json. The traces in this directory were recorded on an
H200 with PyTorch 2.11.0+cu130 on 2026-11-30.

Models are built from configurations with random weights: nothing is
downloaded. Workloads:

  gpt2_train_varlen     GPT-2 small (transformers), AdamW, bf16 autocast,
                        batch 8, sequence length 64..1024 drawn per step
  gpt2_generate_varbatch  GPT-2 small generation with the KV cache, fp16,
                        batch 1..24, prompt 16..400, 16..64 new tokens
  resnet50_infer_varbatch torchvision ResNet-50 inference, fp16, batch 1..96
  bert_train_varlen     BERT-base masked-LM training, AdamW, bf16 autocast,
                        batch 16, dynamic padding to 32..512 tokens
  vit_infer_varbatch    torchvision ViT-B/16 inference, fp16, batch 1..64,
                        60 requests

These three need PyTorch alone (no transformers, no torchvision):

  bert_infer_varlen     a BERT-base-sized encoder (torch.nn.TransformerEncoder,
                        12 layers, d=768, 12 heads, GELU) serving 300
                        requests, fp16, no_grad, batch 1..64 x length 16..512
                        drawn per request
  gpt_generate_kvcache  a GPT-2-small-sized decoder written here (12 layers,
                        d=768) generating with a KV cache grown by torch.cat
                        per token, fp16, batch 1..16, prompt 16..512, 16..128
                        new tokens, 12 requests (24 took more than 110 s to
                        record on an H200)
  two_models            both of the above in one process, their requests
                        interleaved at random (200 encoder requests, 12
                        generations)
"""

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time

WORKLOADS = ["gpt2_train_varlen", "gpt2_generate_varbatch", "resnet50_infer_varbatch", "bert_train_varlen",
             "bert_infer_varlen", "gpt_generate_kvcache", "two_models", "vit_infer_varbatch"]


def make_encoder(torch, dev):
    """A BERT-base-sized encoder from torch.nn alone, fp16, for inference."""
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(30522, 768)
            self.pos = nn.Embedding(512, 768)
            self.norm = nn.LayerNorm(768)
            layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            self.pool = nn.Linear(768, 768)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.norm(self.tok(ids) + self.pos(pos))
            x = self.enc(x)
            return torch.tanh(self.pool(x[:, 0]))

    return Encoder().to(dev, torch.float16).eval()


def encoder_request(torch, model, dev, b, s):
    ids = torch.randint(0, 30522, (b, s), device=dev)
    y = model(ids).float().cpu()
    del ids, y


def make_decoder(torch, dev):
    """A GPT-2-small-sized decoder with an explicit KV cache, fp16."""
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(768), nn.LayerNorm(768)
            self.qkv, self.proj = nn.Linear(768, 3 * 768), nn.Linear(768, 768)
            self.fc1, self.fc2 = nn.Linear(768, 3072), nn.Linear(3072, 768)

        def forward(self, x, cache):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(768, dim=2)
            q, k, v = (z.view(b, t, 12, 64).transpose(1, 2) for z in (q, k, v))
            if cache is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, 768))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x, (k, v)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(50257, 768), nn.Embedding(1024, 768)
            self.blocks = nn.ModuleList(Block() for _ in range(12))
            self.ln = nn.LayerNorm(768)

        def forward(self, ids, start, caches):
            pos = torch.arange(start, start + ids.shape[1], device=ids.device)
            x = self.tok(ids) + self.pos(pos)
            new = []
            for blk, c in zip(self.blocks, caches):
                x, c = blk(x, c)
                new.append(c)
            logits = self.ln(x[:, -1]) @ self.tok.weight.t()
            return logits, new

    return Decoder().to(dev, torch.float16).eval()


def generate(torch, model, dev, b, p, n):
    ids = torch.randint(0, 50257, (b, p), device=dev)
    caches = [None] * 12
    out = ids
    logits, caches = model(ids, 0, caches)
    for i in range(n):
        tok = logits.argmax(-1, keepdim=True)
        out = torch.cat([out, tok], dim=1)
        logits, caches = model(tok, p + i, caches)
    del ids, caches, out, logits


def run_workload(name, dev):
    import torch

    seed = int(os.environ.get("RECORD_SEED", "0"))
    torch.manual_seed(seed)
    random.seed(seed)
    if name == "gpt2_train_varlen":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config()).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(12):
            s = random.randrange(64, 1025, 8)
            ids = torch.randint(0, 50257, (8, s), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, ids
    elif name == "gpt2_generate_varbatch":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config()).to(dev, torch.float16).eval()
        with torch.no_grad():
            for _ in range(10):
                b = random.randint(1, 24)
                p = random.randint(16, 400)
                n = random.randint(16, 64)
                ids = torch.randint(0, 50257, (b, p), device=dev)
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                     min_new_tokens=n, do_sample=False, pad_token_id=0)
                del out, ids
    elif name == "resnet50_infer_varbatch":
        import torchvision

        model = torchvision.models.resnet50().to(dev, torch.float16).eval()
        with torch.no_grad():
            for _ in range(40):
                b = random.randint(1, 96)
                x = torch.randn(b, 3, 224, 224, device=dev, dtype=torch.float16)
                y = model(x).float().cpu()
                del x, y
    elif name == "vit_infer_varbatch":
        import torchvision

        model = torchvision.models.vit_b_16().to(dev, torch.float16).eval()
        with torch.no_grad():
            for _ in range(60):
                b = random.randint(1, 64)
                x = torch.randn(b, 3, 224, 224, device=dev, dtype=torch.float16)
                y = model(x).float().cpu()
                del x, y
    elif name == "bert_train_varlen":
        from transformers import BertConfig, BertForMaskedLM

        model = BertForMaskedLM(BertConfig()).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(16):
            s = random.randrange(32, 513, 8)
            ids = torch.randint(0, 30522, (16, s), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, ids
    elif name == "bert_infer_varlen":
        model = make_encoder(torch, dev)
        with torch.no_grad():
            for _ in range(300):
                encoder_request(torch, model, dev, random.randint(1, 64), random.randrange(16, 513, 8))
    elif name == "gpt_generate_kvcache":
        model = make_decoder(torch, dev)
        with torch.no_grad():
            for _ in range(12):
                generate(torch, model, dev, random.randint(1, 16), random.randint(16, 512), random.randint(16, 128))
    elif name == "two_models":
        enc, dec = make_encoder(torch, dev), make_decoder(torch, dev)
        jobs = ["enc"] * 200 + ["dec"] * 12
        random.shuffle(jobs)
        with torch.no_grad():
            for j in jobs:
                if j == "enc":
                    encoder_request(torch, enc, dev, random.randint(1, 64), random.randrange(16, 513, 8))
                else:
                    generate(torch, dec, dev, random.randint(1, 16), random.randint(16, 384), random.randint(16, 96))
    else:
        raise SystemExit("unknown workload " + name)
    if dev.type == "cuda":
        torch.cuda.synchronize()


def parse_size(text):
    """Bytes from "1.2GiB", "800MB" or "1234"; a clear error otherwise."""
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}
    for u, m in units.items():
        if text.endswith(u):
            try:
                n = int(float(text[: -len(u)]) * m)
            except ValueError:
                break
            if n > 0:
                return n
            break
    else:
        if text.isdigit() and int(text) > 0:
            return int(text)
    raise argparse.ArgumentTypeError("bad size %r: want bytes, or a number with KiB, MiB, GiB, KB, MB or GB, such as 1.2GiB" % text)


def child(name, record, path):
    import torch

    cap = int(os.environ.get("RECORD_CAP_BYTES", "0"))
    if cap:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    if record:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 max_entries=50_000_000)
    oom = False
    try:
        # RECORD_DEVICE=cpu checks the workloads' code without a GPU (with
        # the torch.cuda calls stubbed); traces are recorded on cuda.
        run_workload(name, torch.device(os.environ.get("RECORD_DEVICE", "cuda")))
    except torch.cuda.OutOfMemoryError:
        oom = cap > 0  # under a cap an OOM is a result to record
        if not oom:
            raise
    st = torch.cuda.memory_stats()
    peaks = {
        "reserved": st["reserved_bytes.all.peak"],
        "requested": st["requested_bytes.all.peak"],
        "allocated": st["allocated_bytes.all.peak"],
        "segments": st["segment.all.allocated"],
        "segment_frees": st["segment.all.freed"],
        "oom": oom,
    }
    if record:
        snap = torch.cuda.memory._snapshot()
        events = snap["device_traces"][0]
        with gzip.open(path, "wt") as f:
            f.write("# action addr size stream (PyTorch %s, %s)\n" % (torch.__version__, torch.cuda.get_device_name()))
            f.write("# workload %s, recorded with record_traces.py; history from process start\n" % name)
            if cap:
                f.write("# under set_per_process_memory_fraction: at most %d bytes%s\n" %
                        (cap, ", ran out of memory" if oom else ""))
            for e in events:
                f.write("%s %d %d %d\n" % (e["action"], e["addr"], e["size"], e["stream"]))
        peaks["events"] = len(events)
    print(json.dumps(peaks))


def run_child(name, label, conf, record, tmp, cap, timeout, seed=0):
    """Runs one workload in a fresh process; returns its peaks, or raises RuntimeError."""
    env = dict(os.environ)
    env.pop("RECORD_CAP_BYTES", None)
    env["RECORD_SEED"] = str(seed)
    if cap:
        env["RECORD_CAP_BYTES"] = str(cap)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    start = time.monotonic()
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "1" if record else "0", tmp],
                           env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s (%s) ran past %d s; give a larger --timeout" % (name, label, timeout))
    if p.returncode != 0:
        print(p.stderr[-4000:], file=sys.stderr)
        raise RuntimeError("%s (%s) exited with status %d" % (name, label, p.returncode))
    lines = p.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError("%s (%s) printed no result" % (name, label))
    res = json.loads(lines[-1])
    res["seconds"] = round(time.monotonic() - start, 1)
    return res


def write_trace(tmp, final, d, e):
    """Copies the recorded trace to final with PyTorch's peaks in its header."""
    with gzip.open(tmp, "rt") as src, gzip.open(final, "wt") as dst:
        first = True
        for line in src:
            dst.write(line)
            if first:
                dst.write("# PyTorch default: peak reserved %d, peak requested %d (%.4fx), %d segments\n" %
                          (d["reserved"], d["requested"], d["reserved"] / max(1, d["requested"]), d["segments"]))
                dst.write("# PyTorch expandable_segments:True: peak reserved %d, peak requested %d (%.4fx)\n" %
                          (e["reserved"], e["requested"], e["reserved"] / max(1, e["requested"])))
                first = False


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] == "1", sys.argv[4])
        return
    ap = argparse.ArgumentParser(description="Record allocation traces of PyTorch workloads on a CUDA GPU.")
    ap.add_argument("--cap", type=parse_size, default=0,
                    help="limit each run to SIZE with set_per_process_memory_fraction (e.g. 1.2GiB)")
    ap.add_argument("--timeout", type=int, default=120,
                    help="seconds each of a workload's two runs may take (default 120)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the workloads' random sizes; other than 0 it is added to the names as _seedN")
    ap.add_argument("outdir", help="directory for the traces and pytorch_peaks.json (made if missing)")
    ap.add_argument("workloads", nargs="*", help="workloads to record (default: all): " + ", ".join(WORKLOADS))
    args = ap.parse_args()
    unknown = [n for n in args.workloads if n not in WORKLOADS]
    if unknown:
        ap.error("unknown workload %s; known: %s" % (", ".join(unknown), ", ".join(WORKLOADS)))
    out, cap = args.outdir, args.cap
    os.makedirs(out, exist_ok=True)
    names = args.workloads or WORKLOADS
    suffix = "_seed%d" % args.seed if args.seed else ""
    suffix += "_cap%dMiB" % (cap >> 20) if cap else ""
    peaks_path = os.path.join(out, "pytorch_peaks%s.json" % suffix)
    results = {}
    if os.path.exists(peaks_path):  # keep the workloads not recorded this time
        with open(peaks_path) as f:
            results = json.load(f)
    failed = []
    for name in names:
        tmp = os.path.join(out, name + suffix + ".trace.tmp.gz")
        final = os.path.join(out, name + suffix + ".trace.gz")
        try:
            res = {}
            for label, conf, record in [("default", "", True), ("expandable", "expandable_segments:True", False)]:
                res[label] = run_child(name, label, conf, record, tmp, cap, args.timeout, args.seed)
            write_trace(tmp, final, res["default"], res["expandable"])
        except (RuntimeError, OSError, ValueError) as err:
            print("record_traces: %s" % err, file=sys.stderr, flush=True)
            failed.append(name)
            continue
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        results[name + suffix] = res
        print(name + suffix, json.dumps(res), flush=True)
        with open(peaks_path, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if failed:
        raise SystemExit("record_traces: %d of %d workloads failed: %s" % (len(failed), len(names), ", ".join(failed)))


if __name__ == "__main__":
    main()

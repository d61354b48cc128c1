"""Record real allocation traces of PyTorch workloads on a CUDA GPU.

Usage (on a machine with a GPU and PyTorch, transformers and torchvision):

    python3 record_traces.py OUTDIR [workload ...]

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
"""

import gzip
import json
import os
import random
import subprocess
import sys

WORKLOADS = ["gpt2_train_varlen", "gpt2_generate_varbatch", "resnet50_infer_varbatch", "bert_train_varlen"]


def run_workload(name):
    import torch

    torch.manual_seed(0)
    random.seed(0)
    dev = torch.device("cuda")
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
    else:
        raise SystemExit("unknown workload " + name)
    torch.cuda.synchronize()


def child(name, record, path):
    import torch

    if record:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 max_entries=50_000_000)
    run_workload(name)
    st = torch.cuda.memory_stats()
    peaks = {
        "reserved": st["reserved_bytes.all.peak"],
        "requested": st["requested_bytes.all.peak"],
        "allocated": st["allocated_bytes.all.peak"],
        "segments": st["segment.all.allocated"],
    }
    if record:
        snap = torch.cuda.memory._snapshot()
        events = snap["device_traces"][0]
        with gzip.open(path, "wt") as f:
            f.write("# action addr size stream (PyTorch %s, %s)\n" % (torch.__version__, torch.cuda.get_device_name()))
            f.write("# workload %s, recorded with record_traces.py; history from process start\n" % name)
            for e in events:
                f.write("%s %d %d %d\n" % (e["action"], e["addr"], e["size"], e["stream"]))
        peaks["events"] = len(events)
    print(json.dumps(peaks))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] == "1", sys.argv[4])
        return
    out = sys.argv[1]
    names = sys.argv[2:] or WORKLOADS
    results = {}
    for name in names:
        res = {}
        for label, conf, record in [("default", "", True), ("expandable", "expandable_segments:True", False)]:
            env = dict(os.environ)
            if conf:
                env["PYTORCH_CUDA_ALLOC_CONF"] = conf
            else:
                env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
            tmp = os.path.join(out, name + ".trace.tmp.gz")
            p = subprocess.run([sys.executable, __file__, "--child", name, "1" if record else "0", tmp],
                               env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-4000:], file=sys.stderr)
                raise SystemExit("%s %s failed" % (name, label))
            res[label] = json.loads(p.stdout.strip().splitlines()[-1])
        results[name] = res
        d, e = res["default"], res["expandable"]
        tmp = os.path.join(out, name + ".trace.tmp.gz")
        final = os.path.join(out, name + ".trace.gz")
        with gzip.open(tmp, "rt") as src, gzip.open(final, "wt") as dst:
            first = True
            for line in src:
                dst.write(line)
                if first:
                    dst.write("# PyTorch default: peak reserved %d, peak requested %d (%.4fx), %d segments\n" %
                              (d["reserved"], d["requested"], d["reserved"] / d["requested"], d["segments"]))
                    dst.write("# PyTorch expandable_segments:True: peak reserved %d, peak requested %d (%.4fx)\n" %
                              (e["reserved"], e["requested"], e["reserved"] / e["requested"]))
                    first = False
        os.remove(tmp)
        print(name, json.dumps(res), flush=True)
    with open(os.path.join(out, "pytorch_peaks.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

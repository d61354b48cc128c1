"""Prints the side-by-side table of bench/run.sh: vram's and PyTorch's
value of each benchmark and their ratio (vram / PyTorch for rates, PyTorch
/ vram for times, so that above 1 always means vram is faster). A vram row
may name, in "vs", further PyTorch rows to be compared with it."""
import json
import sys

def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                out[r["name"]] = r
    return out

v, t = load(sys.argv[1]), load(sys.argv[2])
print("| benchmark | unit | vram | PyTorch | ratio (>1: vram faster) |")
print("| --- | --- | ---: | ---: | ---: |")
for name, r in v.items():
    p = t.get(name)
    unit = r["unit"]
    lower_better = unit in ("us", "ms", "s", "GiB", "GB", "x")
    ratio = ""
    if p and p["value"] and r["value"]:
        ratio = "%.2f" % ((p["value"] / r["value"]) if lower_better else (r["value"] / p["value"]))
    pv = "%.4g" % p["value"] if p else "-"
    print("| %s | %s | %.4g | %s | %s |" % (name, unit, r["value"], pv, ratio))
    # "vs" names further PyTorch rows measuring the same thing another way
    # (another optimizer, torch.compile): one line against each.
    for other in r.get("vs", []):
        p = t.get(other)
        if not p:
            print("| %s vs %s | %s | %.4g | - | |" % (name, other, unit, r["value"]))
            continue
        ratio = ""
        if p["value"] and r["value"]:
            ratio = "%.2f" % ((p["value"] / r["value"]) if lower_better else (r["value"] / p["value"]))
        print("| %s vs %s | %s | %.4g | %.4g | %s |" % (name, other, unit, r["value"], p["value"], ratio))

"""Record torch.save files for checking package torchload against PyTorch.

Not run by the tests, which build their files in Go. With PyTorch
installed:

    python3 record.py OUTDIR

writes into OUTDIR two checkpoints per case (NAME.pt in the zip format,
NAME_legacy.pt in the legacy one) and, beside each, a .json file
with the keys, dtypes, shapes and values that torch.load reads, so that a
Go program can compare torchload.ReadStateDictFile with them.
"""

import json
import os
import sys
from collections import OrderedDict

import torch


def cases():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    bn = torch.nn.BatchNorm1d(2)
    bn(torch.randn(4, 2))  # running statistics and num_batches_tracked
    seq = torch.nn.Sequential(lin, bn)
    yield "sequential", seq.state_dict()
    yield "ddp_nested", {
        "model": OrderedDict(("module." + k, v) for k, v in seq.state_dict().items()),
        "optimizer": torch.optim.AdamW(seq.parameters()).state_dict(),
        "epoch": 3,
    }
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    yield "views", OrderedDict(
        transposed=base.t(),
        row=base[1],
        column=base[:, 2],
        expanded=torch.tensor([7.0]).expand(2, 3),
        scalar=torch.tensor(5.0),
        empty=torch.empty(0, 5),
    )
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
              torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
    yield "dtypes", OrderedDict((str(d).removeprefix("torch."), torch.tensor([1, 0, 3]).to(d)) for d in dtypes)
    yield "parameters", OrderedDict(w=torch.nn.Parameter(torch.randn(2, 2)))


def describe(sd):
    out = []
    for k, v in sd.items():
        out.append({"key": k, "dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape),
                    "values": v.detach().double().flatten().tolist()})
    return out


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name, obj in cases():
        sd = obj["model"] if "model" in obj and not isinstance(obj["model"], torch.Tensor) else obj
        # Each case twice: the zip format of PyTorch 1.6 and later, and the
        # legacy format that _use_new_zipfile_serialization=False writes.
        for suffix, zipped in (("", True), ("_legacy", False)):
            torch.save(obj, os.path.join(outdir, name + suffix + ".pt"), _use_new_zipfile_serialization=zipped)
            with open(os.path.join(outdir, name + suffix + ".json"), "w") as f:
                json.dump(describe(sd), f, indent=1)


if __name__ == "__main__":
    main()

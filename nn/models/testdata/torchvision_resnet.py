"""Records torchvision's ResNets for the tests of package nn/models.

Run it where PyTorch is installed (the GPU machine), from the repository root:

    python3 nn/models/testdata/torchvision_resnet.py [DIR]

It writes into DIR (default: this script's directory):

  resnet18_state_dict.txt, resnet50_state_dict.txt
      every state_dict entry of torchvision.models.resnet18() / resnet50(),
      one "name dtype [shape]" a line, in state_dict order. The checked-in
      copies were derived from the architecture; "git diff" shows whether
      torchvision agrees with them.
  resnet18_golden.safetensors
      the state_dict of a resnet18 with 10 classes, saved with
      safetensors.torch.save_file (or in the same format by hand where the
      safetensors package is missing), every entry set by formula_value:
      values from integer arithmetic that the Go test repeats exactly, with
      batch-norm weights, biases and running statistics away from their
      defaults so that loading every one of them matters (about 45 MB; not
      checked in).
  resnet18_golden_io.safetensors (checked in)
      "input", the fixed [2, 3, 64, 64] input of formula_input, "eval", the
      model's output on it in evaluation mode, and "train", its output in
      training mode (batch statistics) computed afterwards.

TestGoldenResNet18 builds the same weights itself, or loads PyTorch's file
when it is present, and compares vram's outputs with PyTorch's. When
torchvision is missing, a definition of the same layout here stands in for
it, and the script says so.
"""
import math
import os
import sys

import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        idt = x if self.downsample is None else self.downsample(x)
        return self.relu(out + idt)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        idt = x if self.downsample is None else self.downsample(x)
        return self.relu(out + idt)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(block, 64, layers[0], 1)
        self.layer2 = self._layer(block, 128, layers[1], 2)
        self.layer3 = self._layer(block, 256, layers[2], 2)
        self.layer4 = self._layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _layer(self, block, planes, n, stride):
        down = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            down = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion))
        blocks = [block(self.inplanes, planes, stride, down)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, n)]
        return nn.Sequential(*blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def models():
    """Returns the resnet18 and resnet50 constructors and where they came from."""
    try:
        import torchvision
        return torchvision.models.resnet18, torchvision.models.resnet50, "torchvision " + torchvision.__version__
    except ImportError:
        return (lambda num_classes=1000: ResNet(BasicBlock, [2, 2, 2, 2], num_classes),
                lambda num_classes=1000: ResNet(Bottleneck, [3, 4, 6, 3], num_classes),
                "the local definition (torchvision is not installed)")


def save(tensors, path, metadata):
    """Writes tensors and the string map metadata with
    safetensors.torch.save_file, or, where the safetensors package is
    missing, in the same format by hand."""
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    if save_file is not None:
        save_file(tensors, path, metadata=metadata)
        return
    import json
    names = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for k in sorted(tensors):
        v = tensors[k]
        b = v.numpy().tobytes()
        header[k] = {"dtype": names[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def formula_u(n, salt):
    """Returns n float64 values in [-1, 1] from integer arithmetic, which
    Go computes bit for bit the same (TestGoldenResNet18)."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7919 + salt * 104729 + 13) % 2003).double() / 1001.0 - 1.0


def formula_value(name, k, t):
    """Returns the value of state-dict entry k, name, of t's shape: Kaiming-
    scaled convolution weights, batch-norm weights near 1, small biases and
    means, variances in [0.5, 1.5], 7 batches tracked."""
    if name.endswith("num_batches_tracked"):
        return torch.full_like(t, 7)
    u = formula_u(t.numel(), k)
    if name.endswith("running_var"):
        v = 1.0 + 0.5 * u
    elif name.endswith("running_mean") or name.endswith("bias"):
        v = 0.1 * u
    elif t.dim() == 1:
        v = 1.0 + 0.25 * u
    else:
        fan_in = t[0].numel()
        v = u * math.sqrt((6.0 if t.dim() == 4 else 1.0) / fan_in)
    return v.float().reshape(t.shape)


def formula_input():
    """Returns the fixed input [2, 3, 64, 64] of the golden test."""
    i = torch.arange(2 * 3 * 64 * 64, dtype=torch.int64)
    return (((i * 6007 + 17) % 1999).double() / 999.0 - 1.0).float().reshape(2, 3, 64, 64)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    r18, r50, origin = models()
    print("models from", origin)
    dtypes = {torch.float32: "float32", torch.int64: "int64"}
    for name, make in [("resnet18", r18), ("resnet50", r50)]:
        m = make()
        n = sum(p.numel() for p in m.parameters())
        with open(os.path.join(out, name + "_state_dict.txt"), "w") as f:
            for k, v in m.state_dict().items():
                f.write("%s %s [%s]\n" % (k, dtypes[v.dtype], ",".join(str(s) for s in v.shape)))
        print(name, len(m.state_dict()), "entries,", n, "parameters")

    m = r18(num_classes=10)
    sd = m.state_dict()
    with torch.no_grad():
        for k, (name, t) in enumerate(sd.items()):
            t.copy_(formula_value(name, k, t))
    meta = {"format": "pt", "torch": torch.__version__, "models": origin}
    save(sd, os.path.join(out, "resnet18_golden.safetensors"), meta)
    x = formula_input()
    m.eval()
    with torch.no_grad():
        ev = m(x)
    m.train()
    with torch.no_grad():
        tr = m(x)
    save({"input": x, "eval": ev, "train": tr}, os.path.join(out, "resnet18_golden_io.safetensors"), meta)
    print("golden files written to", out)


if __name__ == "__main__":
    main()

"""The TorchScript end-to-end test's Python half (tests/e2e/torchscript.sh), with the venv's torch.

    torchscript_models.py write KIND OUT [--shape C,H,W --classes N]   # script a model to OUT
    torchscript_models.py accuracy EXPORT 'VAL_GLOB' --shape ... --classes N
        # load an `mnddp export` into the Python module, print its accuracy on the validation shards
    torchscript_models.py unchanged EXPORT SCRIPTED PREFIX
        # exit 0 when the export's PREFIX* parameters equal the scripted file's (never trained)

KIND: convnet (examples/torchscript/make_model.py's model, BatchNorm + dropout), traced (an MLP,
torch.jit.trace: tracing bakes BatchNorm's and dropout's mode in, so it suits mode-free models), unused_branch (an auxiliary head its forward never calls),
frozen (convnet with its first convolution's weight requires_grad=False), wrong_output (3 logits
whatever --classes says), state_dict (torch.save of a state dict: not TorchScript), lm (embedding +
linear next-token model on int64 tokens).
"""
import argparse
import glob
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torchscript"))
from make_model import build, load_exported  # noqa: E402


class UnusedBranch(nn.Module):
    def __init__(self, features: int, classes: int):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))
        self.aux = nn.Linear(features, classes)  # never called in forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class TinyLm(nn.Module):
    def __init__(self, vocab: int, width: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.embed(tokens)))


def write(args):
    shape = [int(s) for s in args.shape.split(",")]
    features = int(np.prod(shape))
    torch.manual_seed(0)
    if args.kind == "convnet":
        torch.jit.script(build(shape, args.classes)).save(args.out)
    elif args.kind == "traced":
        model = nn.Sequential(nn.Flatten(), nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, args.classes))
        torch.jit.trace(model, torch.zeros(2, *shape)).save(args.out)
    elif args.kind == "frozen":
        model = build(shape, args.classes)
        model.features[0].weight.requires_grad_(False)
        torch.jit.script(model).save(args.out)
    elif args.kind == "unused_branch":
        torch.jit.script(UnusedBranch(features, args.classes)).save(args.out)
    elif args.kind == "wrong_output":
        torch.jit.script(build(shape, 3)).save(args.out)
    elif args.kind == "state_dict":
        torch.save(build(shape, args.classes).state_dict(), args.out)
    elif args.kind == "lm":
        torch.jit.script(TinyLm(args.classes)).save(args.out)
    else:
        sys.exit(f"unknown kind {args.kind}")


def accuracy(args):
    shape = [int(s) for s in args.shape.split(",")]
    model = load_exported(args.export, shape, args.classes)  # load_state_dict is strict: every name must match
    xs, ys = [], []
    for path in sorted(glob.glob(args.val)):
        with h5py.File(path, "r") as f:
            xs.append(f["x"][...])
            ys.append(f["y"][...])
    x, y = torch.from_numpy(np.concatenate(xs)).float(), torch.from_numpy(np.concatenate(ys))
    with torch.no_grad():
        correct = int((model(x).argmax(1) == y).sum())
    print(f"{correct} {len(y)}")


def unchanged(args):
    exported = torch.load(args.export, map_location="cpu", weights_only=False)["state_dict"]
    scripted = dict(torch.jit.load(args.scripted).named_parameters())
    names = [n for n in scripted if n.startswith(args.prefix)]
    assert names, f"no parameter starts with {args.prefix}"
    for name in names:
        if not torch.equal(exported[name], scripted[name]):
            sys.exit(f"{name} changed in training, but it has no gradient")
    trained = [n for n in scripted if not n.startswith(args.prefix)]
    if all(torch.equal(exported[n], scripted[n]) for n in trained):
        sys.exit("no parameter changed at all: the run did not train")
    print(f"unchanged: {', '.join(names)}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("kind")
    w.add_argument("out")
    a = sub.add_parser("accuracy")
    a.add_argument("export")
    a.add_argument("val")
    for q in (w, a):
        q.add_argument("--shape", default="1,28,28")
        q.add_argument("--classes", type=int, default=10)
    u = sub.add_parser("unchanged")
    u.add_argument("export")
    u.add_argument("scripted")
    u.add_argument("prefix")
    args = p.parse_args()
    {"write": write, "accuracy": accuracy, "unchanged": unchanged}[args.command](args)


if __name__ == "__main__":
    main()

"""Define a model in Python, script it, and write the file mnddp trains with --model torchscript:PATH.

    python examples/torchscript/make_model.py --shape 1,28,28 --classes 10 --out runs/net.pt

Any nn.Module works if torch.jit.script (or torch.jit.trace, for models whose forward does not
depend on train/eval mode: a trace records one mode of BatchNorm and dropout) accepts it and its forward
takes one batch tensor: float samples [N, *shape] for classification and regression (returning
[N, classes] or [N, targets]), int64 token ids [N, T] for lm (returning [N, T, vocab]). mnddp trains
every parameter and buffer by its own name; `mnddp export` writes a state dict that loads back
into this class with load_state_dict (see `load_exported` below).
"""
import argparse

import torch
import torch.nn as nn


class SmallConvNet(nn.Module):
    """Two conv blocks with BatchNorm and max-pooling, then dropout and a linear classifier on the
    flattened feature map (which keeps where a feature is, unlike a global average pool)."""

    def __init__(self, channels: int, height: int, width_px: int, classes: int, width: int = 16,
                 dropout: float = 0.1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(2 * width * (height // 4) * (width_px // 4), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.features(x)))


def build(shape, classes, width=16, dropout=0.1):
    return SmallConvNet(shape[0], shape[1], shape[2], classes, width, dropout)


def load_exported(path, shape, classes, width=16, dropout=0.1):
    """The Python module with the weights of an `mnddp export` file."""
    model = build(shape, classes, width, dropout)
    exported = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(exported["state_dict"])
    return model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="1,28,28", help="one sample's shape C,H,W (the dataset's)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--trace", action="store_true",
                        help="torch.jit.trace instead of torch.jit.script (the trace records BatchNorm and dropout "
                             "in one mode, so this model would train with eval-mode BatchNorm and no dropout)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shape = [int(s) for s in args.shape.split(",")]
    torch.manual_seed(args.seed)
    model = build(shape, args.classes, args.width, args.dropout)
    if args.trace:
        scripted = torch.jit.trace(model.eval(), torch.zeros(2, *shape)).train()
    else:
        scripted = torch.jit.script(model)
    scripted.save(args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {type(model).__name__}, {count} parameters, torch {torch.__version__}")


if __name__ == "__main__":
    main()

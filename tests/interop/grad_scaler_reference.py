"""PyTorch's torch.amp.GradScaler on a fixed sequence of (already scaled) gradients, with inf and NaN
steps: the reference tests/interop/check_grad_scaler.cpp holds mnddp's LossScaler against.

Usage: grad_scaler_reference.py OUT.json
Each step records the gradient given, the gradient after unscale_, whether optimizer.step was
skipped, and the scale after update(). Non-finite numbers are written as the strings "inf",
"-inf" and "nan" (JSON has none).
"""
import json
import math
import sys

import torch

INIT_SCALE, GROWTH, BACKOFF, INTERVAL = 1024.0, 2.0, 0.5, 3


def encode(values):
    out = []
    for v in values:
        if math.isnan(v):
            out.append("nan")
        elif math.isinf(v):
            out.append("inf" if v > 0 else "-inf")
        else:
            out.append(v)
    return out


def main():
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.zeros(6))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_factor=GROWTH, backoff_factor=BACKOFF,
                                  growth_interval=INTERVAL)
    steps = []
    # Clean runs long enough to grow twice, overflows in a row, a NaN, then clean again.
    bad = {4: ("inf", 1), 5: ("-inf", 0), 9: ("nan", 3), 15: ("inf", 5)}
    for i in range(20):
        grad = torch.randn(6) * 1000.0
        if i in bad:
            kind, where = bad[i]
            grad[where] = float(kind)
        scaler.scale((param * 0.0).sum())  # what a training step does first (it also creates the scale)
        param.grad = grad.clone()  # the gradient of the scaled loss, as backward would leave it
        scaler.unscale_(optimizer)
        unscaled = param.grad.clone()
        before = param.detach().clone()
        scaler.step(optimizer)
        skipped = bool(torch.equal(before, param.detach()))  # SGD moves a parameter on every finite step
        scaler.update()
        steps.append({"grad": encode(grad.tolist()), "unscaled": encode(unscaled.tolist()), "skipped": skipped,
                      "scale": scaler.get_scale()})
    json.dump({"init_scale": INIT_SCALE, "growth_factor": GROWTH, "backoff_factor": BACKOFF,
               "growth_interval": INTERVAL, "torch": torch.__version__, "steps": steps}, open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()

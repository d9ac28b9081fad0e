"""PyTorch's learning-rate schedulers for the schedules mnddp offers (run with the venv's python).

    lr_schedule_reference.py OUT.json

For each case: a LinearLR warm-up (from lr/warmup to lr over the warm-up steps) followed, through
SequentialLR, by CosineAnnealingLR, LinearLR (to min_lr), StepLR or a constant; the learning rate
of every optimizer step as the optimizer sees it. check_lr_schedules compares mnddp's.
"""
import json
import sys
import warnings

import torch
from torch.optim import lr_scheduler as sched

warnings.filterwarnings("ignore")  # SequentialLR's deprecation chatter about epoch arguments

CASES = [
    {"schedule": "cosine", "lr": 0.1, "min_lr": 0.001, "warmup": 5, "total": 60},
    {"schedule": "cosine", "lr": 3e-4, "min_lr": 0.0, "warmup": 0, "total": 37},
    {"schedule": "linear", "lr": 0.05, "min_lr": 0.005, "warmup": 10, "total": 50},
    {"schedule": "linear", "lr": 1.0, "min_lr": 0.0, "warmup": 0, "total": 20},
    {"schedule": "step", "lr": 0.2, "gamma": 0.5, "step_size": 7, "warmup": 3, "total": 40},
    {"schedule": "constant", "lr": 0.01, "warmup": 8, "total": 25},
]


def lrs(case):
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=case["lr"])
    warmup, total, lr = case["warmup"], case["total"], case["lr"]
    span = max(1, total - warmup)
    name = case["schedule"]
    if name == "cosine":
        after = sched.CosineAnnealingLR(optimizer, T_max=span, eta_min=case["min_lr"])
    elif name == "linear":
        after = sched.LinearLR(optimizer, start_factor=1.0, end_factor=case["min_lr"] / lr, total_iters=span)
    elif name == "step":
        after = sched.StepLR(optimizer, step_size=case["step_size"], gamma=case["gamma"])
    else:
        after = sched.ConstantLR(optimizer, factor=1.0, total_iters=0)
    if warmup > 0:
        warm = sched.LinearLR(optimizer, start_factor=1.0 / warmup, end_factor=1.0, total_iters=max(1, warmup - 1))
        scheduler = sched.SequentialLR(optimizer, [warm, after], milestones=[warmup])
    else:
        scheduler = after
    out = []
    for _ in range(total):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out


def main():
    cases = [dict(case, lrs=lrs(case)) for case in CASES]
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

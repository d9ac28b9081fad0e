"""The published update rules of LARS and LAMB in plain torch, and torch.optim's AdamW and SGD, on
fixed gradients (run with the venv's python).

    optimizer_reference.py OUT.json

A few tensors as a model has them (a 2-D weight, a 1-D bias, a 1-D norm weight, a zero-initialised
2-D weight), fixed gradients for each of K steps (one all-zero gradient, one step where a tensor has
no gradient at all, as an unused parameter), and a learning rate that changes every step (a
warm-up). For each case, the parameters after every step. check_optimizers replays the same
gradients through mnddp's optimizers and compares.

The no-decay group is listed here by name (the biases and the norm weight), not by mnddp's shape
rule, so the two sides do not share the rule they are checking.
"""
import json
import sys

import torch

STEPS = 6
LRS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.5]
NO_DECAY = {"fc.bias", "norm.weight", "norm.bias"}  # a PyTorch recipe's biases and norms
SHAPES = {"fc.weight": [4, 3], "fc.bias": [4], "norm.weight": [4], "norm.bias": [4], "zero.weight": [3, 2]}


def initial():
    g = torch.Generator().manual_seed(15)
    out = {
        "fc.weight": torch.randn(4, 3, generator=g) * 0.5,
        "fc.bias": torch.randn(4, generator=g) * 0.1,
        "norm.weight": 1.0 + 0.1 * torch.randn(4, generator=g),
        "norm.bias": torch.zeros(4),  # ||w|| = 0 at the first step
        "zero.weight": torch.zeros(3, 2),  # ||w|| = 0 at the first step (a zero-initialised layer)
    }
    return out


def gradients():
    g = torch.Generator().manual_seed(16)
    steps = []
    for k in range(STEPS):
        grads = {name: torch.randn(*shape, generator=g) for name, shape in SHAPES.items()}
        if k == 2:
            grads["fc.weight"] = torch.zeros(4, 3)  # ||g|| = 0
            grads["norm.weight"] = torch.zeros(4)
        if k == 3:
            grads["zero.weight"] = None  # unused this step: untouched, its step count too
        steps.append(grads)
    return steps


# --- the published rules, one tensor at a time ------------------------------------------------------
def lars_step(w, g, buf, lr, momentum, wd, eta, eps, adapt):
    """You et al. 2017 as MLPerf / NVIDIA (and apex LARC, clip=False) apply it."""
    if adapt:
        w_norm, g_norm = torch.linalg.vector_norm(w), torch.linalg.vector_norm(g)
        if w_norm > 0 and g_norm > 0:
            ratio = eta * w_norm / (g_norm + wd * w_norm + eps)
        else:
            ratio = torch.tensor(1.0)
    else:
        ratio = torch.tensor(1.0)
    d = ratio * (g + wd * w)
    buf = momentum * buf + d
    return w - lr * buf, buf


def lamb_step(w, g, m, v, t, lr, beta1, beta2, eps, wd, adapt):
    """You et al. 2019, Algorithm 2, with bias correction."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    r = m_hat / (torch.sqrt(v_hat) + eps) + wd * w
    ratio = torch.tensor(1.0)
    if adapt:
        w_norm, r_norm = torch.linalg.vector_norm(w), torch.linalg.vector_norm(r)
        if w_norm > 0 and r_norm > 0:
            ratio = w_norm / r_norm
    return w - lr * ratio * r, m, v


def run_manual(case, params, grads):
    split = case["split"]
    state = {}
    history = []
    for k in range(STEPS):
        lr = LRS[k]
        for name in params:
            g = grads[k][name]
            if g is None:
                continue
            excluded = split and name in NO_DECAY
            wd = 0.0 if excluded else case["weight_decay"]
            w = params[name]
            if case["optimizer"] == "lars":
                buf = state.get(name, torch.zeros_like(w))
                params[name], state[name] = lars_step(
                    w, g, buf, lr, case["momentum"], wd, case["lars_eta"], case["eps"], adapt=not excluded
                )
            else:
                m, v, t = state.get(name, (torch.zeros_like(w), torch.zeros_like(w), 0))
                params[name], m, v = lamb_step(
                    w, g, m, v, t + 1, lr, case["beta1"], case["beta2"], case["eps"], wd, adapt=not excluded
                )
                state[name] = (m, v, t + 1)
        history.append({name: p.clone() for name, p in params.items()})
    return history


def run_torch(case, params, grads):
    tensors = {name: torch.nn.Parameter(p.clone()) for name, p in params.items()}
    if case["split"]:
        groups = [
            {"params": [p for n, p in tensors.items() if n not in NO_DECAY]},
            {"params": [p for n, p in tensors.items() if n in NO_DECAY], "weight_decay": 0.0},
        ]
    else:
        groups = [{"params": list(tensors.values())}]
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW(
            groups, lr=LRS[0], betas=(case["beta1"], case["beta2"]), eps=case["eps"], weight_decay=case["weight_decay"]
        )
    else:
        opt = torch.optim.SGD(
            groups, lr=LRS[0], momentum=case["momentum"], nesterov=case["nesterov"], weight_decay=case["weight_decay"]
        )
    history = []
    for k in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = LRS[k]
        for name, p in tensors.items():
            g = grads[k][name]
            p.grad = None if g is None else g.clone()
        opt.step()
        history.append({name: p.detach().clone() for name, p in tensors.items()})
    return history


BASE = {"momentum": 0.9, "nesterov": False, "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
        "lars_eta": 0.001}
# no_decay_norm_bias as given to mnddp ("auto" resolves per optimizer); split: what it resolves to.
CASES = [
    dict(BASE, name="lars", optimizer="lars", no_decay_norm_bias="auto", split=True, weight_decay=0.05,
         lars_eta=0.02, eps=1e-6),
    dict(BASE, name="lars all adapted", optimizer="lars", no_decay_norm_bias="false", split=False, weight_decay=0.05,
         lars_eta=0.02, momentum=0.8),
    dict(BASE, name="lamb", optimizer="lamb", no_decay_norm_bias="auto", split=True, weight_decay=0.1, eps=1e-6,
         beta2=0.99),
    dict(BASE, name="lamb all adapted", optimizer="lamb", no_decay_norm_bias="false", split=False, weight_decay=0.1,
         eps=1e-6),
    dict(BASE, name="adamw no-decay group", optimizer="adamw", no_decay_norm_bias="auto", split=True,
         weight_decay=0.1),
    dict(BASE, name="adamw one group", optimizer="adamw", no_decay_norm_bias="false", split=False, weight_decay=0.1),
    dict(BASE, name="sgd", optimizer="sgd", no_decay_norm_bias="auto", split=False, weight_decay=0.05),
    dict(BASE, name="sgd no-decay group, nesterov", optimizer="sgd", no_decay_norm_bias="true", split=True,
         weight_decay=0.05, nesterov=True),
]


def listed(tensors):
    return [{"name": n, "shape": list(t.shape), "values": t.reshape(-1).tolist()} for n, t in tensors.items()]


def main():
    params, grads = initial(), gradients()
    cases = []
    for case in CASES:
        start = {n: p.clone() for n, p in params.items()}
        run = run_manual if case["optimizer"] in ("lars", "lamb") else run_torch
        history = run(case, start, grads)
        cases.append(dict(case, expected=[{n: t.reshape(-1).tolist() for n, t in h.items()} for h in history]))
    doc = {
        "torch": torch.__version__,
        "lrs": LRS,
        "parameters": listed(params),
        "gradients": [{n: (None if g is None else g.reshape(-1).tolist()) for n, g in step.items()} for step in grads],
        "cases": cases,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

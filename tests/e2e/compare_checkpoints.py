"""Compares two mnddp checkpoints array by array (h5py) and, optionally, two metrics files.

Usage: compare_checkpoints.py A.h5 B.h5 [--metrics A.jsonl B.jsonl] [--tolerance REL] [--skip-rng]
Exit 0 when every array matches (bitwise unless --tolerance) and the train/eval losses are identical.
"""
import argparse
import json
import sys

import h5py
import numpy as np


def arrays(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def losses(path):
    """The training and validation losses; each invocation's summary line is left out (a resumed run
    has one per invocation)."""
    rows = [json.loads(line) for line in open(path)]
    return [(r["kind"], r["step"], r["loss"]) for r in rows if r["kind"] in ("train", "eval")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--metrics", nargs=2)
    p.add_argument("--tolerance", type=float, default=0.0)
    p.add_argument("--skip-rng", action="store_true")
    args = p.parse_args()
    a, b = arrays(args.a), arrays(args.b)
    problems = []
    if sorted(a) != sorted(b):
        problems.append(f"different arrays: {sorted(set(a) ^ set(b))}")
    for name in sorted(set(a) & set(b)):
        if args.skip_rng and name.startswith("rng/"):
            continue
        x, y = a[name], b[name]
        if args.tolerance == 0.0:
            if x.shape != y.shape or not np.array_equal(x, y):
                problems.append(f"{name} differs")
        else:
            scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-12)
            err = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) / scale if y.size else 0.0
            if err > args.tolerance:
                problems.append(f"{name}: relative difference {err:.3g} > {args.tolerance}")
    if args.metrics and losses(args.metrics[0]) != losses(args.metrics[1]):
        problems.append("loss logs differ")
    for problem in problems:
        print("MISMATCH:", problem)
    print(f"compared {len(a)} arrays: {'identical' if not problems else 'different'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

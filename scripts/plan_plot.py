#!/usr/bin/env python3
"""mnddp plan's scaling curve: samples/s against GPUs (with linear scaling and the efficiency floor),
and the step split into compute and exposed communication, from a plan JSON (mnddp plan --json).

Usage: python3 plan_plot.py PLAN.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(plan_path, png_path):
    with open(plan_path) as f:
        plan = json.load(f)
    rows = plan["rows"]
    ranks = [r["ranks"] for r in rows]
    samples = [r["samples_per_s"] for r in rows]
    single = samples[0] / (rows[0]["efficiency"] * ranks[0])  # one rank alone
    floor = plan["advice"]["efficiency_floor"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(ranks, samples, "o-", label="predicted")
    left.loglog(ranks, [single * n for n in ranks], "--", color="grey", label="linear")
    left.loglog(ranks, [single * n * floor for n in ranks], ":", color="grey", label=f"{floor:.0%} efficiency")
    left.set_xlabel("GPUs (ranks)")
    left.set_ylabel("samples/s")
    left.set_title(f"{plan['model']}\n{plan['network']}", fontsize=9)
    left.legend(fontsize=8)
    left.grid(True, which="both", alpha=0.3)
    compute = [r["compute_s"] * 1e3 for r in rows]
    exposed = [(r["exposed_s"] + r["allgather_s"]) * 1e3 for r in rows]
    labels = [str(r["nodes"]) for r in rows]
    right.bar(labels, compute, label="compute (data, forward, backward, optimizer)")
    right.bar(labels, exposed, bottom=compute, label="exposed communication")
    for i, r in enumerate(rows):
        right.text(i, compute[i] + exposed[i], f"{r['efficiency']:.0%}", ha="center", va="bottom", fontsize=7)
    right.set_xlabel(f"nodes of {plan['gpus_per_node']} ranks")
    right.set_ylabel("ms a step")
    right.set_title(f"--zero {plan['zero']}, buckets {plan['bucket_cap_mb']:g} MiB", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

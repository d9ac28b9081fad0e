#!/usr/bin/env python3
"""mnddp plan against published figures (docs/PLAN.md, "Validation"): the model fed the hardware
and models of the published runs reproduces their scaling, and its reference network reproduces
nccl-tests' all-reduce bus bandwidths.

1. Horovod (Sergeev and Del Balso 2018; horovod/horovod's README and docs/benchmarks.rst):
   ResNet-101, batch 64 a GPU, 4 Pascal GPUs a server. Each run's gradient-ready profile is
   ResNet-101's own, measured here by `mnddp plan` on the CPU (the order and timing of the
   gradients within backward, as fractions of it), scaled to the published single-GPU step time;
   the plan then runs on the published cluster's network (`mnddp plan --from`).
2. nccl-tests: the all-reduce of one buffer of S bytes on the h100-nvlink-ib400 profile, as a
   "step" of one bucket with nothing to hide it, against the bus bandwidths NVIDIA's maintainers
   and users published for 8x H100 nodes.

Usage: python3 bench/plan_published.py --mnddp build/mnddp --mnddp-data build/mnddp-data --work DIR
"""
import argparse
import copy
import json
import os
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return out.stdout


def plan_from(mnddp, work, name, inputs, network, gpus_per_node, max_nodes):
    path = os.path.join(work, f"{name}.inputs.json")
    with open(path, "w") as f:
        json.dump(inputs, f)
    out = os.path.join(work, f"{name}.plan.json")
    run([mnddp, "plan", "--from", path, "--network", network, "--gpus-per-node", str(gpus_per_node),
         "--max-nodes", str(max_nodes), "--json", out])
    with open(out) as f:
        return json.load(f)


def row(plan, ranks):
    return next(r for r in plan["rows"] if r["ranks"] == ranks)


def scaled(measured, step_s, batch, bucket_bytes):
    """The measured inputs with compute scaled to a published single-GPU step, data wait 0 (the
    published runs used synthetic data), and the published run's fusion buffer as its buckets."""
    inputs = copy.deepcopy(measured)
    s = inputs["step"]
    compute = s["forward_s"] + s["backward_s"] + s["optimizer_s"]
    k = step_s / compute
    s["data_wait_s"] = 0.0
    for key in ("forward_s", "backward_s", "optimizer_s"):
        s[key] *= k
    s["ready_s"] = [t * k for t in s["ready_s"]]
    s["threads"] = 1
    inputs["batch_per_rank"] = batch
    inputs["options"]["bucket_cap_bytes"] = bucket_bytes
    inputs["options"]["first_bucket_bytes"] = bucket_bytes
    inputs["network"]["cores_per_node"] = 0
    return inputs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mnddp", required=True)
    ap.add_argument("--mnddp-data", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work, mnddp = args.work, args.mnddp
    os.makedirs(work, exist_ok=True)

    # ResNet-101's gradient-ready profile, measured on this CPU at 96x96 (the order and relative
    # timing of the gradients do not depend on the image size much; 224x224 is slow on a CPU).
    data = os.path.join(work, "images")
    run([args.mnddp_data, "synth", "--out", data, "--train-samples", "64", "--val-samples", "0", "--shards", "1",
         "--shape", "3,96,96", "--classes", "1000", "--overwrite"])
    measured_path = os.path.join(work, "resnet101.measured.json")
    run([mnddp, "plan", "--train-data", f"{data}/train_*.h5", "--val-data", "", "--model", "resnet101",
         "--stem", "imagenet", "--num-classes", "1000", "--batch-size", "4", "--optimizer", "sgd", "--momentum", "0.9", "--threads", "2",
         "--plan-steps", "3", "--plan-warmup", "1", "--max-nodes", "1", "--json", measured_path])
    with open(measured_path) as f:
        measured = json.load(f)["inputs"]

    results = []  # (case, predicted, published)
    # Horovod's published runs: the README's testbeds (images/s against 1 GPU) and the 512-GPU chart.
    horovod_step = 64 / 119.4  # testbed A's one Pascal GPU: 119.4 images/s at batch 64
    inputs = scaled(measured, horovod_step, 64, 64 << 20)  # Tensor Fusion's 64 MB buffer (2018)
    p25 = plan_from(mnddp, work, "horovod-25g", inputs, "p100-pcie-25gbe", 4, 128)
    results.append(("Horovod ResNet-101, 16 GPUs, 25 Gb/s RoCE (RDMA)", row(p25, 16)["efficiency"], 1746.2 / (16 * 119.4)))
    results.append(("Horovod ResNet-101, 512 GPUs, 25 Gb/s RoCE", row(p25, 512)["efficiency"], 0.90))
    # Testbed B: 16 servers on plain 40 Gb/s (TCP): the 25 Gb/s profile with 40 Gb/s at 93%.
    profile = copy.deepcopy(p25["inputs"]["network"])
    profile.update(name="p100-pcie-40gbe", description="4x Pascal P100 PCIe a node; one 40 Gb/s NIC a node (TCP)")
    profile["inter"]["bandwidth_GBps"] = 40 / 8 * 0.93 / 4
    with open(os.path.join(work, "p100-40g.json"), "w") as f:
        json.dump(profile, f)
    horovod_b_step = 64 / 136.0  # testbed B's one GPU: 136.0 images/s
    p40 = plan_from(mnddp, work, "horovod-40g", scaled(measured, horovod_b_step, 64, 64 << 20),
                    os.path.join(work, "p100-40g.json"), 4, 16)
    results.append(("Horovod ResNet-101, 64 GPUs, 40 Gb/s TCP", row(p40, 64)["efficiency"], 7741.6 / (64 * 136.0)))

    # nccl-tests: one bucket of S bytes, nothing to hide it: the step is the all-reduce.
    def allreduce_busbw(nodes, size):
        inputs = copy.deepcopy(measured)
        inputs["step"].update(data_wait_s=0, forward_s=0, backward_s=0, optimizer_s=0, gradient_bytes=[size], keys=[0],
                              ready_s=[0.0], threads=1)
        inputs["options"].update(bucket_cap_bytes=size, first_bucket_bytes=size)
        plan = plan_from(mnddp, work, f"nccl-{nodes}-{size}", inputs, "h100-nvlink-ib400", 8, nodes)
        r = row(plan, nodes * 8)
        n = r["ranks"]
        return size / r["step_s"] * 2 * (n - 1) / n / 1e9, r["step_s"]

    bw1, _ = allreduce_busbw(1, 1 << 30)
    results.append(("nccl-tests all_reduce busbw, 8x H100, 1 GiB (GB/s)", bw1, 367.5))
    bw4, _ = allreduce_busbw(4, 4 << 30)
    results.append(("nccl-tests all_reduce busbw, 4 nodes x 8 H100, 8x 400G, 4 GiB (GB/s)", bw4, 345.0))
    _, small = allreduce_busbw(1, 8)
    results.append(("nccl-tests all_reduce time, 8 GPUs, 8 bytes (us)", small * 1e6, 12.5))

    print(f"{'case':72} {'predicted':>10} {'published':>10} {'error':>7}")
    for name, predicted, published in results:
        print(f"{name:72} {predicted:>10.3f} {published:>10.3f} {predicted / published - 1:>+7.1%}")


if __name__ == "__main__":
    main()

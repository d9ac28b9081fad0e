"""mnddp against PyTorch on the GPU (scripts/device_check.sh's benchmark stage), bf16 autocast, for the
ConvNet, ResNet-18 and GPT-small, alternating the two sides in each round:
  1 rank:  `mnddp train` against PyTorch eager (bench/torch_gpu_peer.py, no DDP);
  2 ranks: `mnddp train` over NCCL against `torchrun` DistributedDataParallel over NCCL, both with two
           ranks on the one GPU when there is only one (each rank its own NCCL_HOSTID: sockets over
           loopback, the same handicap for both).
Each side: samples/s after --warmup steps (global), peak GPU memory, host waits per step (both run
with bench/host_wait_counter.c preloaded). Prints one line per run and, last, per model and rank
count: "ratio MODEL Nr: R (...)", R = mnddp / PyTorch, medians over the rounds (goal >= 1.0).

Usage: python3 bench/gpu_bench.py --build DIR --work DIR [--models convnet,resnet18,gpt-small]
         [--ranks 1,2] [--rounds 2] [--steps 60] [--warmup 20] [--dry-run]
--dry-run: the same on the CPU (gloo for the peer, tiny models, a few steps): the plumbing only.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")

# name: (data options, mnddp options, peer options, per-rank batch)
MODELS = {
    "convnet": (["--shape", "3,32,32", "--classes", "10", "--train-samples", "16384", "--shards", "4"],
                ["--model", "convnet", "--hidden", "64", "--layers", "4", "--num-classes", "10", "--optimizer", "sgd",
                 "--lr", "0.05", "--momentum", "0.9"],
                ["--model", "convnet", "--hidden", "64", "--layers", "4", "--classes", "10"], 256),
    "resnet18": (["--shape", "3,32,32", "--classes", "10", "--train-samples", "8192", "--shards", "4"],
                 ["--model", "resnet18", "--stem", "cifar", "--num-classes", "10", "--optimizer", "sgd", "--lr", "0.05",
                  "--momentum", "0.9"],
                 ["--model", "resnet18", "--classes", "10"], 128),
    "gpt-small": (["--task", "lm", "--vocab", "1024", "--shape", "257", "--train-samples", "8192", "--shards", "4"],
                  ["--task", "lm", "--model", "gpt", "--hidden", "384", "--layers", "6", "--heads", "6",
                   "--vocab-size", "1024", "--optimizer", "adamw", "--lr", "0.003", "--beta2", "0.95",
                   "--weight-decay", "0.1"],
                  ["--model", "gpt", "--hidden", "384", "--layers", "6", "--heads", "6", "--vocab-size", "1024"], 32),
}
DRY = {  # tiny and few, on the CPU
    "convnet": (["--shape", "3,16,16", "--classes", "4", "--train-samples", "512", "--shards", "2"],
                ["--model", "convnet", "--hidden", "8", "--layers", "2", "--num-classes", "4", "--optimizer", "sgd",
                 "--lr", "0.05", "--momentum", "0.9"], None, 16),
}


def run_env(args, mnddp):
    """mnddp's runs get the carried libraries first (device_check.sh's MNDDP_RUN_LD_LIBRARY_PATH), the
    peer the machine's own; both the host-wait counter."""
    env = dict(os.environ)
    if mnddp and "MNDDP_RUN_LD_LIBRARY_PATH" in env:
        env["LD_LIBRARY_PATH"] = env["MNDDP_RUN_LD_LIBRARY_PATH"]
    if args.interposer:
        env["LD_PRELOAD"] = str(args.interposer)
    return env


def mnddp_run(args, build, work, name, ranks, data):
    _, options, _, batch = (DRY if args.dry_run else MODELS)[name]
    metrics = work / f"{name}-{ranks}r-mnddp.jsonl"
    metrics.unlink(missing_ok=True)
    log = work / f"{name}-{ranks}r-mnddp.log"
    device = ["--device", "cpu", "--backend", "mpi", "--threads", "1"] if args.dry_run else \
        ["--device", "cuda", "--backend", "nccl", "--amp", "bf16", "--threads", "4"]
    cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", "bash", str(ROOT / "tests/gpu/one_gpu_pair.sh"),
           str(build / "mnddp"), "train", "--train-data", data, "--val-data", "", "--checkpoint-dir", "",
           *options, *device, "--batch-size", str(batch), "--max-steps", str(args.warmup + args.steps),
           "--epochs", "1000000", "--log-interval", str(args.interval), "--metrics-file", str(metrics), "--seed", "42"]
    code = subprocess.run(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=run_env(args, True)).returncode
    if code != 0:
        raise RuntimeError(f"mnddp exited {code} (log {log})")
    rows = [json.loads(line) for line in open(metrics) if '"kind":"train"' in line]
    timed = [r for r in rows if r["step"] > args.warmup]
    peak = re.search(r"peak GPU memory: (\d+)", log.read_text())
    return {"samples_per_s": statistics.mean(r["samples_per_s"] for r in timed),
            "peak_mib": float(peak.group(1)) if peak else float("nan"),
            "host_waits": statistics.mean(r.get("host_waits_per_step", float("nan")) for r in timed)}


def peer_run(args, work, name, ranks, data_dir):
    _, _, options, batch = MODELS[name]
    log = work / f"{name}-{ranks}r-peer.log"
    script = [str(ROOT / "bench/torch_gpu_peer.py"), "--data", data_dir, *options, "--batch-size", str(batch),
              "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if ranks == 1:
        cmd = [args.python, *script]
    else:
        cmd = [args.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks),
               *script, *(["--one-gpu"] if args.gpus < ranks else [])]
    out = subprocess.run(cmd, capture_output=True, text=True, env=run_env(args, False))
    log.write_text(out.stdout + out.stderr)
    found = re.search(r"peer samples/s: ([\d.]+) peak_mib: ([\d.]+) host_waits_per_step: (\S+)", out.stdout)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"the PyTorch peer exited {out.returncode} (log {log})")
    return {"samples_per_s": float(found.group(1)), "peak_mib": float(found.group(2)),
            "host_waits": float(found.group(3))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--models", default="convnet,resnet18,gpt-small")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--interval", type=int, default=20, help="mnddp's --log-interval")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    build, work = Path(args.build), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    found = glob.glob(str(build / "bench" / "libmnddp_host_waits.so"))
    args.interposer = found[0] if found else None
    args.gpus = 0 if args.dry_run else int(subprocess.run(
        [args.python, "-c", "import torch; print(torch.cuda.device_count())"], capture_output=True, text=True).stdout
        or 0)
    models = ["convnet"] if args.dry_run else args.models.split(",")
    if args.dry_run:
        args.steps, args.warmup, args.interval, args.rounds = 4, 2, 2, 1
    failed = False
    lines = []
    for name in models:
        spec = (DRY if args.dry_run else MODELS)[name]
        data_dir = work / f"data-{name}"
        if not glob.glob(str(data_dir / "train_*.h5")):
            subprocess.run([str(build / "mnddp-data"), "synth", "--out", str(data_dir), "--val-samples", "0",
                            *spec[0]], check=True, stdout=subprocess.DEVNULL, env=run_env(args, True))
        for ranks in (int(r) for r in args.ranks.split(",")):
            ours, theirs = [], []
            try:
                for round_ in range(args.rounds):
                    ours.append(mnddp_run(args, build, work, name, ranks, str(data_dir / "train_*.h5")))
                    if not args.dry_run:
                        theirs.append(peer_run(args, work, name, ranks, str(data_dir)))
                    them = theirs[-1] if theirs else None
                    print(f"round {round_ + 1} {name} {ranks}r: mnddp {ours[-1]['samples_per_s']:.0f} samples/s"
                          + (f", PyTorch {them['samples_per_s']:.0f} samples/s" if them else ""), flush=True)
            except RuntimeError as error:
                failed = True
                lines.append(f"ratio {name} {ranks}r: FAIL {error}")
                continue
            if args.dry_run:
                lines.append(f"ratio {name} {ranks}r: dry run, mnddp {ours[-1]['samples_per_s']:.0f} samples/s on "
                             f"the CPU (no peer)")
                continue
            med = {key: statistics.median(r[key] for r in ours) for key in ours[0]}
            peer = {key: statistics.median(r[key] for r in theirs) for key in theirs[0]}
            side = "PyTorch eager" if ranks == 1 else "torchrun DDP"
            lines.append(f"ratio {name} {ranks}r: {med['samples_per_s'] / peer['samples_per_s']:.2f} "
                         f"(mnddp {med['samples_per_s']:.0f} samples/s, {med['peak_mib']:.0f} MiB, "
                         f"{med['host_waits']:.2f} waits/step; {side} {peer['samples_per_s']:.0f} samples/s, "
                         f"{peer['peak_mib']:.0f} MiB, {peer['host_waits']:.2f} waits/step)")
    for line in lines:
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The driver of bench/compare.sh: mnddp against PyTorch DDP (bench/torch_peer.py), the same models on the
same HDF5 files, 1 and 2 ranks, alternating, the median of several rounds. Prints the results, and
writes them into docs/BENCHMARKS.md (between the compare.sh markers) with a plot, docs/compare.png.

Run it through bench/compare.sh, which sets up the environment (MPI as root, one thread per rank).
"""
import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import compare_report as report
from compare_report import SIDES

# Training data, written once per suite by mnddp-data synth (both sides read these files).
DATASETS = {
    # The issue's: one 20000x784 float32 file.
    "flat": ["--shape", "784", "--classes", "10", "--train-samples", "20000", "--shards", "1"],
    "image": ["--shape", "3,32,32", "--classes", "10", "--train-samples", "8192", "--shards", "4"],
    "tokens": ["--task", "lm", "--vocab", "512", "--shape", "129", "--train-samples", "4096", "--shards", "4"],
}


@dataclasses.dataclass
class Model:
    label: str
    what: str  # the architecture in words, for the doc
    data: str  # a DATASETS key
    batch: int  # per rank
    shared: list  # options both sides take, spelled alike
    steps: tuple  # (short, long): the differenced pair
    quick: tuple  # the same for --quick
    mnddp_only: list = dataclasses.field(default_factory=list)


SGD = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--num-classes", "10"]
# Step counts (short, long): the long run's extra steps take about 4-15 s per side on a 2-core
# machine, so start-up noise (tens of ms) stays near 1% of the difference, and the short run is past
# the first steps' warm-up. The whole suite, 3 rounds, takes about 15-20 minutes there.
MODELS = {
    "mlp-small": Model("MLP-small", "MLP 784-128-128-10", "flat", 32,
                       ["--model", "mlp", "--hidden", "128", "--layers", "2"] + SGD, (20, 4020), (5, 205)),
    "mlp": Model("MLP", "MLP 784-512-512-10", "flat", 64,
                 ["--model", "mlp", "--hidden", "512", "--layers", "2"] + SGD, (20, 1020), (5, 105)),
    "convnet": Model("ConvNet", "ConvNet, 32 channels x 3 blocks, BatchNorm, 3x32x32", "image", 32,
                     ["--model", "convnet", "--hidden", "32", "--layers", "3"] + SGD, (20, 220), (2, 6)),
    "resnet18": Model("ResNet-18", "ResNet-18 (torchvision), CIFAR stem, 3x32x32", "image", 32,
                      ["--model", "resnet18"] + SGD, (4, 14), (1, 2), mnddp_only=["--stem", "cifar"]),
    "gpt-small": Model("GPT-small", "GPT, 4 blocks x d 128, 4 heads, context 128, vocab 512, tied", "tokens", 16,
                       ["--task", "lm", "--model", "gpt", "--hidden", "128", "--layers", "4", "--heads", "4",
                        "--vocab-size", "512", "--optimizer", "adamw", "--lr", "0.003", "--beta2", "0.95",
                        "--weight-decay", "0.1"], (10, 70), (1, 3)),
}


def step_counts(model, args):
    """(S_short, S_long) for this run: --quick's, or the model's with the difference scaled by --scale."""
    if args.quick:
        return model.quick
    short, long = model.steps
    return short, short + max(1, round((long - short) * args.scale))


STEP1 = re.compile(r"\bstep 1/\d+: loss")  # the first step's log line, the same words on both sides
PARAMS = {"mnddp": re.compile(r"model \S+: (\d+) parameters"), "torch": re.compile(r"^parameters: (\d+)")}


@dataclasses.dataclass
class Run:
    wall_s: float  # launch to exit of the launcher
    first_step_s: float  # launch to the first step's log line
    parameters: int
    rss_mib: float  # the largest rank's peak RSS


class Suite:
    def __init__(self, args):
        self.args = args
        self.build = Path(os.environ["MNDDP_BUILD_DIR"])
        self.root = Path(os.environ["MNDDP_ROOT"])
        self.venv = Path(os.environ["MNDDP_VENV"])
        self.work = Path(args.work)
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.runs = 0

    # ---- data ------------------------------------------------------------------------------------

    def make_data(self, name):
        out = self.work / "data" / name
        if not list(out.glob("train_*.h5")):
            subprocess.run([str(self.build / "mnddp-data"), "synth", "--out", str(out), "--val-samples", "0",
                            *DATASETS[name]], check=True, stdout=subprocess.DEVNULL)
        return str(out / "train_*.h5")

    # ---- one run of one side ---------------------------------------------------------------------

    def command(self, side, model, ranks, steps, log_interval, data):
        rss = str(self.root / "bench" / "peak_rss.sh")
        if side == "mnddp":
            return ["mpirun", "-np", str(ranks), "--oversubscribe", rss, str(self.build / "mnddp"), "train",
                    "--train-data", data, "--val-data", "", *model.shared, *model.mnddp_only,
                    "--batch-size", str(model.batch), "--threads", "1", "--device", self.args.device,
                    "--max-steps", str(steps), "--epochs", "1000000", "--log-interval", str(log_interval),
                    "--metrics-file", "", "--checkpoint-dir", "", "--seed", "42"]
        return [str(self.venv / "bin" / "torchrun"), "--standalone", "--nproc_per_node", str(ranks), "--no-python",
                rss, str(self.venv / "bin" / "python"), str(self.root / "bench" / "torch_peer.py"),
                "--data", data, *model.shared, "--batch-size", str(model.batch), "--threads", "1",
                "--device", self.args.device, "--steps", str(steps), "--log-interval", str(log_interval),
                "--workers", str(self.args.peer_workers), "--seed", "42"]

    def run(self, side, name, ranks, steps, log_interval, data):
        model = MODELS[name]
        cmd = self.command(side, model, ranks, steps, log_interval, data)
        self.runs += 1
        log_path = self.logs / f"{self.runs:03d}-{name}-{ranks}r-{side}-{steps}.log"
        with tempfile.TemporaryDirectory(dir=self.work) as rss_dir, open(log_path, "w") as log:
            env = dict(os.environ, COMPARE_RSS_DIR=rss_dir)
            log.write(shlex.join(cmd) + "\n")
            first_step, parameters = math.nan, None
            start = time.perf_counter()
            # Both launchers pass rank 0's lines straight on; each is stamped as it arrives.
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            for line in proc.stdout:
                if math.isnan(first_step) and STEP1.search(line):
                    first_step = time.perf_counter() - start
                if parameters is None and (m := PARAMS[side].search(line)):
                    parameters = int(m.group(1))
                log.write(line)
            code = proc.wait()
            wall = time.perf_counter() - start
            if code != 0:
                raise SystemExit(f"compare: {side} {name} on {ranks} ranks failed (exit {code}); see {log_path}")
            if parameters is None or (log_interval == 1 and math.isnan(first_step)):
                raise SystemExit(f"compare: {side} {name}: no parameter count or step-1 line in {log_path}")
            peaks = [int(p.read_text().split()[-1]) for p in Path(rss_dir).glob("rank.*")]
            if len(peaks) != ranks:
                raise SystemExit(f"compare: {side} {name}: {len(peaks)} of {ranks} ranks reported their peak RSS")
        return Run(wall, first_step, parameters, max(peaks) / 1024)

    # ---- one measurement: the short and the long run of one side ---------------------------------

    def measure(self, side, name, ranks, data):
        model = MODELS[name]
        short, long = step_counts(model, self.args)
        # The short run logs every step (its step-1 line times the first step); the long run logs only
        # its last step, so logging stays out of the difference on both sides.
        first = self.run(side, name, ranks, short, 1, data)
        last = self.run(side, name, ranks, long, long, data)
        elapsed = last.wall_s - first.wall_s
        rate = (long - short) * model.batch * ranks / elapsed if elapsed > 0 else math.nan
        return {"samples_per_s": rate, "first_step_s": first.first_step_s, "rss_mib": last.rss_mib,
                "parameters": last.parameters, "wall_short_s": first.wall_s, "wall_long_s": last.wall_s}

    def run_all(self):
        results = {name: {str(r): {side: [] for side in SIDES} for r in self.args.ranks} for name in self.args.models}
        datas = {name: self.make_data(MODELS[name].data) for name in self.args.models}
        for round_ in range(1, self.args.rounds + 1):
            # Alternate which side goes first, round by round.
            order = SIDES if round_ % 2 else SIDES[::-1]
            for name in self.args.models:
                for ranks in self.args.ranks:
                    cell = results[name][str(ranks)]
                    for side in order:
                        cell[side].append(self.measure(side, name, ranks, datas[name]))
                    m, t = (cell[s][-1] for s in SIDES)
                    if m["parameters"] != t["parameters"]:
                        raise SystemExit(f"compare: {name}: mnddp has {m['parameters']} parameters, "
                                         f"the peer {t['parameters']}: the models differ")
                    print(f"round {round_} {name:10s} {ranks} rank(s): mnddp {m['samples_per_s']:9.1f} samples/s, "
                          f"PyTorch {t['samples_per_s']:9.1f} samples/s, first step {m['first_step_s']:.2f}/"
                          f"{t['first_step_s']:.2f} s, peak RSS {m['rss_mib']:.0f}/{t['rss_mib']:.0f} MiB", flush=True)
        return results


def configs(args):
    """The models' settings, as the doc's first table shows them."""
    out = []
    for name in args.models:
        m = MODELS[name]
        optimizer = ("AdamW lr 3e-3, β2 0.95, weight decay 0.1 (none on norms and biases)" if "adamw" in m.shared
                     else "SGD lr 0.05, momentum 0.9")
        out.append({"label": m.label, "what": m.what, "batch": m.batch, "optimizer": optimizer,
                    "steps": step_counts(m, args)})
    return out


# ---- command line -----------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/compare.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds; each figure is their median (default 3)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma or space list (default {','.join(MODELS)})")
    p.add_argument("--ranks", default="1 2", help='rank counts, the first is the weak-scaling base (default "1 2")')
    p.add_argument("--quick", action="store_true",
                   help="a few steps per run: a smoke check, not a measurement (writes no doc unless --doc)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply each model's extra steps of the long run: more time, less noise (default 1)")
    p.add_argument("--no-doc", action="store_true", help="print only; leave docs/ alone")
    p.add_argument("--doc", help="the markdown file to write (default docs/BENCHMARKS.md)")
    p.add_argument("--plot", help="the PNG to write (default compare.png beside the doc)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="both sides' device (default cpu)")
    p.add_argument("--peer-workers", type=int, default=0,
                   help="the peer's DataLoader worker processes per rank (default 0: it reads in the rank)")
    p.add_argument("--work", help="keep the data, logs and results.json here (default: a temporary directory)")
    args = p.parse_args(argv)
    args.models = [m for m in re.split(r"[,\s]+", args.models.strip()) if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    args.ranks = [int(n) for n in re.split(r"[,\s]+", args.ranks.strip()) if n]
    if not args.ranks or min(args.ranks) < 1 or args.rounds < 1:
        p.error("--ranks needs positive rank counts and --rounds at least 1")
    args.command = shlex.join(["bench/compare.sh", *argv])
    return args


def main(argv):
    args = parse_args(argv)
    temporary = args.work is None
    if temporary:
        args.work = tempfile.mkdtemp(prefix="mnddp-compare.")
    try:
        args.machine, args.load = report.machine(), os.getloadavg()[0]
        suite = Suite(args)
        start = time.perf_counter()
        results = suite.run_all()
        rows = report.summarise(results, args.ranks, {name: MODELS[name].label for name in args.models})
        print(f"\nmedians of {args.rounds} round(s){' (--quick: not a measurement)' if args.quick else ''}, "
              f"{time.perf_counter() - start:.0f} s in all:")
        print(report.text_table(rows))
        (Path(args.work) / "results.json").write_text(json.dumps({"command": args.command, "results": results}))
        if args.quick and not args.doc and not args.no_doc:
            print("--quick: docs/BENCHMARKS.md left alone (name a file with --doc to write one)")
        elif not args.no_doc:
            doc = Path(args.doc) if args.doc else suite.root / "docs" / "BENCHMARKS.md"
            png = Path(args.plot) if args.plot else doc.parent / "compare.png"
            report.plot(rows, args.ranks, png)
            section = report.doc_section(args, configs(args), rows, os.path.relpath(png, doc.parent))
            report.write_doc(doc, section)
            print(f"wrote {doc} and {png}")
    except BaseException:
        if temporary:
            print(f"compare: the data and logs are kept in {args.work}", file=sys.stderr)
        raise
    if temporary:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The driver of bench/compare.sh: mnddp against PyTorch DDP (bench/torch_peer.py), the same models on the
same HDF5 files, 1 and 2 ranks, alternating, the median of several rounds. Prints the results, and
writes them into docs/BENCHMARKS.md (between the compare.sh markers) with a plot, docs/compare.png.

Run it through bench/compare.sh, which sets up the environment (MPI as root, one thread per rank).
"""
import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SIDES = ("mnddp", "torch")
SIDE_NAMES = {"mnddp": "mnddp", "torch": "PyTorch DDP"}
BEGIN = "<!-- compare.sh begin: written by bench/compare.sh, do not edit by hand -->"
END = "<!-- compare.sh end -->"

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


# ---- summary ----------------------------------------------------------------------------------------


def median(values):
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def summarise(results, ranks):
    rows = []
    for name, by_ranks in results.items():
        base = {s: median([r["samples_per_s"] for r in by_ranks[str(ranks[0])][s]]) for s in SIDES}
        for n in ranks:
            cell = by_ranks[str(n)]
            row = {"model": name, "ranks": n, "parameters": cell["mnddp"][0]["parameters"]}
            for s in SIDES:
                row[f"{s}_rate"] = median([r["samples_per_s"] for r in cell[s]])
                row[f"{s}_first"] = median([r["first_step_s"] for r in cell[s]])
                row[f"{s}_rss"] = median([r["rss_mib"] for r in cell[s]])
                # Weak scaling: per-rank samples/s at n ranks over that at the first rank count.
                row[f"{s}_weak"] = (row[f"{s}_rate"] / n) / (base[s] / ranks[0]) if n != ranks[0] else math.nan
            # The ratio is paired: each round's mnddp over the same round's peer, then the median.
            pairs = zip(cell["mnddp"], cell["torch"])
            row["ratio"] = median([m["samples_per_s"] / t["samples_per_s"] for m, t in pairs])
            row["rounds"] = {s: [r["samples_per_s"] for r in cell[s]] for s in SIDES}
            rows.append(row)
    return rows


def fmt(value, digits=0):
    return "n/a" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def rate_digits(value):
    return 1 if value < 100 else 0


def text_table(rows):
    out = [f"{'model':10s} {'ranks':>5s} {'params':>10s} {'mnddp/s':>10s} {'torch/s':>10s} {'ratio':>6s} "
           f"{'1st_m(s)':>8s} {'1st_t(s)':>8s} {'rss_m':>6s} {'rss_t':>6s} {'weak_m':>6s} {'weak_t':>6s}"]
    for r in rows:
        out.append(f"{r['model']:10s} {r['ranks']:5d} {r['parameters']:10d} {fmt(r['mnddp_rate'], 1):>10s} "
                   f"{fmt(r['torch_rate'], 1):>10s} {fmt(r['ratio'], 2):>6s} {fmt(r['mnddp_first'], 2):>8s} "
                   f"{fmt(r['torch_first'], 2):>8s} {fmt(r['mnddp_rss']):>6s} {fmt(r['torch_rss']):>6s} "
                   f"{fmt(r['mnddp_weak'], 2):>6s} {fmt(r['torch_weak'], 2):>6s}")
    return "\n".join(out)


# ---- the doc and the plot ---------------------------------------------------------------------------


def machine():
    cpu = "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    torch_version = subprocess.run([str(Path(os.environ["MNDDP_VENV"]) / "bin" / "python"), "-c",
                                    "import torch; print(torch.__version__)"], capture_output=True, text=True).stdout
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    build = Path(os.environ["MNDDP_BUILD_DIR"])
    version = subprocess.run([str(build / "mnddp"), "--version"], capture_output=True, text=True).stdout.strip()
    mnddp = f"{version} from {os.path.relpath(build, os.environ['MNDDP_ROOT'])}"
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {platform.system()} {platform.release()}; "
            f"{mnddp}; torch {torch_version.strip()}; {mpi[0] if mpi else 'MPI unknown'}")


def method(args):
    """How it was measured, as the doc's bullets."""
    backend = "NCCL" if args.device == "cuda" else "gloo"
    if args.peer_workers:
        loader = (f"{args.peer_workers} DataLoader worker process(es) per rank read the batches ahead "
                  "(`prefetch_factor` 4, as mnddp's `--prefetch-batches 4`).")
    else:
        loader = ("The rank reads each batch itself when it needs it (`num_workers=0`): with batches this small "
                  "(at most 0.3 ms of reading) a DataLoader worker costs more in inter-process transfer than it "
                  "hides (MLP-small took about twice as long per step with one), so the peer gets the faster "
                  "choice; mnddp reads on its prefetch thread.")
    return [
        "**The two sides.** mnddp: `mpirun -np N mnddp train` with `--threads 1`, reading the HDF5 shards as it "
        "trains (its loader thread reads `--prefetch-batches 4` ahead). The peer: `torchrun --nproc_per_node N "
        f"bench/torch_peer.py`, PyTorch DDP over {backend} (`gradient_as_bucket_view=True`, gradients zeroed in "
        "place, as mnddp's reducer keeps them), `torch.set_num_threads(1)`, reading the same files through h5py "
        "as it trains: a `BatchSampler` over a `DistributedSampler` hands a `DataLoader` one batch of indices at "
        "a time, and the rows are read one by one with HDF5's chunk cache off (labels once per file, as mnddp "
        f"does). {loader} Nothing is preloaded on either side. `OMP_NUM_THREADS=1` for both.",
        "**The same work.** The same architecture built layer for layer (the parameter counts are each side's "
        "own count, and the script stops if they differ), the same per-rank batch, optimizer and "
        "hyper-parameters, the same number of steps, one seed. Both read every step's loss (`.item()`) and "
        "average it over the ranks with one all-reduce at each log line. Neither validates or checkpoints.",
        "**Throughput** is measured the same way on both sides, from whole processes: each side runs S_short and "
        "S_long steps (the long run logs only its last step), and samples/s = (S_long − S_short) × N × batch / "
        "(wall_long − wall_short), wall = launch of `mpirun` or `torchrun` to its exit. Start-up, warm-up and "
        "shutdown cancel out.",
        "**Time to first step**: launch of `mpirun` or `torchrun` to the moment rank 0's `step 1/S` log line "
        "reaches the driver (in the S_short run, which logs every step on both sides). It includes the "
        "launcher, loading the libraries (LibTorch; or Python, torch and, for ResNet-18, torchvision), "
        "process-group set-up, opening the data, building the model, the initial weight broadcast and the first "
        "step with its all-reduce.",
        "**Peak RSS**: every rank runs under GNU `/usr/bin/time -f %M` (`bench/peak_rss.sh`); the table gives the "
        "largest rank's peak in the S_long run (with DataLoader workers, the larger of the rank's and its "
        "workers' peaks, not their sum: what the kernel reports for a process tree).",
        f"**Weak scaling**: per-rank samples/s at N ranks / samples/s at {args.ranks[0]} rank(s) (1.0 = perfect).",
        "**Rounds**: each round runs every model on each rank count on both sides, the side that starts "
        "alternating from round to round; each figure is the median of the rounds, and the ratio (mnddp / "
        "PyTorch samples/s) the median of the per-round ratios.",
    ]


def doc_section(args, rows, plot_name):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [BEGIN, "## Training against PyTorch DDP: `bench/compare.sh`", ""]
    if args.quick:
        lines += ["**`--quick`: a smoke check of a few steps per run; these figures are not measurements.**", ""]
    lines += [f"**Command:** `{args.command}`. **Date:** {when}. **Machine:** {args.machine}; device "
              f"{args.device}, one thread per rank; load average {args.load:.2f} when it started.", "",
              "| model | architecture | batch per rank | optimizer | steps (short, long) |", "|---|---|--:|---|--:|"]
    for name in args.models:
        m = MODELS[name]
        opt = ("AdamW lr 3e-3, β2 0.95, weight decay 0.1 (none on norms and biases)" if "adamw" in m.shared
               else "SGD lr 0.05, momentum 0.9")
        lines.append(f"| {m.label} | {m.what} | {m.batch} | {opt} | {', '.join(map(str, step_counts(m, args)))} |")
    lines += ["", "| model | parameters | ranks | mnddp samples/s | PyTorch samples/s | ratio | "
              "first step mnddp (s) | first step PyTorch (s) | peak RSS mnddp (MiB) | peak RSS PyTorch (MiB) | "
              "weak scaling mnddp | weak scaling PyTorch |",
              "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        base = r["ranks"] == args.ranks[0]  # no weak scaling to report
        lines.append(f"| {MODELS[r['model']].label} | {r['parameters']:,} | {r['ranks']} | "
                     f"{fmt(r['mnddp_rate'], rate_digits(r['mnddp_rate']))} | "
                     f"{fmt(r['torch_rate'], rate_digits(r['torch_rate']))} | **{fmt(r['ratio'], 2)}** | "
                     f"{fmt(r['mnddp_first'], 2)} | {fmt(r['torch_first'], 2)} | {fmt(r['mnddp_rss'])} | "
                     f"{fmt(r['torch_rss'])} | {'–' if base else fmt(r['mnddp_weak'], 2)} | "
                     f"{'–' if base else fmt(r['torch_weak'], 2)} |")
    lines += ["", f"![samples/s, ratio and weak scaling of mnddp and PyTorch DDP]({plot_name})", "",
              "How it was measured:", ""]
    lines += [textwrap.fill(item, width=100, initial_indent="- ", subsequent_indent="  ", break_long_words=False,
                            break_on_hyphens=False) for item in method(args)]
    lines += ["", "Samples/s of each round (mnddp / PyTorch):", "", "```"]
    for r in rows:
        pairs = "  ".join(f"{m:.1f}/{t:.1f}" for m, t in zip(r["rounds"]["mnddp"], r["rounds"]["torch"]))
        lines.append(f"{r['model']:10s} {r['ranks']} rank(s): {pairs}")
    lines += ["```", END]
    return "\n".join(lines) + "\n"


def write_doc(path, section):
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def plot(rows, ranks, path):
    import matplotlib

    matplotlib.use("Agg")  # no display
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["ranks"]): r for r in rows}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / (2 * len(ranks))
    colours = {"mnddp": ("#1f77b4", "#aec7e8"), "torch": ("#d62728", "#ff9896")}
    for i, n in enumerate(ranks):
        for j, side in enumerate(SIDES):
            offset = (2 * i + j - len(ranks) + 0.5) * width
            values = [by[(m, n)][f"{side}_rate"] for m in models]
            axes[0].bar([k + offset for k in range(len(models))], values, width, color=colours[side][i % 2],
                        label=f"{SIDE_NAMES[side]}, {n} rank{'s' if n > 1 else ''}")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("samples/s (log scale)")
    axes[0].set_title("Throughput")
    axes[0].legend(fontsize=8)
    rw = 0.8 / len(ranks)
    for i, n in enumerate(ranks):
        axes[1].bar([k + (i - (len(ranks) - 1) / 2) * rw for k in range(len(models))],
                    [by[(m, n)]["ratio"] for m in models], rw, label=f"{n} rank{'s' if n > 1 else ''}")
    axes[1].axhline(1.0, color="black", linewidth=0.8)
    axes[1].set_ylabel("mnddp / PyTorch samples/s")
    axes[1].set_title("Ratio (above 1: mnddp faster)")
    axes[1].legend(fontsize=8)
    multi = [n for n in ranks if n != ranks[0]]
    ww = 0.8 / max(1, 2 * len(multi))
    for i, n in enumerate(multi):
        for j, side in enumerate(SIDES):
            offset = (2 * i + j - len(multi) + 0.5) * ww
            axes[2].bar([k + offset for k in range(len(models))], [by[(m, n)][f"{side}_weak"] for m in models], ww,
                        color=colours[side][i % 2], label=f"{SIDE_NAMES[side]}, {n} ranks")
    axes[2].axhline(1.0, color="black", linewidth=0.8)
    axes[2].set_ylabel(f"per-rank samples/s vs {ranks[0]} rank")
    axes[2].set_title("Weak scaling (1 = perfect)")
    if multi:
        axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([MODELS[m].label for m in models], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---- command line -----------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/compare.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds; each figure is their median (default 3)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma or space list (default {','.join(MODELS)})")
    p.add_argument("--ranks", default="1 2", help='rank counts, the first is the weak-scaling base (default "1 2")')
    p.add_argument("--quick", action="store_true", help="a few steps per run: a smoke check, not a measurement (writes no doc unless --doc)")
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
        args.machine, args.load = machine(), os.getloadavg()[0]
        suite = Suite(args)
        start = time.perf_counter()
        results = suite.run_all()
        rows = summarise(results, args.ranks)
        print(f"\nmedians of {args.rounds} round(s){' (--quick: not a measurement)' if args.quick else ''}, "
              f"{time.perf_counter() - start:.0f} s in all:")
        print(text_table(rows))
        (Path(args.work) / "results.json").write_text(json.dumps({"command": args.command, "results": results}))
        if args.quick and not args.doc and not args.no_doc:
            print("--quick: docs/BENCHMARKS.md left alone (name a file with --doc to write one)")
        elif not args.no_doc:
            doc = Path(args.doc) if args.doc else suite.root / "docs" / "BENCHMARKS.md"
            png = Path(args.plot) if args.plot else doc.parent / "compare.png"
            plot(rows, args.ranks, png)
            write_doc(doc, doc_section(args, rows, os.path.relpath(png, doc.parent)))
            print(f"wrote {doc} and {png}")
    except BaseException:
        if temporary:
            print(f"compare: the data and logs are kept in {args.work}", file=sys.stderr)
        raise
    if temporary:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The report of bench/compare.sh: medians, the paired ratio and weak scaling of the rounds, a text
table, the docs/BENCHMARKS.md section (between its markers) and the plot. bench/compare.py calls it.
"""
import datetime
import math
import os
import platform
import statistics
import subprocess
import textwrap
from pathlib import Path

SIDES = ("mnddp", "torch")
SIDE_NAMES = {"mnddp": "mnddp", "torch": "PyTorch DDP"}
BEGIN = "<!-- compare.sh begin: written by bench/compare.sh, do not edit by hand -->"
END = "<!-- compare.sh end -->"


# ---- summary ----------------------------------------------------------------------------------------


def median(values):
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def summarise(results, ranks, labels):
    """One row per model and rank count: the medians, the paired ratio and weak scaling."""
    rows = []
    for name, by_ranks in results.items():
        base = {s: median([r["samples_per_s"] for r in by_ranks[str(ranks[0])][s]]) for s in SIDES}
        for n in ranks:
            cell = by_ranks[str(n)]
            row = {"model": name, "label": labels[name], "ranks": n, "parameters": cell["mnddp"][0]["parameters"]}
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


def doc_section(args, configs, rows, plot_name):
    """The doc's section, markers included. configs: one dict per model (label, what, batch, optimizer,
    steps)."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [BEGIN, "## Training against PyTorch DDP: `bench/compare.sh`", ""]
    if args.quick:
        lines += ["**`--quick`: a smoke check of a few steps per run; these figures are not measurements.**", ""]
    lines += [f"**Command:** `{args.command}`. **Date:** {when}. **Machine:** {args.machine}; device "
              f"{args.device}, one thread per rank; load average {args.load:.2f} when it started.", "",
              "| model | architecture | batch per rank | optimizer | steps (short, long) |", "|---|---|--:|---|--:|"]
    for c in configs:
        lines.append(f"| {c['label']} | {c['what']} | {c['batch']} | {c['optimizer']} | {c['steps'][0]}, "
                     f"{c['steps'][1]} |")
    lines += ["", "| model | parameters | ranks | mnddp samples/s | PyTorch samples/s | ratio | "
              "first step mnddp (s) | first step PyTorch (s) | peak RSS mnddp (MiB) | peak RSS PyTorch (MiB) | "
              "weak scaling mnddp | weak scaling PyTorch |",
              "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        base = r["ranks"] == args.ranks[0]  # no weak scaling to report
        lines.append(f"| {r['label']} | {r['parameters']:,} | {r['ranks']} | "
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
    labels = {r["model"]: r["label"] for r in rows}
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
        ax.set_xticklabels([labels[m] for m in models], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)

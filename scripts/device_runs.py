"""The device check's multi-rank runs (scripts/device_check.sh), one subcommand per stage:

  identity     one libnccl.so.2 and one libcudart mapped in a running rank (/proc/PID/maps), the very
               files torch loads, and (on a GPU) "gradients over nccl" and cuda:N in the run's log;
  equivalence  2-rank training over NCCL against the same over MPI, step by step, under
               --deterministic: plain, --sync-batchnorm, --zero 1/2, --amp fp16 (the same skipped
               steps), --grad-accum-steps 2, --find-unused-parameters, --grad-compression bf16;
  failures     a stopped rank (SIGSTOP), a killed rank (SIGKILL) and --inject-fault stall: every live
               rank ends within --collective-timeout + 30 s, with no SIGSEGV and its incident record;
  plan         mnddp plan of ResNet-18 on the GPU, and a 1-rank training run with --plan: the predicted
               step and memory (the allocator's peak) within 20% of what the run measured.

Two ranks share the one GPU through tests/gpu/one_gpu_pair.sh (each rank its own NCCL_HOSTID).
Prints "ok NAME: detail" or "FAIL NAME: detail" per case and exits 1 when a case failed. --dry-run
runs the same plumbing on the CPU (MPI against MPI), which is what CI can check.

Usage: python3 scripts/device_runs.py STAGE --build DIR --work DIR [--dry-run]
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIR = str(ROOT / "tests" / "gpu" / "one_gpu_pair.sh")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
FAILED = []


def run_env(**extra):
    """The environment of mnddp's processes: the carried libraries first (device_check.sh sets
    MNDDP_RUN_LD_LIBRARY_PATH), which this python must not load itself."""
    env = dict(os.environ, **extra)
    if "MNDDP_RUN_LD_LIBRARY_PATH" in env:
        env["LD_LIBRARY_PATH"] = env["MNDDP_RUN_LD_LIBRARY_PATH"]
    return env


def report(ok, name, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        FAILED.append(name)


def mpiexec(ranks, *command):
    return [MPIEXEC, "-np", str(ranks), "--oversubscribe", "bash", PAIR, *command]


def stop(run, build, sweep=True):
    """Ends a launch and its ranks: mpiexec forwards SIGTERM to them (it puts each in a process group
    of its own, so killing its group would orphan them); with `sweep`, any rank of this build that
    survives is killed (a stopped one included)."""
    if run.poll() is None:
        run.terminate()
        try:
            run.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    if sweep:
        subprocess.run(["pkill", "-9", "-f", f"^{build / 'mnddp'} train"], check=False)


def synth(build, out, *options):
    if not glob.glob(str(out / "train_*.h5")):
        subprocess.run([str(build / "mnddp-data"), "synth", "--out", str(out), "--val-samples", "0", *options],
                       check=True, stdout=subprocess.DEVNULL, env=run_env())
    return str(out / "train_*.h5")


def train(build, data, device, *options):
    return [str(build / "mnddp"), "train", "--train-data", data, "--val-data", "", "--checkpoint-dir", "",
            "--device", device, *options]


# ---- identity -----------------------------------------------------------------------------------------


def mapped(pid, names):
    """{name: set of files} of the libraries whose file name starts with each name, mapped by `pid`."""
    found = {name: set() for name in names}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            for name in names:
                if os.path.basename(path).startswith(name):
                    found[name].add(os.path.realpath(path))
    return found


def torch_libraries():
    """The libnccl and libcudart torch maps once its CUDA half is loaded, and torch's NCCL version: in a
    process of its own, before the ranks start (beside two busy ranks the import crawls)."""
    probe = """
import json, os, torch
try:
    nccl = list(torch.cuda.nccl.version())
except Exception:  # a CPU-only torch
    nccl = None
files = {"libnccl.so": set(), "libcudart.so": set()}
for line in open(f"/proc/{os.getpid()}/maps"):
    path = line.split()[-1] if len(line.split()) >= 6 else ""
    for name in files:
        if os.path.basename(path).startswith(name):
            files[name].add(os.path.realpath(path))
print(json.dumps({"files": {k: sorted(v) for k, v in files.items()}, "nccl": nccl}))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: set(files) for name, files in found["files"].items()}, found["nccl"]


def identity(args):
    build, work = Path(args.build), Path(args.work)
    data = synth(build, work / "identity-data", "--train-samples", "4096", "--shape", "3,16,16", "--classes", "4")
    device = "cpu" if args.dry_run else "cuda"
    theirs, torch_nccl = torch_libraries()
    log = open(work / "identity.log", "w")
    run = subprocess.Popen(mpiexec(2, *train(build, data, device, "--model", "convnet", "--hidden", "16",
                                             "--batch-size", "32", "--max-steps", "100000", "--epochs", "1000000",
                                             "--log-interval", "5",
                                             "--backend", "auto", "--threads", "2")),
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=run_env())
    try:
        deadline = time.time() + 120
        text = ""
        while time.time() < deadline and "step 10/" not in text and run.poll() is None:
            time.sleep(0.5)
            text = (work / "identity.log").read_text(errors="replace")
        pids = subprocess.run(["pgrep", "-f", f"^{build / 'mnddp'} train"], capture_output=True,
                              text=True).stdout.split()
        report(len(pids) == 2, "two ranks running", f"pids {' '.join(pids) or 'none'} (log: {work / 'identity.log'})")
        ours = {name: set() for name in ("libnccl.so", "libcudart.so")}
        for pid in pids:
            for name, files in mapped(pid, list(ours)).items():
                ours[name] |= files
                report(len(files) == 1, f"rank pid {pid}: one {name}", ", ".join(sorted(files)) or "none")
        for name in ours:
            report(ours[name] == theirs[name] and len(ours[name]) == 1, f"{name} is torch's",
                   f"mnddp {sorted(ours[name])}, torch {sorted(theirs[name])}")
        if not args.dry_run:
            version = ".".join(map(str, torch_nccl or []))
            report(f"NCCL {version}" in text, "the NCCL version is torch's",
                   f"torch's {version}; mnddp's log: {[l for l in text.splitlines() if 'NCCL' in l][:1]}")
            report("gradients over nccl" in text, "backend nccl", "'gradients over nccl' in the run's log")
            report(" cuda:" in text, "device cuda:N", "'cuda:' in the run's log")
    finally:
        stop(run, build)


# ---- equivalence --------------------------------------------------------------------------------------

CONFIGS = {
    "plain": [],
    "sync-batchnorm": ["--sync-batchnorm"],
    "zero-1": ["--zero", "1"],
    "zero-2": ["--zero", "2"],
    "amp-fp16": ["--amp", "fp16"],
    "grad-accum-2": ["--grad-accum-steps", "2"],
    "find-unused": ["--find-unused-parameters"],
    "bf16-compression": ["--grad-compression", "bf16"],
}
# bf16 buckets: each backend rounds the sum of two bf16 values once; the order of the two is all
# that may differ, and a sum of two is commutative, so the bound is a margin, not an expectation.
BOUNDS = {"bf16-compression": 1e-3}


def steps_of(metrics):
    rows = [json.loads(line) for line in open(metrics) if '"kind":"train"' in line]
    return [(r["step"], r["loss"], r.get("loss_scale", 0.0)) for r in rows]


def equivalence(args):
    build, work = Path(args.build), Path(args.work)
    data = synth(build, work / "equivalence-data", "--train-samples", "2048", "--shape", "3,16,16", "--classes", "4")
    device = "cpu" if args.dry_run else "cuda"
    backends = ("mpi", "mpi") if args.dry_run else ("nccl", "mpi")
    configs = dict(list(CONFIGS.items())[:1]) if args.dry_run else CONFIGS
    base = ["--model", "convnet", "--hidden", "16", "--layers", "2", "--batch-size", "32", "--max-steps", "12",
            "--log-interval", "1", "--deterministic", "--check-replicas-every", "1", "--seed", "7", "--lr", "0.05",
            "--momentum", "0.9", "--threads", "2", "--bucket-cap-mb", "0.05"]
    pending = list(configs.items())
    while pending:
        wave, pending = pending[:args.parallel], pending[args.parallel:]
        runs = []
        for name, options in wave:
            for backend in backends:
                tag = f"{name}-{backend}-{len(runs)}"
                metrics = work / f"eq-{tag}.jsonl"
                metrics.unlink(missing_ok=True)
                log = open(work / f"eq-{tag}.log", "w")
                cmd = mpiexec(2, *train(build, data, device, *base, *options, "--backend", backend,
                                        "--metrics-file", str(metrics)))
                runs.append((name, backend, metrics,
                             subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=run_env())))
        for name, backend, metrics, run in runs:
            try:
                run.wait(timeout=240)
            except subprocess.TimeoutExpired:
                stop(run, build, sweep=False)
        for name, _ in wave:
            pair = [r for r in runs if r[0] == name]
            codes = [r[3].returncode for r in pair]
            if any(code != 0 for code in codes):
                report(False, f"equivalence {name}", f"exit codes {codes} (logs {work}/eq-{name}-*.log)")
                continue
            (_, b0, m0, _), (_, b1, m1, _) = pair
            a, b = steps_of(m0), steps_of(m1)
            bound = BOUNDS.get(name, 0.0)
            worst = max((abs(x[1] - y[1]) / max(abs(y[1]), 1e-12) for x, y in zip(a, b)), default=float("inf"))
            same_steps = [x[0] for x in a] == [y[0] for y in b] and len(a) == 12
            same_scale = [x[2] for x in a] == [y[2] for y in b]
            ok = same_steps and same_scale and (worst == 0.0 if bound == 0.0 else worst <= bound)
            report(ok, f"equivalence {name}",
                   f"{len(a)} steps, {b0} vs {b1}: largest relative loss difference {worst:.3g} "
                   f"(bound {bound:g}){'' if same_scale else '; the fp16 loss scales differ'}")


# ---- failures -----------------------------------------------------------------------------------------


def rank_pid(build, rank, case):
    """The pid of the mnddp process of MPI rank `rank` in the launch of failure case `case`, from its
    environment (the cases run at once)."""
    pids = subprocess.run(["pgrep", "-f", f"^{build / 'mnddp'} train"], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and f"MNDDP_CHECK_CASE={case}".encode() in env:
            return int(pid)
    return None


def failures(args):
    """The three cases run at once (their limits count from each fault), then are judged one by one."""
    build, work = Path(args.build), Path(args.work)
    data = synth(build, work / "failure-data", "--train-samples", "8192", "--shape", "3,16,16", "--classes", "4")
    device = "cpu" if args.dry_run else "cuda"
    timeout = 10
    limit = timeout + 30
    base = ["--model", "convnet", "--hidden", "16", "--batch-size", "32", "--max-steps", "100000",
            "--epochs", "1000000", "--log-interval", "5", "--threads", "2", "--collective-timeout", str(timeout),
            "--metrics-file", ""]
    cases = [("stopped rank (SIGSTOP)", "stopped", signal.SIGSTOP, []),
             ("killed rank (SIGKILL)", "killed", signal.SIGKILL, []),
             ("injected stall", "stall", None, ["--inject-fault", "stall@15"])]
    if args.dry_run:
        cases = cases[:1]
    runs = {}
    for name, tag, sig, extra in cases:
        incidents = work / f"incident-{tag}.jsonl"
        incidents.unlink(missing_ok=True)
        log_path = work / f"failure-{tag}.log"
        env = run_env(MNDDP_INCIDENT_FILE=str(incidents), MNDDP_CHECK_CASE=tag)
        cmd = [MPIEXEC, "--mca", "odls_base_sigkill_timeout", "5",
               *mpiexec(2, *train(build, data, device, *base, *extra))[1:]]
        run = subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env,
                               start_new_session=True)
        runs[tag] = {"run": run, "log": log_path, "incidents": incidents, "fault": time.time(), "sig": sig}
    # The signal cases: the fault once the run is training (step 10 logged).
    deadline = time.time() + 180
    pending = [tag for _, tag, sig, _ in cases if sig is not None]
    while pending and time.time() < deadline:
        for tag in list(pending):
            case = runs[tag]
            if "step 10/" in case["log"].read_text(errors="replace"):
                victim = rank_pid(build, 1, tag)
                if victim:
                    os.kill(victim, case["sig"])
                    case["fault"] = time.time()
                    pending.remove(tag)
        time.sleep(0.2)
    # When each run ends, watched together: a case's time counts from its own fault to its own end.
    while any(c["run"].poll() is None and time.time() < c["fault"] + limit + 15 for c in runs.values()):
        for case in runs.values():
            if "end" not in case and case["run"].poll() is not None:
                case["end"] = time.time()
        time.sleep(0.2)
    for name, tag, sig, _ in cases:
        case = runs[tag]
        run, log_path = case["run"], case["log"]
        if tag in pending:
            report(False, name, f"the run never reached step 10 (log {log_path})")
            continue
        if run.poll() is None:
            stop(run, build, sweep=False)
            report(False, name, f"still running {limit + 15} s after the fault (log {log_path})")
            continue
        rc = run.returncode
        elapsed = case.get("end", time.time()) - case["fault"]
        text = log_path.read_text(errors="replace")
        records = [json.loads(line) for line in open(case["incidents"])] if case["incidents"].exists() else []
        live = {0} if sig is not None else {0, 1}
        recorded = {r.get("rank") for r in records}
        crashed = "Segmentation fault" in text or "SIGSEGV" in text or rc in (139, -11)
        expect_4 = sig is not signal.SIGKILL  # a killed rank: mpirun ends the job with the rank's signal
        ok = elapsed <= limit and not crashed and live <= recorded and (rc == 4 or not expect_4)
        report(ok, name, f"rc {rc} within {elapsed:.0f} s of the fault (limit {limit}), records from ranks "
                         f"{sorted(recorded)}, {'SIGSEGV!' if crashed else 'no SIGSEGV'} (log {log_path})")
    for case in runs.values():
        stop(case["run"], build, sweep=False)
    subprocess.run(["pkill", "-9", "-f", f"^{build / 'mnddp'} train"], check=False)


# ---- plan ---------------------------------------------------------------------------------------------

def plan(args):
    """mnddp plan on the rank's device (on a GPU its memory is the allocator's peak), then a training run
    with --plan whose summary compares the prediction with the steps and the peak it measured."""
    build, work = Path(args.build), Path(args.work)
    device = "cpu" if args.dry_run else "cuda"
    data = synth(build, work / "data", "--train-samples", "8192", "--shards", "2", "--shape", "3,32,32")
    model = (["--model", "convnet", "--hidden", "16", "--batch-size", "32", "--threads", "1"] if args.dry_run
             else ["--model", "resnet18", "--batch-size", "128"])
    plan_json = work / "plan.json"
    command = [str(build / "mnddp"), "plan", "--train-data", data, "--val-data", "", "--device", device, *model,
               "--max-nodes", "16", "--json", str(plan_json)]
    out = subprocess.run(command, capture_output=True, text=True, env=run_env(), timeout=150)
    (work / "plan.log").write_text(out.stdout + out.stderr)
    advice = [line for line in out.stdout.splitlines() if line.startswith("advice: up to")]
    report(out.returncode == 0 and plan_json.exists(), "plan",
           advice[0] if advice and out.returncode == 0 else f"rc {out.returncode}: {out.stderr.strip()[-200:]}")
    if out.returncode != 0:
        return
    metrics = work / "metrics.jsonl"
    run = subprocess.run(train(build, data, device, *model, "--max-steps", "40", "--log-interval", "40", "--resume",
                               "none", "--plan", str(plan_json), "--metrics-file", str(metrics)),
                         capture_output=True, text=True, env=run_env(), timeout=300)
    (work / "train.log").write_text(run.stdout + run.stderr)
    summaries = [json.loads(line) for line in metrics.read_text().splitlines() if '"summary"' in line] \
        if metrics.exists() else []
    if run.returncode != 0 or not summaries or "plan" not in summaries[-1]:
        report(False, "plan against training", f"rc {run.returncode}, no summary with a plan record")
        return
    p = summaries[-1]["plan"]
    step = p["predicted_step_s"] / p["measured_step_s"] - 1
    memory = p["predicted_memory_bytes"] / p["peak_bytes"] - 1 if p["peak_bytes"] > 0 else float("nan")
    # On the device the plan must hold within 20%; the dry run checks the plumbing only.
    ok = args.dry_run or (abs(step) <= 0.2 and abs(memory) <= 0.2)
    report(ok, "plan against training (1 rank)",
           f"step predicted {p['predicted_step_s'] * 1e3:.2f} ms, measured {p['measured_step_s'] * 1e3:.2f} ms "
           f"({step:+.1%}); memory {p['predicted_memory_bytes'] / 2**20:.0f} MiB against a peak of "
           f"{p['peak_bytes'] / 2**20:.0f} MiB ({memory:+.1%})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["identity", "equivalence", "failures", "plan"])
    parser.add_argument("--build", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--dry-run", action="store_true", help="on the CPU: the plumbing, MPI against MPI")
    parser.add_argument("--parallel", type=int, default=2, help="configurations trained at once (equivalence)")
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    {"identity": identity, "equivalence": equivalence, "failures": failures, "plan": plan}[args.stage](args)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

"""Checks the --trace files of a run: valid JSON, every event kind, all-reduces overlapping backward.

usage: check_trace.py DIR RANKS [--merged FILE]
Prints one line per finding; exits 1 on the first failure.
"""
import json
import pathlib
import sys

STEP_PHASES = ["data wait", "forward", "backward", "exposed comm", "optimizer"]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def spans(events, predicate):
    return [e for e in events if e.get("ph") == "X" and predicate(e)]


def async_pairs(events):
    """{(pid, id, cat): (begin_event, end_ts)} of b/e pairs; ids are process-scoped (id2.local)."""
    def key_of(e):
        return e["pid"], e["id2"]["local"], e["cat"]
    begins = {key_of(e): e for e in events if e.get("ph") == "b"}
    if len(begins) != sum(1 for e in events if e.get("ph") == "b"):
        fail("two async spans of one rank share an id")
    pairs = {}
    for e in events:
        if e.get("ph") == "e":
            key = key_of(e)
            if key not in begins:
                fail(f"async end without a begin: {e}")
            pairs[key] = (begins[key], e["ts"])
    if len(pairs) != len(begins):
        fail(f"{len(begins) - len(pairs)} async spans never ended")
    return pairs


def check_rank(path, rank):
    trace = json.loads(path.read_text())  # valid JSON, or an exception
    events = trace["traceEvents"]
    if trace["otherData"]["rank"] != rank or any(e.get("pid") != rank for e in events):
        fail(f"{path}: events of another rank")
    names = {e["name"] for e in events if e.get("ph") == "X"}
    for phase in STEP_PHASES + ["validation (step", "checkpoint snapshot", "checkpoint commit", "step "]:
        if not any(n.startswith(phase) for n in names):
            fail(f"{path}: no '{phase}' span among {sorted(names)[:20]}")
    threads = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    for thread in ["training", "mpi-async channel", "checkpoint writer"]:
        if thread not in threads:
            fail(f"{path}: no '{thread}' track among {sorted(threads)}")
    if not any(e.get("ph") == "C" and e["name"] == "loss" for e in events):
        fail(f"{path}: no loss counter")
    # Every X span nests inside or lies apart from the spans of its thread (a well-formed track).
    for tid in {e["tid"] for e in events if e.get("ph") == "X"}:
        stack = []
        for e in sorted(spans(events, lambda e: e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1] - 0.002:
                stack.pop()
            end = e["ts"] + e["dur"]
            if stack and end > stack[-1] + 0.002:
                fail(f"{path}: span '{e['name']}' on thread {tid} overlaps its parent without nesting")
            stack.append(end)
    buckets = [(b, end) for (b, end) in async_pairs(events).values() if b["name"].startswith("gradient bucket")]
    if not buckets:
        fail(f"{path}: no gradient bucket all-reduce")
    backward = spans(events, lambda e: e["name"] == "backward")
    steps = spans(events, lambda e: e["name"].startswith("step "))
    overlapped = 0
    for bwd in backward:
        b0, b1 = bwd["ts"], bwd["ts"] + bwd["dur"]
        if any(b["ts"] < b1 and end > b0 and b["ts"] > b0 for b, end in buckets):
            overlapped += 1
    # Issued during backward in (nearly) every synchronised step: the overlap the reducer exists for.
    if overlapped < 0.9 * len(steps):
        fail(f"{path}: all-reduces issued inside backward in {overlapped} of {len(steps)} steps")
    running = [e for e in spans(events, lambda e: e["name"].endswith("(running)"))]
    if not running:
        fail(f"{path}: no all-reduce running on the channel thread")
    print(f"ok: {path.name}: {len(events)} events, {len(steps)} steps, {len(buckets)} bucket all-reduces, "
          f"issued inside backward in {overlapped} steps")
    return len(events)


def main():
    directory, ranks = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    total = sum(check_rank(directory / f"rank-{r:05d}.trace.json", r) for r in range(ranks))
    if "--merged" in sys.argv:
        merged = json.loads(pathlib.Path(sys.argv[sys.argv.index("--merged") + 1]).read_text())
        events = merged["traceEvents"]
        pids = {e["pid"] for e in events}
        if pids != set(range(ranks)) or len(events) != total:
            fail(f"merged: pids {sorted(pids)}, {len(events)} events (the ranks' files hold {total})")
        async_pairs(events)  # every rank's ids start at 1: they must stay apart (process-scoped)
        print(f"ok: merged: {len(events)} events, a track per rank {sorted(pids)}")


main()

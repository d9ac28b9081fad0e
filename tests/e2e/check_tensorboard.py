"""Reads a --tensorboard directory back with TensorBoard's own reader and checks it against the run's
metrics file: the tags, the steps, and the values (float32: TensorBoard's simple_value).

usage: check_tensorboard.py DIR METRICS_JSONL [--loss-scale]
"""
import json
import math
import pathlib
import sys

from tensorboard.backend.event_processing import event_accumulator


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def main():
    directory, metrics_path = sys.argv[1], pathlib.Path(sys.argv[2])
    files = list(pathlib.Path(directory).glob("events.out.tfevents.*"))
    if not files:
        fail(f"no event file in {directory}")
    records = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    acc = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    expected = {
        "train/loss": lambda r: r["loss"],
        "train/lr": lambda r: r["lr"],
        "train/samples_per_second": lambda r: r["samples_per_s"],
        "train/data_wait_fraction": lambda r: r["data_wait_s"] / r["step_time_s"],
        "train/exposed_comm_fraction": lambda r: r["exposed_comm_s"] / r["step_time_s"],
    }
    if "--loss-scale" in sys.argv:
        expected["train/loss_scale"] = lambda r: r["loss_scale"]
    metric_names = [k for k in evals[0] if k not in ("kind", "step", "epoch", "samples")] if evals else []
    for name in metric_names:
        expected[f"val/{name}"] = (lambda n: lambda r: r[n])(name)
    missing = set(expected) - tags
    if missing:
        fail(f"tags missing: {sorted(missing)} (found {sorted(tags)})")
    checked = 0
    for tag, value_of in expected.items():
        source = evals if tag.startswith("val/") else train
        scalars = acc.Scalars(tag)
        if [s.step for s in scalars] != [r["step"] for r in source]:
            fail(f"{tag}: steps {[s.step for s in scalars][:8]}... but the metrics file has "
                 f"{[r['step'] for r in source][:8]}...")
        for s, r in zip(scalars, source):
            want = value_of(r)
            if not math.isclose(s.value, want, rel_tol=1e-6, abs_tol=1e-30):
                fail(f"{tag} at step {s.step}: {s.value} in TensorBoard, {want} in the metrics file")
            checked += 1
    print(f"ok: {len(files)} event file(s), {len(expected)} tags, {checked} values equal to the metrics file's")


main()

"""Harness overhead: distbench's ``single`` against a plain Keras ``model.fit`` script
doing the same training, measured in the same run.

What is compared (both in fresh processes, process start-up excluded from both):

- **distbench**: ``distbench run CONFIG --strategies single`` (one repeat per round, the
  rounds appended to one run directory with ``--resume``); the figure is the record's
  ``timings.train_s`` (first training step to the end of the last epoch, the per-epoch
  weight snapshots' copy time excluded) plus ``details.trace_s`` (the epoch graph's
  tracing, which distbench does before its clock starts and ``model.fit`` inside it).
  It trains under ``tf.distribute.OneDeviceStrategy`` with distbench's shared custom
  loop (``strategy.run`` + ``strategy.reduce`` in a ``tf.function``).
- **plain**: this file with ``--plain-worker``: TensorFlow/Keras only, no distbench
  import; it builds the same Sequential MLP by hand, loads the *same* initial weights,
  compiles with the same SGD (learning rate, momentum), loss (sparse categorical
  cross-entropy on logits, mean over the batch), no metrics, ``jit_compile=False``
  (distbench's loop is not XLA-compiled either), and calls ``model.fit`` on a
  ``tf.data`` pipeline holding exactly distbench's batches (the training split of the
  run's saved workload, each epoch's seeded permutation, ``n_train // batch`` steps
  per epoch, ``prefetch(2)``) with ``verbose=0``. The figure is the wall time of the
  ``model.fit`` call (its tracing included). Intra-op threads are set to the value the
  distbench record reports, so neither side gets more cores.

Both sides start from identical weights and see identical batches, so their final
weights should agree to float32 rounding; the table reports the largest difference as
the like-for-like check. Rounds alternate the order (distbench first, then plain first)
so a drift in the machine's load does not favour one side; round 0 is a warm-up and is
not reported. Ratio = median distbench ``train_s + trace_s`` / median plain ``fit`` seconds;
the bracket is the range of the per-round ratios. Goal (issue 8): <= 1.05.

Usage::

    python benchmarks/harness_overhead.py [--quick] [--reps N] [--epochs N] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SECTION = "harness_overhead"
GOAL = 1.05


# ------------------------------------------------------------------ plain worker
def plain_worker(data: str, out: str, spawn_unix: float) -> int:
    """The plain ``model.fit`` side (TensorFlow/Keras only); writes its timings to ``out``.

    Args:
        data: ``.npz`` written by :func:`export_plain_inputs` (batches, weights, settings).
        out: JSON output path: ``fit_s`` (seconds of ``model.fit``), ``startup_s``
            (process spawn to the call), and ``final_weights`` saved next to it.
        spawn_unix: Unix time the parent spawned this process.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    z = np.load(data, allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    import tensorflow as tf

    if meta["intra_op_threads"]:
        tf.config.threading.set_intra_op_parallelism_threads(int(meta["intra_op_threads"]))
    import keras

    layers = [keras.Input(shape=tuple(meta["input_shape"])), keras.layers.Flatten()]
    layers += [keras.layers.Dense(u, activation=meta["activation"]) for u in meta["hidden"]]
    layers.append(keras.layers.Dense(meta["num_classes"]))
    model = keras.Sequential(layers)
    model.set_weights([z[f"w{i}"] for i in range(meta["num_weights"])])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=meta["learning_rate"], momentum=meta["momentum"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    G, steps, epochs = meta["batch"], meta["steps_per_epoch"], meta["epochs"]
    idx = z["order"]  # every epoch's batches, concatenated
    ds = (tf.data.Dataset.from_tensor_slices((z["x_train"][idx], z["y_train"][idx]))
          .batch(G, drop_remainder=True).prefetch(2))
    start_unix = time.time()
    t0 = time.perf_counter()
    model.fit(ds, epochs=epochs, steps_per_epoch=steps, verbose=0, shuffle=False)
    fit_s = time.perf_counter() - t0
    np.savez(Path(out).with_suffix(".npz"), *[np.asarray(w) for w in model.get_weights()])
    Path(out).write_text(json.dumps({"fit_s": fit_s, "startup_s": start_unix - spawn_unix}))
    return 0


def export_plain_inputs(run_dir: Path, path: Path, intra_op: int) -> dict:
    """Save what the plain script needs from distbench's run directory: the training
    split, the initial weights, every epoch's batch order and the hyper-parameters.

    Returns the hyper-parameters written (also stored in the file as ``meta``).
    """
    import numpy as np

    from distbench.training.schedule import epoch_order
    from distbench.workload import Workload

    wl = Workload.load(run_dir)
    t, m = wl.config.training, wl.config.model
    n = len(wl.dataset.y_train)
    order = np.concatenate([epoch_order(n, t.global_batch_size, e, t.seed) for e in range(t.epochs)])
    meta = {"input_shape": list(wl.dataset.input_shape), "num_classes": wl.dataset.num_classes,
            "hidden": list(m.hidden), "activation": m.activation, "learning_rate": wl.learning_rate(1),
            "momentum": t.momentum, "batch": t.global_batch_size, "steps_per_epoch": wl.steps_per_epoch(),
            "epochs": t.epochs, "intra_op_threads": intra_op, "num_weights": len(wl.initial_weights)}
    if m.name != "mlp" or t.optimizer != "sgd" or m.dropout:
        raise SystemExit("harness_overhead compares the mlp model with SGD and no dropout only")
    np.savez(path, x_train=wl.dataset.x_train, y_train=wl.dataset.y_train, order=order,
             meta=np.array(json.dumps(meta)), **{f"w{i}": w for i, w in enumerate(wl.initial_weights)})
    return meta


def run_plain(data: Path, out: Path) -> dict:
    """Run the plain worker in a fresh process; return its JSON.

    Raises:
        RuntimeError: the worker failed (its output tail in the message).
    """
    spawn = time.time()
    cp = subprocess.run([sys.executable, __file__, "--plain-worker", "--data", str(data), "--out", str(out),
                         "--spawn-unix", repr(spawn)], capture_output=True, text=True, env=C.child_env(),
                        timeout=1800)
    if cp.returncode != 0:
        raise RuntimeError(f"plain worker failed ({cp.returncode}):\n{(cp.stdout + cp.stderr)[-3000:]}")
    res = json.loads(out.read_text())
    res["wall_s"] = time.time() - spawn
    return res


# ------------------------------------------------------------------------- main
CONFIG = C.DIGITS_MLP_TOML.replace("{strategies}", '["single"]').replace("{workers}", "1")


def dist_s(rec: dict) -> float:
    """distbench's side of the comparison: ``train_s`` plus the tracing done before the clock (s)."""
    return rec["timings"]["train_s"] + float(rec["details"].get("trace_s") or 0.0)


def measure(epochs: int, batch: int, rounds: int, tmp: Path, log: Path) -> list[dict]:
    """Run ``rounds`` alternating rounds of distbench ``single`` and the plain script.

    Returns one dict per round: ``distbench`` (the record), ``plain`` (the worker's JSON),
    ``max_abs_weight_diff`` (final weights, distbench vs plain).
    """
    import numpy as np

    cfg = tmp / "overhead.toml"
    cfg.write_text(CONFIG.format(epochs=epochs, batch=batch))
    run_dir = tmp / "run"
    data = tmp / "plain_inputs.npz"
    out: list[dict] = []
    for k in range(rounds):
        def dist() -> dict:
            args = ["run", str(cfg), "--out", str(run_dir), "--repeats", str(k + 1)]
            C.run_distbench(args + (["--resume"] if run_dir.exists() else []), log)
            return next(r for r in C.read_records(run_dir) if r["repeat"] == k)

        def plain() -> dict:
            return run_plain(data, tmp / f"plain_{k}.json")

        if k % 2 == 0:  # distbench first (round 0 must: it creates the workload)
            rec = dist()
            if not data.exists():
                export_plain_inputs(run_dir, data, int(rec["details"].get("intra_op_threads") or 0))
            pl = plain()
        else:
            pl = plain()
            rec = dist()
        if rec["status"] != "ok":
            raise RuntimeError(f"distbench single failed: {rec.get('reason')}\n{rec.get('log_tail', '')}")
        with np.load(run_dir / "artifacts" / f"single_w1_r{k}" / "final_weights.npz") as a, \
                np.load(tmp / f"plain_{k}.npz") as b:
            diff = max(float(np.max(np.abs(a[f"w{i}"] - b[f"arr_{i}"]))) for i in range(len(a.files)))
        out.append({"distbench": rec, "plain": pl, "max_abs_weight_diff": diff})
        print(f"round {k}: distbench train_s + trace_s {dist_s(rec):.3f}, plain fit_s {pl['fit_s']:.3f}, "
              f"max |dw| {diff:.2e}", file=sys.stderr, flush=True)
    return out


def render(rounds: list[dict], warmup: int, epochs: int, batch: int, cmd: str, took: float, load0: str) -> str:
    """The Markdown section for the measured rounds (warm-up rounds dropped)."""
    used = rounds[warmup:] or rounds
    d = [dist_s(r["distbench"]) for r in used]
    p = [r["plain"]["fit_s"] for r in used]
    ds = [r["distbench"]["timings"]["startup_s"] for r in used]
    ps = [r["plain"]["startup_s"] for r in used]
    ratio, ratio_txt = C.ratio_spread(d, p)
    rec = used[0]["distbench"]
    steps = rec["steps"]
    verdict = "meets" if ratio is not None and ratio <= GOAL else "misses"
    diff = max(r["max_abs_weight_diff"] for r in used)
    acc = C.spread([r["distbench"]["final_test_accuracy"] for r in used], "{:.3f}")
    return "\n".join([
        "## Harness overhead (`benchmarks/harness_overhead.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {C.machine_info()}",
        f"- command: `{cmd}`",
        f"- workload: digits ({rec['workload']['sizes']['train']:,} training samples), mlp [64] "
        f"({rec['workload']['num_parameters']:,} parameters), SGD lr {rec['learning_rate']:g} (project defaults), "
        f"global batch {batch}, "
        f"{epochs} epochs = {steps} optimizer steps, intra-op threads "
        f"{rec['details'].get('intra_op_threads')} on both sides; test accuracy of distbench's runs {acc}.",
        f"- {len(used)} timed rounds after {warmup} warm-up round(s); rounds alternate which side runs first; "
        f"every run is a fresh process; cells are median [min-max]; load average at start {load0}; "
        f"the benchmark took {took:.0f} s.",
        "- timed: distbench = record `timings.train_s` (first step to the end of training; per-epoch "
        "snapshot copies excluded) + `details.trace_s` (the epoch graph's tracing, done before the "
        "clock), the `single` strategy's custom loop under "
        "OneDeviceStrategy; plain = wall time of one `model.fit(...)` call (tracing included) on the same "
        "batches from the same initial weights. Start-up (process spawn to first step / to `fit`) is "
        "excluded from both and shown for information.",
        f"- like-for-like check: largest |final weight difference| between the two sides over all rounds "
        f"= {diff:.1e} (same batches, same initial weights, same optimizer).", "",
        "| side | training s | start-up s (info) |", "|---|---|---|",
        f"| distbench `single` (`train_s + trace_s`) | {C.spread(d, '{:.3f}')} | {C.spread(ds, '{:.1f}')} |",
        f"| plain Keras `model.fit` | {C.spread(p, '{:.3f}')} | {C.spread(ps, '{:.1f}')} |", "",
        f"**Ratio distbench / plain training time: {ratio_txt}** (goal <= {GOAL}: {verdict} it).", ""])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its Markdown section, optionally write it into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 epochs, one round, no warm-up")
    ap.add_argument("--reps", type=int, default=5, help="timed rounds (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed warm-up rounds")
    ap.add_argument("--epochs", type=int, default=30, help="training epochs per run")
    ap.add_argument("--batch-size", type=int, default=64, help="global batch size")
    ap.add_argument("--write", metavar="PATH", help="replace the harness_overhead section of PATH")
    ap.add_argument("--keep", metavar="DIR", help="keep the run directory and logs in DIR")
    ap.add_argument("--plain-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--spawn-unix", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.plain_worker:
        return plain_worker(args.data, args.out, args.spawn_unix or time.time())
    reps, warmup, epochs = args.reps, args.warmup, args.epochs
    if args.quick:
        reps, warmup, epochs = 1, 0, 2
    if reps < 1 or warmup < 0 or epochs < 1:
        ap.error("--reps >= 1, --warmup >= 0, --epochs >= 1")
    started, load0 = time.time(), C.load_average()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="distbench-overhead-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        rounds = measure(epochs, args.batch_size, warmup + reps, tmp, tmp / "distbench.log")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    md = render(rounds, warmup, epochs, args.batch_size, C.command_line("harness_overhead.py", argv),
                time.time() - started, load0)
    print(md)
    if args.write:
        C.write_section(args.write, SECTION, md)
        print(f"wrote section {SECTION} to {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

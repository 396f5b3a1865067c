"""Parameter servers on Spark: distbench's ``spark_ps:downpour`` and ``spark_ps:adag``
against elephas, the maintained Spark + Keras peer, on the same workload in the same run.

elephas (PyPI ``elephas==7.3.0``) pins TensorFlow 2.19.1, numpy 1.26 and pyspark 4.0.0,
so it lives in its own virtual environment (default ``benchmarks/.elephas-venv``,
created on first use unless ``--quick``; ``DISTBENCH_ELEPHAS_VENV`` or ``--elephas-venv``
point elsewhere). This script exports distbench's workload (the digits split, the mlp
spec, the initial weights) to an ``.npz`` that the elephas side reads, so both start from
the same weights and are scored on the same test split.

Configurations (2 workers, Spark ``local[2]``, same epochs, same per-worker batch =
global batch / 2, SGD with the same learning rate and momentum, 1 intra-op TensorFlow
thread per worker on both sides):

- distbench ``spark_ps:downpour`` (window 5) and ``spark_ps:adag`` (window 12), each a
  ``distbench run`` configuration in a fresh process;
- elephas ``SparkModel`` (synchronous: one Spark job per epoch, each worker fits one
  epoch on its partition, the driver averages the deltas) and
  ``AsynchronousSparkModel(mode="asynchronous", parameter_server_mode="socket")``
  (a socket parameter server on the driver; every worker pulls, fits one epoch, pushes
  its delta: elephas' default ``frequency="epoch"``), each in a fresh process.

Timed: distbench = record ``timings.train_s`` (first replica's first step to the last
replica's last exchange; Spark session start, executors' TensorFlow import and model
building are outside it). elephas = wall time of ``SparkModel.fit`` after a warm-up
Spark job that imports TensorFlow in both Python workers (reused by the fit), so the
executors' one-off import is outside it too; elephas' per-epoch job scheduling, model
rebuild and re-tracing are inside it (that is how elephas trains). End-to-end (process
spawn to the end of training) is shown for both. Test accuracy: distbench's
``final_test_accuracy``; elephas' final master weights evaluated in Keras on the same
test split (off the clock).

Weight-exchange throughput (MB/s = 10^6 bytes/s) = bytes exchanged / training seconds.
distbench: the server's counted ``details.bytes_received + bytes_sent``. elephas does not
count bytes, so it is **estimated** as weight transfers x model bytes (float32 weights;
its socket format adds a few bytes of header per tensor): synchronous = per epoch one
broadcast to each worker + one delta from each (2 N E transfers); asynchronous = the
initial broadcast (N) + per worker and epoch one pull and one push (2 N E) + the
driver's final pull (1).

Rounds alternate the order of the four configurations; round 0 is a warm-up and is
dropped; cells are median [min-max] over the timed rounds and ratios are
distbench / elephas of the medians (time: below 1 = distbench faster).

Usage::

    python benchmarks/elephas_peer.py [--quick] [--reps N] [--epochs N] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SECTION = "elephas_peer"
ELEPHAS_PIN = ["elephas==7.3.0", "scikit-learn"]
DEFAULT_VENV = C.ROOT / "benchmarks" / ".elephas-venv"
WORKERS = 2


# --------------------------------------------------------------- elephas side
def elephas_worker(data: str, out: str, mode: str, spawn_unix: float) -> int:
    """Train with elephas in this (elephas-venv) process; write timings and accuracy to ``out``.

    Args:
        data: ``.npz`` from :func:`export_workload`.
        out: JSON output path.
        mode: ``sync`` (``SparkModel``) or ``async`` (``AsynchronousSparkModel``, socket server).
        spawn_unix: Unix time the parent spawned this process (for the end-to-end time).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["TF_NUM_INTRAOP_THREADS"] = "1"  # inherited by Spark's Python workers
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # elephas' socket server and clients: loopback only
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import numpy as np

    z = np.load(data, allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    import keras
    from pyspark.sql import SparkSession

    t = time.perf_counter()
    spark = (SparkSession.builder.master(f"local[{meta['workers']}]").appName("elephas-peer")
             .config("spark.ui.enabled", "false")
             .config("spark.executorEnv.TF_NUM_INTRAOP_THREADS", "1")
             .config("spark.executorEnv.TF_CPP_MIN_LOG_LEVEL", "2").getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    session_s = time.perf_counter() - t

    def _import_tf(_: object) -> list[int]:
        import os as _os

        import tensorflow  # noqa: F401
        return [_os.getpid()]

    t = time.perf_counter()
    warm_pids = sc.parallelize(range(meta["workers"]), meta["workers"]).mapPartitions(_import_tf).collect()
    warmup_s = time.perf_counter() - t

    from elephas.spark_model import AsynchronousSparkModel, SparkModel
    from elephas.utils.rdd_utils import to_simple_rdd

    def build() -> object:
        layers = [keras.Input(shape=tuple(meta["input_shape"])), keras.layers.Flatten()]
        layers += [keras.layers.Dense(u, activation=meta["activation"]) for u in meta["hidden"]]
        layers.append(keras.layers.Dense(meta["num_classes"]))
        m = keras.Sequential(layers)
        m.set_weights([z[f"w{i}"] for i in range(meta["num_weights"])])
        m.compile(optimizer=keras.optimizers.SGD(learning_rate=meta["learning_rate"], momentum=meta["momentum"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return m

    model = build()
    rdd = to_simple_rdd(sc, z["x_train"], z["y_train"])
    b, E, N = meta["per_worker_batch"], meta["epochs"], meta["workers"]
    if mode == "sync":
        sm = SparkModel(model, num_workers=N, batch_size=b)
        transfers = 2 * N * E
    else:
        with socket.socket() as s:  # a free loopback port for elephas' socket server
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        sm = AsynchronousSparkModel(model, num_workers=N, batch_size=b, mode="asynchronous",
                                    parameter_server_mode="socket", port=port)
        transfers = N + 2 * N * E + 1
    end_unix = None
    t = time.perf_counter()
    sm.fit(rdd, epochs=E, batch_size=b, verbose=0)
    fit_s = time.perf_counter() - t
    end_unix = time.time()
    final = sm.master_network.get_weights()
    ev = build()
    ev.set_weights(final)
    loss, acc = ev.evaluate(z["x_test"], z["y_test"], batch_size=256, verbose=0)
    spark.stop()
    model_bytes = int(sum(np.asarray(w).nbytes for w in final))
    Path(out).write_text(json.dumps({
        "mode": mode, "fit_s": fit_s, "session_s": session_s, "warmup_s": warmup_s,
        "end_to_end_s": end_unix - spawn_unix, "test_accuracy": float(acc), "test_loss": float(loss),
        "transfers": transfers, "model_bytes": model_bytes, "bytes_estimated": transfers * model_bytes,
        "warm_python_workers": sorted(set(warm_pids)),
        "versions": {"elephas": C.version("elephas"), "tensorflow": C.version("tensorflow"),
                     "keras": C.version("keras"), "pyspark": C.version("pyspark"), "numpy": np.__version__}}))
    return 0


def venv_python(venv: Path) -> Path:
    """The interpreter of virtual environment ``venv``."""
    return venv / "bin" / "python"


def setup_venv(venv: Path, log: Path) -> tuple[bool, str]:
    """Create ``venv`` and ``pip install elephas==7.3.0 scikit-learn`` into it.

    Returns:
        ``(ok, what_failed)``: on failure the command and the last lines of its output.
    """
    cmds = [[sys.executable, "-m", "venv", str(venv)],
            [str(venv_python(venv)), "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [str(venv_python(venv)), "-m", "pip", "install", "-q", *ELEPHAS_PIN]]
    for cmd in cmds:
        with open(log, "a") as f:
            cp = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=3600)
        if cp.returncode != 0:
            tail = "\n".join(log.read_text().splitlines()[-15:])
            return False, f"`{' '.join(cmd)}` exited with {cp.returncode}:\n{tail}"
    return True, ""


def run_elephas(venv: Path, data: Path, out: Path, mode: str) -> dict:
    """Run :func:`elephas_worker` in a fresh process of the elephas venv; return its JSON.

    Raises:
        RuntimeError: the process failed; the message holds the command and output tail.
    """
    spawn = time.time()
    cmd = [str(venv_python(venv)), __file__, "--elephas-worker", "--data", str(data), "--out", str(out),
           "--mode", mode, "--spawn-unix", repr(spawn)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    cp = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    (out.with_suffix(".log")).write_text(cp.stdout + cp.stderr)
    if cp.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {cp.returncode}:\n{(cp.stdout + cp.stderr)[-2500:]}")
    return json.loads(out.read_text())


# -------------------------------------------------------------- distbench side
CONFIG = C.DIGITS_MLP_TOML


def export_workload(run_dir: Path, path: Path) -> dict:
    """Write the run's training/test split, initial weights and settings to ``path`` (.npz)."""
    import numpy as np

    from distbench.workload import Workload

    wl = Workload.load(run_dir)
    t, m = wl.config.training, wl.config.model
    meta = {"input_shape": list(wl.dataset.input_shape), "num_classes": wl.dataset.num_classes,
            "hidden": list(m.hidden), "activation": m.activation, "learning_rate": wl.learning_rate(WORKERS),
            "momentum": t.momentum, "per_worker_batch": t.global_batch_size // WORKERS, "epochs": t.epochs,
            "workers": WORKERS, "num_weights": len(wl.initial_weights)}
    np.savez(path, x_train=wl.dataset.x_train, y_train=wl.dataset.y_train, x_test=wl.dataset.x_test,
             y_test=wl.dataset.y_test, meta=np.array(json.dumps(meta)),
             **{f"w{i}": w for i, w in enumerate(wl.initial_weights)})
    return meta


def dist_fields(rec: dict) -> dict:
    """Timing, accuracy and exchange figures of a distbench spark_ps record."""
    d = rec.get("details") or {}
    nbytes = (d.get("bytes_received") or 0) + (d.get("bytes_sent") or 0)
    train = rec["timings"]["train_s"]
    return {"train_s": train, "end_to_end_s": (rec["timings"]["startup_s"] or 0) + train,
            "acc": rec["final_test_accuracy"], "bytes": nbytes, "mbps": nbytes / train / 1e6,
            "exchanges": (d.get("commits") or 0) + (d.get("pulls") or 0), "window": d.get("communication_window")}


def eleph_fields(res: dict) -> dict:
    """The same figures for an elephas result (bytes estimated)."""
    return {"train_s": res["fit_s"], "end_to_end_s": res["end_to_end_s"], "acc": res["test_accuracy"],
            "bytes": res["bytes_estimated"], "mbps": res["bytes_estimated"] / res["fit_s"] / 1e6,
            "exchanges": res["transfers"], "window": None}


# ------------------------------------------------------------------------- main
def render(rows: dict[str, list[dict]], warmup: int, cmd: str, epochs: int, batch: int, took: float, load0: str,
           problems: list[str], versions: dict, workload: dict) -> str:
    """The Markdown section from per-configuration lists of per-round figures
    (``workload``: a distbench record's ``workload`` field, for sizes)."""
    sizes, n_params = workload.get("sizes", {}), int(workload.get("num_parameters", 0))
    opt_text = (f"SGD lr {workload['learning_rate']:g} momentum {workload['momentum']:g} (distbench's defaults)"
                if "learning_rate" in workload else "SGD (distbench's defaults)")
    names = {"downpour": "distbench `spark_ps:downpour`", "adag": "distbench `spark_ps:adag`",
             "sync": "elephas `SparkModel` (sync)", "async": "elephas `AsynchronousSparkModel` (async, socket)"}
    used = {k: (v[warmup:] or v) for k, v in rows.items() if v}
    n_used = max((len(v) for v in used.values()), default=0)
    table = ["| configuration | train s | end-to-end s | test accuracy | exchanges | MB exchanged | MB/s |",
             "|---|---|---|---|---|---|---|"]
    for k in ("downpour", "adag", "sync", "async"):
        if k not in used:
            continue
        v = used[k]
        est = " (est.)" if k in ("sync", "async") else ""
        table.append(f"| {names[k]} | {C.spread([x['train_s'] for x in v])} | "
                     f"{C.spread([x['end_to_end_s'] for x in v], '{:.1f}')} | "
                     f"{C.spread([x['acc'] for x in v], '{:.3f}')} | {v[0]['exchanges']}{est} | "
                     f"{v[0]['bytes'] / 1e6:.2f}{est} | {C.spread([x['mbps'] for x in v])}{est} |")
    ratios = ["| distbench / elephas | train time | end-to-end | accuracy | MB/s |", "|---|---|---|---|---|"]
    for a in ("downpour", "adag"):
        for b in ("sync", "async"):
            if a in used and b in used:
                def r(key: str) -> str:
                    return C.ratio_spread([x[key] for x in used[a]], [x[key] for x in used[b]])[1]
                ratios.append(f"| `{a}` / elephas {b} | {r('train_s')} | {r('end_to_end_s')} | {r('acc')} | "
                              f"{r('mbps')} |")
    lines = [
        "## Parameter servers vs elephas (`benchmarks/elephas_peer.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {C.machine_info()}",
        f"- command: `{cmd}`",
        f"- elephas environment: {', '.join(f'{k} {v}' for k, v in versions.items()) or 'not run'}; distbench: "
        f"TensorFlow {C.version('tensorflow')}, pyspark {C.version('pyspark')}.",
        f"- workload: digits (distbench's split: {sizes.get('train', '?')} train / {sizes.get('test', '?')} test), "
        f"mlp [64] ({n_params:,} float32 parameters = {4 * n_params:,} bytes), same initial weights, "
        f"{opt_text}, {epochs} epochs, {WORKERS} workers "
        f"on Spark `local[{WORKERS}]`, per-worker batch {batch // WORKERS} (global {batch}), 1 intra-op "
        "thread per worker on both sides.",
        f"- {n_used} timed round(s) after {warmup} warm-up round(s); each configuration in a fresh process, "
        f"rounds alternate the order; cells are median [min-max]; load average at start {load0}; the "
        f"benchmark took {took:.0f} s.",
        "- train s: distbench = `timings.train_s` (first replica's first step to last exchange); elephas = "
        "`fit()` wall time after a warm-up Spark job imported TensorFlow in the Python workers (it includes "
        "elephas' per-epoch Spark jobs, model rebuilds and re-tracing). end-to-end = process spawn to the "
        "end of training (Python and TensorFlow import, Spark session, training). exchanges: distbench = "
        "commits + pulls counted by the server; elephas = weight transfers (sync 2NE, async N + 2NE + 1). "
        "MB/s = bytes exchanged / train s; elephas' bytes are **estimated** as transfers x model bytes "
        "(it counts none). elephas exchanges once per epoch per worker, distbench every window (DOWNPOUR 5, "
        "ADAG 12 local steps), so MB/s mostly reflects how often each one exchanges, not link efficiency.",
        "", *table, ""]
    if len(ratios) > 2:
        lines += ["Ratios (medians; the bracket is the range of the per-round ratios):", "", *ratios, ""]
    for p in problems:
        lines += [p, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its Markdown section, optionally write it into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 epochs, one round, ADAG and elephas sync only, no venv set-up")
    ap.add_argument("--reps", type=int, default=3, help="timed rounds (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed warm-up rounds")
    ap.add_argument("--epochs", type=int, default=10, help="training epochs")
    ap.add_argument("--batch-size", type=int, default=64, help="global batch size (per worker: half)")
    ap.add_argument("--elephas-venv", default=os.environ.get("DISTBENCH_ELEPHAS_VENV", str(DEFAULT_VENV)),
                    help="elephas' virtual environment (created when missing, unless --quick)")
    ap.add_argument("--write", metavar="PATH", help="replace the elephas_peer section of PATH")
    ap.add_argument("--keep", metavar="DIR", help="keep run directories and logs in DIR")
    ap.add_argument("--elephas-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=["sync", "async"], help=argparse.SUPPRESS)
    ap.add_argument("--spawn-unix", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.elephas_worker:
        return elephas_worker(args.data, args.out, args.mode, args.spawn_unix or time.time())
    reps, warmup, epochs = args.reps, args.warmup, args.epochs
    dist_modes, el_modes = ["downpour", "adag"], ["sync", "async"]
    if args.quick:
        reps, warmup, epochs, dist_modes, el_modes = 1, 0, 2, ["adag"], ["sync"]
    started, load0 = time.time(), C.load_average()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="distbench-elephas-"))
    tmp.mkdir(parents=True, exist_ok=True)
    venv = Path(args.elephas_venv)
    problems: list[str] = []
    rows: dict[str, list[dict]] = {k: [] for k in dist_modes + el_modes}
    versions: dict = {}
    workload: dict = {}
    try:
        elephas_ok = venv_python(venv).exists()
        if not elephas_ok and not args.quick:
            print(f"creating elephas' environment in {venv} ...", file=sys.stderr, flush=True)
            elephas_ok, why = setup_venv(venv, tmp / "elephas-setup.log")
            if not elephas_ok:
                problems.append(f"**elephas could not be installed here**:\n\n```\n{why}\n```")
        elif not elephas_ok:
            problems.append(f"elephas not run: no environment at `{venv}` (`--quick` does not create it; "
                            "run without `--quick`, which installs `elephas==7.3.0 scikit-learn` there).")
        cfg = tmp / "peer.toml"
        strategies = json.dumps([f"spark_ps:{m}" for m in dist_modes])
        cfg.write_text(CONFIG.format(epochs=epochs, batch=args.batch_size, strategies=strategies, workers=WORKERS))
        run_dir, data, log = tmp / "run", tmp / "workload.npz", tmp / "distbench.log"
        for k in range(warmup + reps):
            def dist_round() -> None:
                cmd = ["run", str(cfg), "--out", str(run_dir), "--repeats", str(k + 1)]
                C.run_distbench(cmd + (["--resume"] if run_dir.exists() else []), log)
                for m in dist_modes:
                    rec = next(r for r in C.read_records(run_dir)
                               if r["strategy"] == f"spark_ps:{m}" and r["repeat"] == k)
                    if rec["status"] != "ok":
                        raise RuntimeError(f"distbench spark_ps:{m} {rec['status']}: {rec.get('reason')}\n"
                                           f"{rec.get('log_tail', '')}")
                    rows[m].append(dist_fields(rec))
                    workload.update(rec.get("workload") or {})

            def elephas_round() -> None:
                nonlocal elephas_ok
                if not elephas_ok:
                    return
                for m in (el_modes if k % 2 == 0 else el_modes[::-1]):
                    try:
                        res = run_elephas(venv, data, tmp / f"elephas_{m}_{k}.json", m)
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        problems.append(f"**elephas {m} failed** (round {k}):\n\n```\n{e}\n```")
                        elephas_ok = False
                        return
                    versions.update(res["versions"])
                    rows[m].append(eleph_fields(res))

            if k % 2 == 0 or not data.exists():
                dist_round()
                if not data.exists():
                    meta = export_workload(run_dir, data)
                    workload.update(learning_rate=meta["learning_rate"], momentum=meta["momentum"])
                elephas_round()
            else:
                elephas_round()
                dist_round()
            print(f"round {k} done: " + ", ".join(f"{m} {rows[m][-1]['train_s']:.2f} s" for m in rows if rows[m]),
                  file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    md = render(rows, warmup, C.command_line("elephas_peer.py", argv), epochs, args.batch_size,
                time.time() - started, load0, problems, versions, workload)
    print(md)
    if args.write:
        C.write_section(args.write, SECTION, md)
        print(f"wrote section {SECTION} to {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

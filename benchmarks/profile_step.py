"""Where a training step's time goes: one-worker ``horovod``, ``spark_ps:adag`` and
``mpi_ps:adag`` against ``single`` on the CNN workload of ``benchmarks/step_time.py``.

With one worker there is no one to exchange with: the same samples, the same steps,
the same model as ``single``, so whatever one worker loses against ``single`` is
distbench's plumbing (issue 20). Two parts, in one run:

- **throughput**: ``distbench run`` (each configuration in a fresh process) of
  ``single`` and, with ``--workers 1``, ``horovod``, ``spark_ps:adag`` and ``mpi_ps:adag``
  (``--two-workers``: those three with 2 workers too); samples/s (steady) = samples
  trained from the end of epoch 1 to the end of the last epoch (the record's curve) over
  the seconds between them: counted in samples, because a parameter server's epoch ends
  fall on its exchanges (its clock counts commits of ``window`` local steps), so its
  epochs are not all the same number of steps; ratio = samples/s over
  ``single``'s of the same source tree. Rounds alternate the order of the configurations
  (and of the source trees, ``--tree NAME=DIR`` repeated: a before/after comparison in one
  run, each tree's ``src`` on the children's ``PYTHONPATH``), so a drift in the machine's
  load favours none.
- **profile**: each strategy's real training function (``train_with_strategy``,
  ``train_rank`` on one Horovod rank, ``train_replica`` against a parameter server in
  another process) in a fresh process of this tree, instrumented with ``perf_counter``
  timers wrapped around the calls a step is made of: ``tf.function`` calls, the input
  iterator, the parameter-server request (commit/pull round trip, server included), the
  rest of the exchange (the optimizer's worker rule and its copies), and the copies
  between the model's TF variables and NumPy (``get_weights``/``set_weights``). The timers
  count from the end of epoch 1 to the end of the last epoch (an epoch hook,
  ``DISTBENCH_EPOCH_HOOKS``), so tracing and warm-up are out. The framework's own op time
  is the traced step alone: the same model's forward, backward and SGD update on one
  batch, ``n`` times inside one ``tf.function`` (a ``tf.range`` loop: no Python, no
  input pipeline); a ``tf.function`` call's time minus the op time of its steps is
  dispatch and what else runs in the graph (the input pipeline, for ``single``). What no
  timer holds is Python between the calls (loop bookkeeping, progress board).

Usage::

    python benchmarks/profile_step.py [--quick] [--reps N] [--two-workers]
        [--tree before=/path/to/old/checkout --tree after=.] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import step_time  # noqa: E402

SECTION = "profile_step"
ONE_WORKER = ["horovod", "horovod_mpi", "spark_ps:adag", "mpi_ps:adag", "mirrored", "multi_worker_mirrored"]
FIT = "model.fit"
"""The reference row: plain Keras ``model.fit`` on the run's workload (same data, model,
initial weights, batch, epochs, threads), in a fresh process; ``single`` must not be slower."""
PROFILED = ["single", "horovod", "spark_ps:adag"]
# step_time.py's CNN workload, one single configuration (the others run through --strategies/--workers)
CONFIG = step_time.CONFIG.replace("{strategies}", '["single"]').replace("workers = [2]", "workers = [1]")
assert "workers = [1]" in CONFIG  # step_time's CONFIG changed shape: update this line


# ------------------------------------------------------------------ profile worker
class Timers:
    """Inclusive ``perf_counter`` seconds and call counts per label, counted only while
    :attr:`on` (outermost call of a label only: a re-entrant call is not counted twice)."""

    def __init__(self) -> None:
        self.on = False
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._depth: dict[str, int] = {}

    def wrap(self, owner: Any, name: str, label: str, exclusive: bool = False) -> None:
        """Replace ``owner.name`` (a function or method) by a timed one; ``exclusive``: no
        other timer counts during its calls (work off the training clock)."""
        fn = getattr(owner, name)
        timers = self

        def timed(*a: Any, **kw: Any) -> Any:
            if not timers.on or timers._depth.get(label):
                return fn(*a, **kw)
            timers._depth[label] = 1
            timers.on = not exclusive
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                timers.seconds[label] = timers.seconds.get(label, 0.0) + time.perf_counter() - t0
                timers.calls[label] = timers.calls.get(label, 0) + 1
                timers._depth[label] = 0
                timers.on = True

        setattr(owner, name, timed)

    def wrap_iterator(self, it: Any, label: str) -> Any:
        """A generator over ``it`` whose every ``next`` is timed under ``label``."""
        while True:
            if self.on:
                t0 = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    return
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t0
                self.calls[label] = self.calls.get(label, 0) + 1
            else:
                try:
                    item = next(it)
                except StopIteration:
                    return
            yield item


TIMERS = Timers()
OFF_CLOCK = "off the clock (snapshots, sync)"
COPIES = "copies TF <-> NumPy (weights)"
WINDOW: dict[str, Any] = {}


def epoch_hook(info: Any) -> None:
    """``DISTBENCH_EPOCH_HOOKS`` hook of a profile worker: the timers run from the end of
    epoch 1 to the end of the last epoch."""
    if info.epoch == 1:
        TIMERS.seconds.clear()
        TIMERS.calls.clear()
        TIMERS.on = True
        WINDOW.update(t0=time.perf_counter(), steps0=info.steps)
    if info.epoch == info.epochs and TIMERS.on:
        TIMERS.on = False
        WINDOW.update(t1=time.perf_counter(), steps1=info.steps, seconds=dict(TIMERS.seconds),
                      calls=dict(TIMERS.calls))


def instrument() -> None:
    """Wrap the calls a step is made of (see the module docstring) with :data:`TIMERS`."""
    import keras
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager.polymorphic_function import polymorphic_function
    from tensorflow.python.ops import resource_variable_ops

    from distbench.ps_async import client
    from distbench.training import output, schedule

    for name in ("take", "off_clock"):
        TIMERS.wrap(output.SnapshotRecorder, name, OFF_CLOCK, exclusive=True)
    TIMERS.wrap(polymorphic_function.Function, "__call__", "tf.function calls")
    TIMERS.wrap(iterator_ops.OwnedIterator, "__next__", "input (next batch)")
    for name in ("get_weights", "set_weights"):
        TIMERS.wrap(keras.layers.Layer, name, COPIES)
    for name in ("numpy", "assign"):  # eager reads and writes of whole variables (a replica's exchange)
        TIMERS.wrap(resource_variable_ops.BaseResourceVariable, name, COPIES)
    for name in ("pull", "commit", "commit_and_pull", "sync"):
        TIMERS.wrap(client.PSClient, name, "exchange: server request (round trip)")
    TIMERS.wrap(client.WorkerSession, "exchange", "exchange: session (rule, copies, request)")
    batches = schedule.shard_batches
    schedule.shard_batches = lambda *a, **kw: TIMERS.wrap_iterator(batches(*a, **kw), "input (next batch)")


def op_time(workload: Any, hvd: Any = None, n: int = 20, reps: int = 3) -> dict[str, float]:
    """Seconds per step of the traced step alone: the workload's model, forward, backward
    and SGD update on one fixed batch, ``n`` steps in one ``tf.function`` (``tf.range``);
    ``call_s``: the same step called from Python (one ``tf.function`` call per step).
    With ``hvd``, ``allreduce_op_s``: the step with ``hvd.DistributedGradientTape``."""
    import keras
    import tensorflow as tf

    keras.backend.clear_session()
    ds, cfg = workload.dataset, workload.config.training
    B = cfg.global_batch_size
    x, y = tf.constant(ds.train.x[:B]), tf.constant(ds.train.y[:B])
    model = workload.build_model()
    opt = workload.make_optimizer(1)
    opt.build(model.trainable_variables)
    loss_obj, tv = workload.loss_fn(), model.trainable_variables

    def make(distributed: bool) -> Callable[..., Any]:
        def step() -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_obj(y, model(x, training=True)))
            tape_ = hvd.DistributedGradientTape(tape) if distributed else tape
            opt.apply_gradients(zip(tape_.gradient(loss, [v.value for v in tv]), tv))
            return loss
        return step

    def timed(f: Callable[[], Any], k: int) -> float:
        f()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            out.append((time.perf_counter() - t0) / k)
        return statistics.median(out)

    res = {}
    for key, distributed in (("op_s", False), ("allreduce_op_s", True)):
        if distributed and hvd is None:
            continue
        one = tf.function(make(distributed), autograph=False)

        @tf.function
        def many(one: Any = one) -> Any:
            for _ in tf.range(n):
                one()
            return tf.constant(0.0)

        res[key] = timed(lambda: float(many()), n)
        if not distributed:
            res["call_s"] = timed(lambda: [float(one()) for _ in range(n)][-1], n)
    return res


def _server(conn: Any, weights: list, optimizer: str, secret: bytes, params: dict, nt: list) -> None:
    """A parameter server in its own process, as the driver's in ``spark_ps`` (sends its
    address on ``conn``, serves until the replica says done)."""
    from distbench.ps_async.server import ParameterServer

    server = ParameterServer(weights, optimizer, secret, num_workers=1, params=params, non_trainable=nt).start()
    conn.send(server.address)
    server.wait_done(600)
    server.stop()


def fit_worker(run_dir: str, out: str, repeat: int) -> int:
    """Train the workload saved in ``run_dir`` with plain ``model.fit`` (compiled with the
    workload's optimizer and loss, the same global batch, epochs and CPU threads as
    ``single``; Keras shuffles each epoch) and write a record-like dict to ``out`` whose
    curve holds the epoch-end seconds since the first epoch began (Keras callbacks)."""
    from distbench.training.loop import configure_threads, threads_per_process
    from distbench.workload import Workload

    wl = Workload.load(run_dir, cached=True)
    t = wl.config.training
    configure_threads(threads_per_process(t.threads, 1))
    import keras

    model = wl.build_model()
    model.compile(optimizer=wl.make_optimizer(1), loss=wl.loss_spec().make())
    G = t.global_batch_size
    steps = len(wl.dataset.train) // G
    x, y = wl.dataset.train.x[:steps * G], wl.dataset.train.y[:steps * G]
    ends: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_train_begin(self, logs: Any = None) -> None:
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            ends.append(time.perf_counter() - self.t0)

    model.fit(x, y, batch_size=G, epochs=t.epochs, verbose=0, callbacks=[Clock()])
    rec = {"strategy": FIT, "workers": 1, "status": "ok", "repeat": repeat, "global_batch_size": G,
           "samples": steps * G * t.epochs, "per_replica_batch_size": G, "details": {},
           "curve": [{"epoch": e + 1, "step": steps * (e + 1), "elapsed_s": v} for e, v in enumerate(ends)]}
    Path(out).write_text(json.dumps(rec))
    return 0


def profile_worker(strategy: str, out: str, samples: int, epochs: int, batch: int) -> int:
    """Run ``strategy``'s training function instrumented (see the module docstring); write
    ``{"steps", "wall_s", "seconds": {label: s}, "calls", "op_s", "call_s", ...}`` to ``out``."""
    os.environ["DISTBENCH_EPOCH_HOOKS"] = "__main__:epoch_hook"
    from distbench import config as config_mod
    from distbench.training.loop import configure_threads, threads_per_process
    from distbench.workload import Workload

    run_dir = Path(out).with_suffix("")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "c.toml").write_text(CONFIG.format(samples=samples, epochs=epochs, batch=batch))
    cfg = config_mod.load(run_dir / "c.toml")
    threads = threads_per_process(cfg.training.threads, 1)
    hvd = None
    if strategy == "horovod":
        from distbench.strategies import horovod_rank as H

        hvd, info = H.init_rank(0)
    else:
        configure_threads(threads)
    import tensorflow as tf

    workload = Workload.create(cfg, run_dir)
    instrument()
    if strategy == "single":
        from distbench.training.tf_loop import train_with_strategy

        train_with_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"), workload)
    elif strategy == "horovod":
        H.train_rank(hvd, info, workload)
    elif strategy.startswith("spark_ps:"):
        from distbench.ps_async.protocol import new_secret
        from distbench.ps_async.worker import params_from_config, replica_spec, train_replica

        opt = strategy.split(":", 1)[1]
        params = params_from_config(cfg, opt)
        secret = new_secret()
        ctx = mp.get_context("spawn")
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_server, args=(there, workload.initial_weights, opt, secret,
                                                 {k: v for k, v in params.items() if k != "alpha"},
                                                 workload.non_trainable_indices()), daemon=True)
        proc.start()
        try:
            if not here.poll(120):
                raise RuntimeError("the parameter server process did not start")
            spec = replica_spec(workload, 1, opt, params, here.recv(), secret, threads, 120.0)
            train_replica(spec, 0, workload.dataset.train)
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
    else:
        raise SystemExit(f"profile: unknown strategy {strategy!r}; expected one of {', '.join(PROFILED)}")
    if "t1" not in WINDOW:
        raise RuntimeError("the epoch hook did not see the last epoch: nothing was timed")
    res = {"strategy": strategy, "steps": WINDOW["steps1"] - WINDOW["steps0"], "wall_s": WINDOW["t1"] - WINDOW["t0"],
           "seconds": WINDOW["seconds"], "calls": WINDOW["calls"], "threads": threads,
           **op_time(workload, hvd)}
    Path(out).write_text(json.dumps(res))
    if hvd is not None:
        hvd.shutdown()
    return 0


# ------------------------------------------------------------------ the run
def tree_src(path: str) -> Path:
    """The ``src`` directory of a distbench checkout (``path`` or ``path/src``)."""
    p = Path(path).resolve()
    src = p / "src" if (p / "src" / "distbench").is_dir() else p
    if not (src / "distbench").is_dir():
        raise SystemExit(f"--tree {path}: no distbench package under {p} or {p / 'src'}; give a checkout's root")
    return src


def run_distbench(args: list[str], log: Path, src: Path) -> None:
    """``python -m distbench ARGS`` with ``src`` first on ``PYTHONPATH`` (output to ``log``).

    Raises:
        RuntimeError: a non-zero exit (the log's tail in the message).
    """
    env = C.child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(src), env["PYTHONPATH"]])
    with open(log, "a") as f:
        f.write(f"\n$ PYTHONPATH={src} distbench {' '.join(args)}\n")
        f.flush()
        cp = subprocess.run([sys.executable, "-m", "distbench", *args], stdout=f, stderr=subprocess.STDOUT,
                            text=True, timeout=3600, env=env, cwd=src.parent)
    if cp.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise RuntimeError(f"distbench {' '.join(args)} exited with {cp.returncode}:\n{tail}")


def samples_at(rec: dict, step: int) -> float:
    """Training samples done when a record's curve reached ``step``: global steps x global
    batch; for an asynchronous parameter server (``*_ps:`` with a window) the curve's step is
    the centre's clock, one commit per ``window`` local steps of the per-replica batch."""
    w = (rec.get("details") or {}).get("communication_window")
    if "_ps:" in rec["strategy"] and w:
        return min(step * w * rec["per_replica_batch_size"], rec["samples"])
    return step * rec["global_batch_size"]


def steady_sps(rec: dict) -> float | None:
    """Steady-state samples/s of a record: samples trained between the end of epoch 1 and
    the end of the last epoch over the time between them (None if not ok or one epoch).
    Counted in samples, not epochs: a parameter server's epoch ends fall on exchanges
    (24 local steps for an epoch of 23 at window 12), so per-epoch times would be biased."""
    pts = sorted((p for p in rec.get("curve") or [] if p.get("epoch")), key=lambda p: p["epoch"])
    if rec.get("status") != "ok" or len(pts) < 2 or pts[0]["epoch"] != 1:
        return None
    a, b = pts[0], pts[-1]
    dt = b["elapsed_s"] - a["elapsed_s"]
    return (samples_at(rec, b["step"]) - samples_at(rec, a["step"])) / dt if dt > 0 else None


def throughput(tmp: Path, trees: dict[str, Path], configs: list[tuple[str, int]], reps: int,
               config_text: str) -> dict[str, list[dict]]:
    """Run every configuration ``reps`` times per tree (interleaved) on the experiment
    ``config_text`` (TOML); the records by tree."""
    cfg = tmp / "profile.toml"
    cfg.write_text(config_text)
    log = tmp / "distbench.log"
    names = list(trees)
    for k in range(reps):
        ahead = k % 2 == 0
        # One configuration at a time, in every tree back to back (a drift in the machine's
        # load between two trees' runs of a configuration is then seconds, not minutes).
        for s, n in (configs if ahead else configs[::-1]):
            for name in (names if ahead else names[::-1]):
                run_dir = tmp / f"run_{name}"
                if s == FIT:  # needs the run's workload: the first round runs single first
                    fit_run(run_dir, tmp / f"fit_{name}_{k}.json", k, trees[name])
                    continue
                a = ["run", str(cfg), "--out", str(run_dir), "--repeats", str(k + 1), "--workers", str(n),
                     "--strategies", s]
                run_distbench(a + (["--resume"] if run_dir.exists() else []), log, trees[name])
        print(f"round {k} done", file=sys.stderr, flush=True)
    return {name: C.read_records(tmp / f"run_{name}") + [json.loads(f.read_text())
                                                           for f in sorted(tmp.glob(f"fit_{name}_*.json"))]
            for name in names}


def fit_run(run_dir: Path, out: Path, repeat: int, src: Path) -> None:
    """:func:`fit_worker` in a fresh process with ``src`` first on the path."""
    env = C.child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(src), env["PYTHONPATH"]])
    cp = subprocess.run([sys.executable, __file__, "--fit-worker", str(run_dir), "--out", str(out), "--repeat",
                         str(repeat)], capture_output=True, text=True, env=env, timeout=1800)
    if cp.returncode != 0:
        raise RuntimeError(f"model.fit reference failed:\n{(cp.stdout + cp.stderr)[-3000:]}")


def profile(tmp: Path, trees: dict[str, Path], strategies: list[str], samples: int, epochs: int,
            batch: int) -> dict[tuple[str, str], dict]:
    """Each strategy's instrumented run (:func:`profile_worker`) in a fresh process, with
    each tree's ``src`` first on the path; keyed by ``(tree, strategy)``."""
    out = {}
    for s in strategies:
        for name, src in trees.items():
            f = tmp / f"profile_{name}_{s.replace(':', '_')}.json"
            env = C.child_env()
            env["PYTHONPATH"] = os.pathsep.join([str(src), env["PYTHONPATH"]])
            cp = subprocess.run([sys.executable, __file__, "--profile-worker", s, "--out", str(f), "--samples",
                                 str(samples), "--epochs", str(epochs), "--batch-size", str(batch)],
                                capture_output=True, text=True, env=env, timeout=900)
            if cp.returncode != 0:
                out[name, s] = {"error": (cp.stdout + cp.stderr).strip().splitlines()[-1:] or [f"exit {cp.returncode}"]}
                print(f"profile {s} ({name}) failed:\n{(cp.stdout + cp.stderr)[-3000:]}", file=sys.stderr)
                continue
            out[name, s] = json.loads(f.read_text())
            print(f"profiled {s} ({name})", file=sys.stderr, flush=True)
    return out


def render_throughput(records: dict[str, list[dict]], configs: list[tuple[str, int]], floor: float) -> list[str]:
    """The throughput table rows: one per tree and configuration; ``floor``: the compute
    floor, samples/s."""
    rows = []
    for name, recs in records.items():
        single = [steady_sps(r) for r in sorted(_group(recs, "single", 1), key=lambda r: r["repeat"])]
        for s, n in configs:
            rs = sorted(_group(recs, s, n), key=lambda r: r["repeat"])
            sps = [steady_sps(r) for r in rs]
            bad = [f"{r['status']}: {r.get('reason', '')[:80]}" for r in rs if r["status"] != "ok"]
            _, ratio = C.ratio_spread(sps, single)
            ok = [v for v in sps if v]
            of_floor = f"{C.median(ok) / floor:.0%}" if ok else "-"
            rows.append(f"| {name} | `{s}` | {n} | {C.spread(sps, '{:,.0f}')} | {ratio} | {of_floor} | "
                        f"{'; '.join(bad)} |")
    return rows


BASELINE_TOLERANCE = 1.02
"""A one-worker row may beat ``single``'s steady samples/s by at most this factor (run-to-run noise)."""


def verdict(records: dict[str, list[dict]], configs: list[tuple[str, int]]) -> list[str]:
    """Per tree, whether ``single`` is the strongest one-device loop: every one-worker row at
    most :data:`BASELINE_TOLERANCE` x ``single``'s median steady samples/s, and ``single`` at
    least as fast as plain ``model.fit`` (its training time at most 1.0x fit's)."""
    out = []
    for name, recs in records.items():
        single = C.median([steady_sps(r) for r in _group(recs, "single", 1)])
        if not single:
            out.append(f"- {name}: no steady samples/s for `single`")
            continue
        ratios = {s: C.median([steady_sps(r) for r in _group(recs, s, 1)]) for s, n in configs
                  if n == 1 and s not in ("single", FIT)}
        over = {s: v / single for s, v in ratios.items() if v and v / single > BASELINE_TOLERANCE}
        best = max(((v / single, s) for s, v in ratios.items() if v), default=None)
        line = (f"- {name}: one-worker rows over {BASELINE_TOLERANCE}x `single`: "
                + (", ".join(f"`{s}` {r:.2f}x" for s, r in over.items()) if over else "none")
                + (f" (the fastest, `{best[1]}`, at {best[0]:.2f}x)" if best else ""))
        fit = C.median([steady_sps(r) for r in _group(recs, FIT, 1)])
        if fit:
            line += (f"; `single`'s steady epoch time / `model.fit`'s: {fit / single:.2f} "
                     f"({'at most' if fit <= single else 'above'} 1.0)")
        out.append(line)
    return out


def _group(recs: list[dict], strategy: str, workers: int) -> list[dict]:
    """The records of configuration ``strategy`` (e.g. ``spark_ps:adag``) with ``workers`` workers."""
    return [r for r in recs if r["strategy"] == strategy and r["workers"] == workers]


LABELS = ["tf.function calls", "input (next batch)", "exchange: server request (round trip)",
          "exchange: session (rule, copies, request)", COPIES]


def render_profile(prof: dict[tuple[str, str], dict], batch: int, floor: float) -> list[str]:
    """Milliseconds per step of every profiled strategy: the breakdown table rows; the last
    two cells are the op time's share of the step and the op time's samples/s (``batch``
    per step) over the compute ``floor`` (samples/s)."""
    rows = []
    for (tree, s), p in prof.items():
        if "error" in p:
            rows.append(f"| {tree} | `{s}` | failed: {' '.join(p['error'])[:200]} |" + " |" * 10)
            continue
        steps = max(1, p["steps"])
        sec = p["seconds"]

        def ms(label: str) -> float:
            return sec.get(label, 0.0) / steps * 1e3

        wall = (p["wall_s"] - sec.get(OFF_CLOCK, 0.0)) / steps * 1e3
        op = p["op_s"] * 1e3
        calls = ms(LABELS[0])
        request = ms(LABELS[2])
        rule = max(0.0, ms(LABELS[3]) - request)
        copies = ms(LABELS[4])
        inp = ms(LABELS[1])
        rest = wall - calls - inp - ms(LABELS[3]) - copies
        allreduce = (f"{(p['allreduce_op_s'] - p['op_s']) * 1e3:+.2f}" if "allreduce_op_s" in p else "-")
        rows.append(f"| {tree} | `{s}` | {wall:.2f} | {op:.2f} | {calls - op:+.2f} | {allreduce} | {inp:.2f} | "
                    f"{request:.2f} | {rule:.2f} | {copies:.2f} | {rest:+.2f} | {op / wall:.0%} | "
                    f"{batch / p['op_s'] / floor:.0%} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its Markdown section, optionally write it into a file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 512 samples, 2 epochs, one round of single, profile of single")
    ap.add_argument("--reps", type=int, default=3, help="rounds (one repetition of every configuration each)")
    ap.add_argument("--epochs", type=int, default=8, help="epochs per run (the first is the warm-up)")
    ap.add_argument("--samples", type=int, default=2048, help="synthetic samples (80%% x 90%% train)")
    ap.add_argument("--batch-size", type=int, default=64, help="global batch size")
    ap.add_argument("--strategies", default=",".join(ONE_WORKER), help="strategies compared with single")
    ap.add_argument("--two-workers", action="store_true", help="also run the strategies with 2 workers")
    ap.add_argument("--tree", action="append", metavar="NAME=DIR",
                    help="a distbench checkout to measure (repeat to compare trees in one run; default: this one)")
    ap.add_argument("--no-profile", action="store_true", help="throughput only")
    ap.add_argument("--write", metavar="PATH", help="replace the profile_step section of PATH")
    ap.add_argument("--keep", metavar="DIR", help="keep the run directories and logs in DIR")
    ap.add_argument("--digits", action="store_true",
                    help="throughput on the embedded default's workload (digits, MLP [64]) instead of the CNN")
    ap.add_argument("--no-fit", action="store_true", help="leave out the plain model.fit reference row")
    ap.add_argument("--profile-worker", metavar="STRATEGY", help=argparse.SUPPRESS)
    ap.add_argument("--fit-worker", metavar="RUN_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.fit_worker:
        return fit_worker(args.fit_worker, args.out, args.repeat)
    if args.profile_worker:
        return profile_worker(args.profile_worker, args.out, args.samples, args.epochs, args.batch_size)
    reps, epochs, samples = args.reps, args.epochs, args.samples
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip() and s.strip() != "single"]
    profiled = [s for s in PROFILED if s == "single" or s in strategies]
    if args.quick:
        reps, epochs, samples, strategies, profiled = 1, 2, 512, [], ["single"]
    if reps < 1 or epochs < 2:
        ap.error("--reps >= 1 and --epochs >= 2 (the first epoch is the warm-up)")
    trees: dict[str, Path] = {}
    for t in args.tree or [f"this={C.ROOT}"]:
        name, sep, path = t.partition("=")
        if not sep or not name or not path:
            ap.error(f"--tree {t!r}: expected NAME=DIR, e.g. --tree before=/tmp/old-checkout")
        trees[name] = tree_src(path)
    configs = [("single", 1)] + ([] if args.no_fit else [(FIT, 1)]) + [(s, 1) for s in strategies] + (
        [(s, 2) for s in strategies] if args.two_workers else [])
    started, load0 = time.time(), C.load_average()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="distbench-profile-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        from distbench.config import ModelConfig
        from distbench.predict import forward_flops

        spec = step_time.CNN_SPEC  # the compute floor as step_time.py measures it (peak matmul rate / FLOPs)
        train_flops = 3 * forward_flops(ModelConfig(**spec["model"]), spec["input_shape"], spec["classes"])
        mm = step_time.run_compute_probe(tmp, "floor", 1024 if args.quick else 2048, 2 if args.quick else 5, spec)
        floor = max(mm["gflops"]) * 1e9 / train_flops
        text = (C.DIGITS_MLP_TOML.format(epochs=epochs, batch=args.batch_size, strategies='["single"]', workers=1)
                if args.digits else CONFIG.format(samples=samples, epochs=epochs, batch=args.batch_size))
        records = throughput(tmp, trees, configs, reps, text)
        prof = {} if args.no_profile else profile(tmp, trees, profiled, samples, max(epochs, 3), args.batch_size)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    n_train = next((r["workload"]["sizes"]["train"] for recs in records.values() for r in recs), "?")
    md = [
        "## One-worker overheads vs `single`, and where a step's time goes (`benchmarks/profile_step.py`)", "",
        f"- date: {C.utc_now()}",
        f"- machine: {C.machine_info()}; Horovod {C.version('horovod')}, pyspark {C.version('pyspark')}",
        f"- command: `{C.command_line('profile_step.py', argv)}`",
        "- workload: " + ("digits (embedded), `mlp` hidden [64]" if args.digits else
                          f"synthetic {samples} samples 32x32x3, `cnn` filters [32, 64] hidden [128]")
        + f" ({n_train} for training), global batch {args.batch_size}, SGD, {epochs} epochs per run (the first "
        "is the warm-up); "
        f"{reps} round(s), each running every configuration in every tree back to back (odd rounds in "
        "reverse order); trees: "
        + ", ".join(f"{n} = `{p}`" for n, p in trees.items())
        + f". Load average at start {load0}; the benchmark took {time.time() - started:.0f} s.",
        "- samples/s (steady): samples trained from the end of epoch 1 to the end of the last epoch over the "
        "time between them (the record's curve; a parameter server's samples from its clock: commits x window x "
        "per-replica batch); median [min-max] over rounds. Ratio: to `single`'s samples/s of the same tree "
        "(bracket: per-round range).", "",
        f"- compute floor (as in `benchmarks/step_time.py`): {train_flops / 1e6:.1f} MFLOP per training sample "
        f"(3 x the forward FLOPs from the layer shapes) at this machine's peak float32 matmul rate "
        f"({max(mm['gflops']):.1f} GFLOP/s, {mm['n']}x{mm['n']}, all cores, fresh process) = "
        f"**{floor:,.0f} samples/s**; *of floor*: samples/s over it.", "",
        "| tree | strategy | workers | samples/s (steady) | ratio to single | of floor | runs not ok |",
        "|---|---|---|---|---|---|---|", *render_throughput(records, configs, floor), "",
        *verdict(records, configs), ""]
    if prof:
        md += [
            "Where a step's time goes (ms per step, one worker, epochs 2 to the last of an instrumented run of the "
            f"strategy's own training function in each tree, `{max(epochs, 3)}` epochs): *op time* is the traced "
            "step alone (forward, backward, SGD update of one batch, in a `tf.range` loop); *dispatch* is the "
            "`tf.function` calls' time beyond the op time of their steps (Python dispatch, and what else runs in "
            "the graph: `single`'s input pipeline and loop); *allreduce op* the step's extra time with "
            "`hvd.DistributedGradientTape` (one rank); *request* the parameter-server round trip (client, "
            "loopback, server; the server in another process); *rule + copies* the rest of the exchange "
            "(ADAG's delta, copies of the pulled centre); *TF<->NumPy* the weights read out of and written into "
            "the model's variables; *Python, "
            "other* what no timer holds; *op share*: op time / step (the rest is distbench's and the "
            "framework's plumbing); *op of floor*: the op time's samples/s over the compute floor (what is "
            "left between the two is the framework's kernels: TensorFlow/oneDNN convolutions below the matmul "
            "rate, not distbench). `mpi_ps` runs the same replica code as `spark_ps` (its request goes "
            "over MPI instead of ZeroMQ).", "",
            "| tree | strategy | step | op time | dispatch | allreduce op | input | request | rule + copies | "
            "TF<->NumPy | Python, other | op share | op of floor |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *render_profile(prof, args.batch_size, floor),
            ""]
    text = "\n".join(md)
    print(text)
    if args.write:
        C.write_section(args.write, SECTION, text)
        print(f"wrote section {SECTION} to {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

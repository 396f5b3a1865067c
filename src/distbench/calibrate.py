"""``distbench calibrate RUN_DIR``: the compute time of one optimizer step of the run's
model against the per-worker batch and the CPU threads, measured on this machine, for
the per-strategy cost model (:mod:`distbench.costmodel`).

The step is ``single``'s own (:func:`distbench.training.tf_loop.train_with_strategy`
under ``OneDeviceStrategy``, the same graph loop, input pipeline and optimizer), run on
the run's saved workload with the global batch replaced by each batch of
:func:`batch_ladder` for a few epochs; the figure kept is the steady seconds per step
(epochs after the first, as every record's steady epoch time). One child process per
thread count (TensorFlow fixes its thread pools at its first op), each with the run's
thread rule (:func:`distbench.training.loop.threads_per_process`) for 1, 2, ... processes
on this machine's cores, so the table covers what a worker gets when it shares the
machine with 1..cores others.

The result goes to ``RUN_DIR/calibration.json``::

    {"cores": 2, "cpu": "...", "unix": ..., "global_batch": 120,
     "workload": {"data_sha256": "...", "initial_weights_sha256": "...", "num_parameters": 4810},
     "points": [{"threads": 2, "batch": 120, "step_s": 0.0012}, ...]}

``workload`` (from the run's ``single`` record) and ``cpu``/``cores`` let the cost model
refuse a table measured on another workload or machine (:func:`mismatch`): a copied file
would otherwise set every compute term without a word.

It is a measurement, not a fit: :func:`compute_s` interpolates it (log-log, between the
two nearest measured batches) and never extrapolates below the smallest batch (a step's
fixed cost) or above the largest (proportionally).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

CALIBRATION_FILE = "calibration.json"
DIVISORS = (1, 2, 3, 4, 6, 8, 16, 32)
"""The batches measured: the run's global batch divided by each (whole batches only, at
least 1): the per-worker batches of 1 to 32 workers, with the run's own worker counts added."""


def batch_ladder(global_batch: int, workers: Sequence[int] = ()) -> list[int]:
    """The per-worker batches to measure: ``global_batch // k`` for each of :data:`DIVISORS`
    and each worker count of ``workers`` (the run's), distinct, largest first, each >= 1."""
    return sorted({max(1, global_batch // k) for k in (*DIVISORS, *workers)}, reverse=True)


def thread_counts(configured: int, cores: int) -> list[int]:
    """Distinct intra-op thread counts a worker gets under the run's thread rule when 1, 2,
    ..., ``cores`` processes share this machine (``configured`` when the run fixed it)."""
    if configured:
        return [configured]
    return sorted({max(1, cores // k) for k in range(1, cores + 1)}, reverse=True)


MIN_STEADY_STEPS = 100
"""Steps after the first epoch that each calibration point is measured over, at least."""


def measure(run_dir: str | Path, threads: int, batches: Sequence[int]) -> list[dict[str, Any]]:
    """Measure ``single``'s steady step time at each batch with ``threads`` intra-op threads,
    in this process (which must not have run a TensorFlow op yet).

    Args:
        run_dir: a run directory holding a workload (``distbench run`` made it).
        threads: intra-op threads to configure.
        batches: global batches to run (each at most the training split's size).

    Returns:
        ``[{"threads", "batch", "step_s", "steps"}]``, one per batch: ``step_s`` is the
        seconds per optimizer step over the epochs after the first; ``steps`` how many
        steps that figure spans.

    Raises:
        ConfigError: the run directory holds no readable workload.
    """
    from distbench.training.loop import configure_threads

    configure_threads(threads)
    import tensorflow as tf

    from distbench.training.tf_loop import train_with_strategy
    from distbench.workload import Workload

    wl = Workload.load(run_dir, cached=True)
    n = len(wl.dataset.train)
    out = []
    for b in batches:
        steps_per_epoch = n // b
        # the first epoch is warm-up; then at least 100 steady steps (user test: 22 steps of a
        # 4.5 MB model made batch 15 read 3x faster than batch 20)
        epochs = 1 + max(1, math.ceil(MIN_STEADY_STEPS / max(1, steps_per_epoch)))
        t = replace(wl.config.training, global_batch_size=b, epochs=epochs)
        res = train_with_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"),
                                  replace(wl, config=replace(wl.config, training=t)))
        first, last = res.snapshots[0], res.snapshots[-1]
        steps = last.step - first.step
        out.append({"threads": threads, "batch": b, "steps": steps,
                    "step_s": (last.elapsed_s - first.elapsed_s) / steps})
    return out


def calibrate(run_dir: str | Path, timeout_s: float = 1800.0) -> dict[str, Any]:
    """Measure the compute table of a run (one child process per thread count) and write
    ``RUN_DIR/calibration.json``.

    Args:
        run_dir: a run directory with a workload and ``config.json``.
        timeout_s: seconds each child may take.

    Returns:
        The calibration document (see the module docstring).

    Raises:
        ConfigError: no workload in ``run_dir``, or a child failed (its stderr's last line quoted).
    """
    from distbench.config import ConfigError
    from distbench.results.provenance import cpu_model

    run_dir = Path(run_dir)
    try:
        raw = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{run_dir} holds no readable config.json ({e}): calibrate needs a run directory "
                          "that 'distbench run --out DIR' made") from None
    if not (run_dir / "workload").is_dir():
        raise ConfigError(no_workload(run_dir))
    g = int(raw["training"]["global_batch_size"])
    batches = batch_ladder(g, [int(w) for w in raw["run"]["workers"]])
    cores = os.cpu_count() or 1
    points: list[dict[str, Any]] = []
    for threads in thread_counts(int(raw["training"].get("threads") or 0), cores):
        cmd = [sys.executable, "-m", "distbench.calibrate", str(run_dir), str(threads), *map(str, batches)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                                  env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        except subprocess.TimeoutExpired:
            raise ConfigError(f"calibrate: measuring {threads} thread(s) took over {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1].removeprefix(
                "distbench.contracts.ConfigError: ")
            raise ConfigError(f"calibrate: the measuring process ({threads} threads) exited {proc.returncode}: {last}")
        points += json.loads(proc.stdout.strip().splitlines()[-1])
    doc = {"cores": cores, "cpu": cpu_model(), "unix": time.time(), "global_batch": g,
           "workload": workload_of(run_dir), "points": points}
    (run_dir / CALIBRATION_FILE).write_text(json.dumps(doc, indent=2))
    return doc


def workload_of(run_dir: str | Path) -> dict[str, Any] | None:
    """The workload a run's ``single`` record trained (``data_sha256``, ``initial_weights_sha256``,
    ``num_parameters``), or ``None`` when the run has no ok ``single`` record yet."""
    from distbench.results.store import read_records

    if not (Path(run_dir) / "results.jsonl").exists():
        return None
    for r in read_records(run_dir):
        if r.get("strategy") == "single" and r.get("status") == "ok":
            wl = r.get("workload") or {}
            return {"data_sha256": wl.get("data_sha256"), "initial_weights_sha256": r.get("initial_weights_sha256"),
                    "num_parameters": wl.get("num_parameters")}
    return None


def mismatch(doc: dict[str, Any], single: dict[str, Any], run_dir: str | Path) -> str | None:
    """Why calibration ``doc`` does not belong to the run whose ok ``single`` record is
    ``single`` (another workload, global batch or machine), as one line naming the command
    that measures the right one; ``None`` when it belongs (or an older file lacks the fields).

    A compute table is only meaningful next to the rows it is subtracted from: the cost model
    takes each strategy's framework cost as its measured step minus this table's compute.
    """
    fix = f"remove {Path(run_dir) / CALIBRATION_FILE} and run 'distbench calibrate {run_dir}'"
    mine = doc.get("workload") or {}
    wl = single.get("workload") or {}
    theirs = {"data_sha256": wl.get("data_sha256"), "initial_weights_sha256": single.get("initial_weights_sha256"),
              "num_parameters": wl.get("num_parameters")}
    differ = [k for k, v in mine.items() if v is not None and theirs.get(k) is not None and v != theirs[k]]
    said = []  # every difference, not the first only (user test, helper-27)
    if "num_parameters" in differ:
        said.append(f"{mine['num_parameters']:,} parameters against the run's {theirs['num_parameters']:,}")
    said += [f"{k} differs" for k in differ if k != "num_parameters"]
    if doc.get("global_batch") not in (None, single.get("global_batch_size")):
        said.append(f"a global batch of {doc['global_batch']} against the run's {single.get('global_batch_size')}")
    prov = single.get("provenance") or {}
    here = (doc.get("cpu"), doc.get("cores"))
    there = (prov.get("cpu_model"), prov.get("cpu_count"))
    machine = None not in here and None not in there and here != there
    if machine:
        said.append(f"another machine ({here[1]} x {here[0]}) than its runs' ({there[1]} x {there[0]})")
    if not said:
        return None
    return (f"{run_dir}'s calibration was measured for another run ({'; '.join(said)}): the cost model subtracts it "
            f"from the runs' steps; {fix}" + (" on the machine that made the run" if machine else ""))


def no_workload(run_dir: str | Path) -> str:
    """The one line for a run directory without ``workload/`` (the saved model and data the
    compute is measured on): what is missing and the command that makes a run that has it."""
    return (f"{run_dir} holds no workload/ (the run's saved model and data) to measure compute on: make a new "
            f"run and use it: distbench run {run_dir}/config.json --out NEW_RUN_DIR")


def distributed_rows(records: list[dict[str, Any]]) -> str:
    """Where ``records``' ok distributed rows (any strategy but ``single``) ran: ``"none"``
    (there are none), ``"cluster"`` (every one over an emulated cluster's shaped links) or
    ``"one-host"`` (at least one on this host). The cost model calibrates from one-host rows
    only: a ``"none"`` or ``"cluster"`` run cannot calibrate it."""
    multi = [r for r in records if r.get("status") == "ok" and r.get("strategy") != "single"]
    return "none" if not multi else "cluster" if all(r.get("bandwidth") for r in multi) else "one-host"


def ensure(run_dir: str | Path) -> None:
    """Measure the run's compute table (:func:`calibrate`) when it has a workload and results
    and no calibration yet, saying so on stderr; a failure is said there too and left for the
    cost model to name (its error names ``distbench calibrate``)."""
    from distbench.config import ConfigError

    from distbench.results.store import read_records

    rd = Path(run_dir)
    if (rd / CALIBRATION_FILE).exists() or not (rd / "workload").is_dir() or not (rd / "results.jsonl").exists():
        return
    recs = read_records(rd)
    ok = [r for r in recs if r.get("status") == "ok"]
    if not any(r.get("strategy") == "single" for r in ok) or distributed_rows(recs) != "one-host":
        return  # the cost model refuses such a run (naming the command): nothing to calibrate for (helper-25)
    print(f"measuring this machine's compute per step for the cost model (once: {rd / CALIBRATION_FILE}) ...",
          file=sys.stderr, flush=True)
    try:
        calibrate(rd)
    except ConfigError as e:  # the cost model's refusal names it (printing it here too said it twice: helper-36)
        _FAILED[str(rd)] = str(e)


_FAILED: dict[str, str] = {}  # run dir -> why ensure() could not calibrate it, in this process


def failure(run_dir: str | Path) -> str | None:
    """Why :func:`ensure` could not measure ``run_dir``'s calibration in this process (the
    cost model's error names it: user test, helper-35, whose factory could not be imported
    from another folder was told only to run 'distbench calibrate'), or None."""
    return _FAILED.get(str(Path(run_dir)))


def read_calibration(run_dir: str | Path) -> dict[str, Any] | None:
    """``RUN_DIR/calibration.json`` as written by :func:`calibrate`, or ``None`` when absent.

    Raises:
        ValueError: the file exists but is not a calibration document.
    """
    path = Path(run_dir) / CALIBRATION_FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        doc, problem = None, f"not readable JSON: {e}"
    else:
        problem = _calibration_problem(doc)
    if problem:  # user test (helper-25): "('points')", "'>' not supported between 'str' and 'int'"
        raise ValueError(f"{path} is not a calibration file ({problem}); remove it and run 'distbench calibrate "
                         f"{run_dir}' again")
    return doc


def _calibration_problem(doc: Any) -> str:
    """What makes ``doc`` no calibration document, in words; '' when it is one."""
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, expected an object with 'cores' and 'points'"
    if not isinstance(doc.get("points"), list) or not doc["points"]:
        return "no 'points': expected a non-empty list of {threads, batch, step_s}"
    for i, q in enumerate(doc["points"]):
        if not (isinstance(q, dict) and all(number(q.get(k)) for k in ("threads", "batch", "step_s"))):
            return f"point {i} is {json.dumps(q)[:80]}, expected numbers threads, batch and step_s"
        if not (q["step_s"] > 0 and q["batch"] >= 1 and q["threads"] >= 1):
            return f"point {i} is {json.dumps(q)[:80]}: step_s must be > 0, batch and threads >= 1"
    if not number(doc.get("cores")) or doc["cores"] < 1:
        return f"'cores' is {doc.get('cores')!r}, expected the machine's core count"
    if doc.get("global_batch") is not None and not number(doc["global_batch"]):
        return f"'global_batch' is {doc['global_batch']!r}, expected the run's global batch"
    wl = doc.get("workload")  # user test (helper-26): "abc" crashed mismatch, "4810" leaked a format error
    if wl is not None and not (isinstance(wl, dict) and (wl.get("num_parameters") is None or number(
            wl["num_parameters"])) and all(isinstance(wl.get(k), (str, type(None)))
                                           for k in ("data_sha256", "initial_weights_sha256"))):
        return (f"'workload' is {json.dumps(wl)[:80]}, expected {{data_sha256, initial_weights_sha256: text, "
                "num_parameters: a number}")
    return ""


def compute_s(doc: dict[str, Any], batch: float, threads: int) -> float:
    """Seconds of one step at ``batch`` with ``threads`` intra-op threads, from a calibration:
    log-log interpolation between the two nearest measured batches of the nearest measured
    thread count; the smallest batch's time below it, proportional above the largest. A step
    never takes less time for a bigger batch: the points are first made non-decreasing in the
    batch by isotonic regression (scikit-learn's pool-adjacent-violators: the points out of
    order are replaced by their mean), so one noisy point moves its neighbours by a share, not
    every larger batch to its own time.

    Args:
        doc: :func:`read_calibration`'s document.
        batch: per-worker batch, samples (may be fractional).
        threads: intra-op threads of the worker.
    """
    have = sorted({p["threads"] for p in doc["points"]})
    t = min(have, key=lambda x: (abs(x - threads), -x))
    from sklearn.isotonic import IsotonicRegression

    bs, vs = zip(*sorted((p["batch"], p["step_s"]) for p in doc["points"] if p["threads"] == t))
    pts = list(zip(bs, IsotonicRegression(increasing=True).fit_transform(bs, vs).tolist()))
    if batch <= pts[0][0]:
        return pts[0][1]
    if batch >= pts[-1][0]:
        return pts[-1][1] * batch / pts[-1][0]
    for (b0, s0), (b1, s1) in zip(pts, pts[1:]):
        if b0 <= batch <= b1:
            f = math.log(batch / b0) / math.log(b1 / b0)
            return math.exp(math.log(s0) + f * math.log(s1 / s0))
    raise AssertionError("unreachable: batch within the measured range")


def main(argv: list[str]) -> int:
    """Child entry: ``python -m distbench.calibrate RUN_DIR THREADS BATCH...``; prints the points as one JSON line."""
    points = measure(argv[0], int(argv[1]), [int(b) for b in argv[2:]])
    print(json.dumps(points))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

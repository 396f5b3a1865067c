"""What a running sweep shows: each configuration's phase, read from its logs, and an ETA.

The phase comes from the lines every training loop writes (``epoch k/E done``) in the
configuration's log and its per-process logs (``logs/<key>.log`` and ``logs/<key>/``). The ETA adds, over the
configurations still to run, the wall time already measured for the same strategy family
in this sweep, else a typical start-up for the family (:data:`STARTUP_SEED_S`) plus the
training time measured so far.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any, Iterable

from distbench.procinfo import DEFAULT_STARTUP_S, STARTUP_SEED_S

SHARED_NEXT_S = 4.0
"""Typical start-up of a configuration that reuses its family's shared engine (spark_ps,
mpi_ps): no new processes, the framework already imported."""

EPOCH_DONE = re.compile(r"epoch (\d+)/(\d+) done")
KEY_STRATEGY = re.compile(r"^(.*?)_w\d+")  # a key's strategy part (``:`` spelt ``-``)

#: What a family starts before its first epoch.
STARTING = {"spark_ps": "starting Spark", "horovod": "starting horovodrun", "horovod_mpi": "starting mpirun",
            "mpi_ps": "starting mpirun", "multi_worker_mirrored": "starting TensorFlow workers",
            "tf_ps": "starting TensorFlow workers", "keras_jax": "starting JAX"}
_TAIL_BYTES = 32_768


def family(strategy: str) -> str:
    """``spark_ps`` for ``spark_ps:adag``; a plain name is its own family."""
    return strategy.split(":", 1)[0]


def progress_label(point: Any, repeats: int | str) -> str:
    """A configuration as the progress lines name it: the table's name (``spark_ps:adag (2
    workers)``), with ``, repeat r/R`` when the sweep repeats (``, repeat r of at most 3``
    for an extra round of ``repeats = "auto"``).

    Args:
        point: a :class:`~distbench.harness.matrix.ConfigPoint`.
        repeats: the sweep's ``run.repeats`` (an integer or ``"auto"``).
    """
    if isinstance(repeats, str):  # "auto": the first round reads as a sweep without repeats
        from distbench.results.advice import AUTO_MAX_RUNS

        return point.label + (f", repeat {point.repeat + 1} of at most {AUTO_MAX_RUNS}" if point.repeat else "")
    return point.label + (f", repeat {point.repeat + 1}/{repeats}" if repeats > 1 else "")


def result_detail(rec: dict[str, Any]) -> str:
    """What a finished configuration's progress line says after its status:
    ``test acc 0.947, train 0.2 s`` for an ok record, else its reason (one line)."""
    acc, t = rec.get("final_test_accuracy"), (rec.get("timings") or {}).get("train_s")
    if rec.get("status") == "ok" and acc is not None:
        return f"test acc {acc:.3f}" + (f", train {t:.1f} s" if t is not None else "")
    return str(rec.get("reason") or "")


def display_name(key: str) -> str:
    """A record key or config id as users spell the strategy: ``spark_ps-adag_w2_r0`` ->
    ``spark_ps:adag_w2_r0`` (ids write ``:`` as ``-`` to stay safe in file names)."""
    head, sep, rest = key.partition("-")
    return f"{head}:{rest}" if sep and head in STARTUP_SEED_S else key


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def phase(log_dir: Path, key: str) -> str:
    """The phase of the running configuration ``key``, from the tails of its logs under
    ``log_dir``: ``training, epoch k/E`` (the slowest process's next epoch),
    ``evaluating`` once every epoch is done, else the family's start-up phase
    (:data:`STARTING`, e.g. ``starting Spark``; else ``starting``)."""
    files = [log_dir / f"{key}.log"] + sorted(p for p in (log_dir / key).rglob("*") if p.is_file()) \
        if (log_dir / key).is_dir() else [log_dir / f"{key}.log"]
    texts = [_tail(p) for p in files]
    done = [(int(m[-1][0]), int(m[-1][1])) for t in texts for m in [EPOCH_DONE.findall(t)] if m]
    if done:
        k, total = min(done)
        return "evaluating" if k >= total else f"training, epoch {k + 1}/{total}"
    m = KEY_STRATEGY.match(key)
    fam = family(display_name(m.group(1))) if m else ""
    return STARTING.get(fam, "starting")


def eta_s(todo: Iterable[str], finished: Iterable[tuple[str, float, float | None]],
          shared: Iterable[str] = ()) -> float:
    """Seconds the configurations in ``todo`` (their strategy names) should take.

    Args:
        todo: strategy of each configuration still to run (the running one included).
        finished: ``(strategy, wall seconds, start-up seconds or None)`` of each
            configuration finished in this sweep.
        shared: the families whose configurations run on one engine per sweep (``spark_ps``,
            ``mpi_ps`` by default): only the first of them pays the engine's start-up.

    Returns:
        the sum, per configuration, of the median wall time of its family in ``finished``,
        else its family's :data:`STARTUP_SEED_S` plus the median time after start-up of all
        finished configurations (0 before the first). In a shared family the first
        configuration's wall time (the engine's start included) stands only for itself: the
        others count the median of the family's later ones, else :data:`SHARED_NEXT_S` plus
        that median time after start-up.
    """
    shared = set(shared)
    by_family: dict[str, list[float]] = {}
    after_startup: list[float] = []
    for strategy, wall, startup in finished:
        by_family.setdefault(family(strategy), []).append(wall)
        if startup is not None:
            after_startup.append(max(0.0, wall - startup))
    rest = statistics.median(after_startup) if after_startup else 0.0
    total = 0.0
    for strategy in todo:
        fam = family(strategy)
        walls = by_family.get(fam)
        if fam in shared:
            if walls is None:  # this one starts the engine
                total += STARTUP_SEED_S.get(fam, DEFAULT_STARTUP_S) + rest
                by_family[fam] = []
            else:
                total += statistics.median(walls[1:]) if len(walls) > 1 else SHARED_NEXT_S + rest
        else:
            total += statistics.median(walls) if walls else STARTUP_SEED_S.get(fam, DEFAULT_STARTUP_S) + rest
    return total

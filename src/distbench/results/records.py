"""The result record: one JSON object per (configuration, repeat).

Downstream tools rely on :data:`REQUIRED_KEYS`; :func:`new_record` fills every one
(``None`` where not applicable) so a ``failed`` or ``unavailable`` record has the same
shape as an ``ok`` one.
"""

from __future__ import annotations

import time
from typing import Any

from distbench.contracts import Status


STATUSES = tuple(s.value for s in Status)

REQUIRED_KEYS = (
    "run_id", "config_id", "strategy", "workers", "repeat", "status", "reason",
    "global_batch_size", "per_replica_batch_size", "epochs", "initial_weights_sha256",
    "timings", "samples_per_s", "final_test_accuracy", "final_test_loss", "time_to_target_s",
    "curve", "provenance",
)

TIMING_KEYS = ("total_s", "startup_s", "train_s", "eval_s")


def config_id(strategy: str, workers: int, window: int | None = None, bandwidth: str | None = None, *,
              scenario: Any = None) -> str:
    """Identifier of a configuration, safe in file names: ``spark_ps:adag`` with 2
    workers -> ``spark_ps-adag_w2``; with a swept communication window 5 ->
    ``spark_ps-adag_w2_win5``; on emulated links of 100mbit -> ``..._bw100mbit``; under a
    straggler scenario (a :class:`~distbench.scenario.Scenario`) its suffix follows:
    ``horovod_w2_slow2x``."""
    return (f"{strategy.replace(':', '-')}_w{workers}" + (f"_win{window}" if window else "")
            + (f"_bw{bandwidth}" if bandwidth else "") + (scenario.suffix if scenario is not None else ""))


def straggler_text(scenario: dict[str, Any] | None) -> str:
    """A straggler scenario (a record's ``scenario``) in a few characters: ``1x`` (the sweep's
    baseline), ``w1 3x`` (worker 1 three times slower), ``+ jit 0.3`` appended with jitter;
    ``""`` for None (outside a scenario sweep)."""
    if scenario is None:
        return ""
    slow = scenario.get("slowdown", 1.0)
    text = "1x" if scenario.get("worker") is None or slow == 1 else f"w{scenario['worker']} {slow:g}x"
    return text + (f" + jit {scenario['jitter_cv']:g}" if scenario.get("jitter_cv") else "")


def config_label(strategy: str, workers: int, window: int | None = None, bandwidth: str | None = None,
                 scenario: dict[str, Any] | None = None) -> str:
    """How every output names a configuration: the strategy as ``--strategies`` spells it,
    then its settings: ``mirrored (2 workers)``, ``spark_ps:adag (2 workers, window 5)``,
    ``mpi_ps:adag (2 workers, 100mbit links)``, ``horovod (2 workers, w1 3x)``.

    Args:
        strategy: the strategy name (``spark_ps:adag``).
        workers: worker count.
        window: a window sweep's communication window (None outside one).
        bandwidth: an emulated cluster's link rate (tc units), or None.
        scenario: the straggler scenario as a record stores it, or None.
    """
    parts = [f"{workers} worker{'s' if workers != 1 else ''}"]
    if window:
        parts.append(f"window {window}")
    if bandwidth:
        parts.append(f"{bandwidth} links")
    if straggler_text(scenario):
        parts.append(straggler_text(scenario))
    return f"{strategy} ({', '.join(parts)})"


def record_key(cid: str, repeat: int) -> str:
    """Unique key of one record in a run: ``<config_id>_r<repeat>``."""
    return f"{cid}_r{repeat}"


def new_record(run_id: str, strategy: str, workers: int, repeat: int, status: Status | str,
               window: int | None = None, bandwidth: str | None = None, *, scenario: Any = None,
               **fields: Any) -> dict[str, Any]:
    """A record with every required key; ``fields`` override the defaults. Every record of
    distbench is made here (the harness feeds it from ``harness/runner.py:make_record``).

    ``window`` is the communication window of a window sweep, ``bandwidth`` the link rate
    of an emulated cluster and ``scenario`` the straggler
    :class:`~distbench.scenario.Scenario` of a scenario sweep (all part of ``config_id``;
    the record's ``scenario`` field is the scenario's dict, ``None`` outside a sweep).

    Raises:
        ValueError: ``status`` is not a :class:`Status`.
    """
    try:
        status = Status(status).value
    except ValueError:
        raise ValueError(f"status {status!r} is not one of {STATUSES}") from None
    rec: dict[str, Any] = {
        "run_id": run_id,
        "config_id": config_id(strategy, workers, window, bandwidth, scenario=scenario),
        "communication_window": window,
        "bandwidth": bandwidth,
        "hosts": None,
        "scenario": scenario.to_dict() if scenario is not None else None,
        "strategy": strategy,
        "workers": workers,
        "repeat": repeat,
        "status": status,
        "reason": "",
        "log": None,
        "global_batch_size": None,
        "per_replica_batch_size": None,
        "epochs": None,
        "initial_weights_sha256": None,
        "timings": {k: None for k in TIMING_KEYS},
        "steps": None,
        "samples": None,
        "samples_per_s": None,
        "final_test_accuracy": None,
        "final_test_loss": None,
        "time_to_target_s": None,
        "target_accuracy": None,
        "curve": [],
        "details": {},
        "provenance": {},
        "finished_unix": time.time(),
    }
    rec.update(fields)
    return rec


def time_to_target(curve: list[dict[str, Any]], target: float) -> float | None:
    """Seconds since training start at which test accuracy first reached ``target``
    (the first curve point at or above it), or ``None`` if never.

    Args:
        curve: points with ``elapsed_s`` and ``test_accuracy``, in training order.
        target: accuracy in (0, 1].
    """
    for p in curve:
        if p["test_accuracy"] is not None and p["test_accuracy"] >= target:
            return float(p["elapsed_s"])
    return None


def retarget(records: list[dict[str, Any]], target: float) -> list[dict[str, Any]]:
    """Copies of ``records`` scored against another target accuracy: ``target_accuracy``
    set to ``target`` and each ok record's ``time_to_target_s`` recomputed from its curve
    (:func:`time_to_target`); the records themselves are not changed.

    Args:
        records: run records.
        target: test accuracy in (0, 1].

    Raises:
        ValueError: ``target`` outside (0, 1].
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"--target-accuracy {target}: expected a test accuracy in (0, 1], e.g. 0.85")
    out = []
    for r in records:
        r = {**r, "target_accuracy": target}
        if r.get("status") == "ok":
            r["time_to_target_s"] = time_to_target(r.get("curve") or [], target)
        out.append(r)
    return out

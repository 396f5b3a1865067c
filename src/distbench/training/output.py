"""The child-process contract: what a configuration's process hands back to the harness.

A configuration's process leaves, in its artifacts directory, one ``result.json`` written
by :func:`write_child_result` (and nowhere else): ``status`` (a
:class:`~distbench.results.records.Status`), and either the :class:`TrainOutput` (final
weights and per-epoch snapshots in ``.npz`` files, never pickled) or the ``reason``,
``failed_process`` and ``details`` of a failure. Strategies signal failure by raising
:class:`TrainingFailed`. :func:`read_child_result` is the harness's side.

Snapshots are taken at each epoch end; the time spent copying weights is measured and
excluded from the training clock (docs/architecture.md, the fairness contract), so
``elapsed_s`` of a snapshot is pure training time since the first step began.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from distbench.contracts import Status, TrainingFailed  # noqa: F401 (TrainingFailed: re-exported)

RESULT_FILE = "result.json"
FINAL_FILE = "final_weights.npz"
SNAPS_FILE = "snapshots.npz"


@dataclass
class ChildResult:
    """What :func:`read_child_result` found: the status and either the output or the failure.

    Attributes:
        status: :class:`~distbench.results.records.Status`.
        output: the :class:`TrainOutput` when ``ok``.
        reason, failed_process, details: of a failure or an unavailability.
    """

    status: Status
    output: "TrainOutput | None" = None
    reason: str = ""
    failed_process: str | None = None
    details: dict[str, Any] | None = None


def write_child_result(directory: Path, status: Status, output: "TrainOutput | None" = None, *, reason: str = "",
                       failed_process: str | None = None, details: dict[str, Any] | None = None) -> None:
    """Write a configuration's result into ``directory`` (atomically: a reader never sees half).

    Args:
        status: ``ok`` with ``output``; ``failed`` or ``unavailable`` with a ``reason``.
        output: the training output (its arrays go to ``.npz`` files next to ``result.json``).
        reason, failed_process, details: of a failure.

    Raises:
        ValueError: ``ok`` without an output.
    """
    directory.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"status": Status(status).value}
    if status == Status.OK:
        if output is None:
            raise ValueError("an ok result needs its TrainOutput")
        np.savez(directory / FINAL_FILE, **{f"w{i}": w for i, w in enumerate(output.final_weights)})
        np.savez(directory / SNAPS_FILE, **{f"s{k}_w{i}": w for k, s in enumerate(output.snapshots)
                                             for i, w in enumerate(s.weights)})
        meta.update({k: v for k, v in asdict(output).items() if k not in ("final_weights", "snapshots")})
        meta["num_weights"] = len(output.final_weights)
        meta["snapshots"] = [{"elapsed_s": s.elapsed_s, "epoch": s.epoch, "step": s.step, "data_epochs": s.data_epochs}
                             for s in output.snapshots]
    else:
        meta.update(reason=reason, failed_process=failed_process, details=details)
    tmp = directory / f"{RESULT_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(meta, default=_jsonable))
    tmp.replace(directory / RESULT_FILE)


def read_child_result(directory: Path) -> ChildResult | None:
    """Read what :func:`write_child_result` left in ``directory``; None when nothing (readable) is there.

    Raises:
        OSError, ValueError, KeyError: an ``ok`` result whose weight files are missing or corrupt.
    """
    try:
        meta = json.loads((directory / RESULT_FILE).read_text())
        status = Status(meta.get("status"))
    except (OSError, ValueError):
        return None
    if status == Status.OK:
        return ChildResult(status, TrainOutput.load(directory))
    return ChildResult(status, None, meta.get("reason") or "", meta.get("failed_process"), meta.get("details"))


@dataclass
class Snapshot:
    """Weights at one point of training.

    Attributes:
        elapsed_s: training seconds since the first step began (snapshot time excluded).
        epoch: epochs completed (1-based) when taken.
        step: optimizer steps completed when taken (this replica's, or the centre's clock).
        weights: list of float32 arrays, same shapes as the model's weights.
        data_epochs: passes over its data each replica had made in the updates these weights
            hold, where that is not ``epoch``: a parameter server's centre, which changes only
            at commits or barrier rounds (window 32 against 13 steps per epoch: the centre
            taken for epoch 1 holds 2.46 epochs of each replica's data); ``None`` otherwise.
    """

    elapsed_s: float
    epoch: int
    step: int
    weights: list[np.ndarray]
    data_epochs: float | None = None


class SnapshotRecorder:
    """Keeps the training clock and the snapshots of one training run."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.first_step_unix: float | None = None
        self.paused = 0.0
        self.snapshots: list[Snapshot] = []
        self.t_end: float | None = None

    def start(self) -> None:
        """Mark the start of the first training step."""
        self.t0 = time.perf_counter()
        self.first_step_unix = time.time()

    def elapsed(self) -> float:
        """Training seconds so far (snapshot time excluded)."""
        if self.t0 is None:
            return 0.0
        end = self.t_end if self.t_end is not None else time.perf_counter()
        return end - self.t0 - self.paused

    def off_clock(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` with the clock paused (its time is excluded from training time, as a
        snapshot's is); return its result."""
        t = time.perf_counter()
        try:
            return fn()
        finally:
            self.paused += time.perf_counter() - t

    def take(self, epoch: int, step: int, get_weights: Callable[[], list[Any]]) -> None:
        """Record a snapshot; the time ``get_weights`` takes is excluded from the clock."""
        t = time.perf_counter()
        elapsed = t - (self.t0 or t) - self.paused
        weights = [np.array(w, dtype=np.float32, copy=True) for w in get_weights()]
        self.snapshots.append(Snapshot(elapsed, epoch, step, weights))
        self.paused += time.perf_counter() - t

    def stop(self) -> float:
        """Stop the clock; return the training seconds."""
        self.t_end = time.perf_counter()
        return self.elapsed()


@dataclass
class TrainOutput:
    """What a strategy returns to the harness after training.

    Attributes:
        final_weights: trained weights (for PS strategies: the centre variable).
        snapshots: per-epoch snapshots (see :class:`Snapshot`).
        train_s: training seconds, first step to end, snapshots excluded.
        first_step_unix: wall-clock time (Unix seconds) the first step began.
        steps: optimizer steps run (per replica, or applied to the centre).
        samples: training samples processed by all replicas together.
        replicas: number of replicas that trained.
        extra: strategy-specific record fields (devices, threads, staleness, bytes...).
    """

    final_weights: list[np.ndarray]
    snapshots: list[Snapshot]
    train_s: float
    first_step_unix: float
    steps: int
    samples: int
    replicas: int
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, directory: Path) -> None:
        """Write this output as an ``ok`` child result (see :func:`write_child_result`)."""
        write_child_result(directory, Status.OK, self)

    @classmethod
    def load(cls, directory: Path) -> "TrainOutput":
        """Read what :meth:`save` wrote.

        Raises:
            OSError, ValueError, KeyError: missing or corrupt files.
        """
        meta = json.loads((directory / RESULT_FILE).read_text())
        n = meta["num_weights"]
        with np.load(directory / FINAL_FILE, allow_pickle=False) as z:
            final = [z[f"w{i}"] for i in range(n)]
        snaps = []
        with np.load(directory / SNAPS_FILE, allow_pickle=False) as z:
            for k, s in enumerate(meta["snapshots"]):
                snaps.append(Snapshot(s["elapsed_s"], s["epoch"], s["step"], [z[f"s{k}_w{i}"] for i in range(n)],
                                      s.get("data_epochs")))
        return cls(final, snaps, meta["train_s"], meta["first_step_unix"], meta["steps"],
                   meta["samples"], meta["replicas"], meta.get("extra", {}))


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)

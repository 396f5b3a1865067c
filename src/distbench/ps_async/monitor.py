"""Snapshots of the centre variable while a parameter-server run trains.

The driver cannot stop the replicas to take a snapshot, so the server keeps the centre as
it is right after the update that brings its logical clock to each epoch boundary
(``e * total_updates / epochs`` updates for e = 1..epochs; :meth:`ParameterServer.snapshot_at
<distbench.ps_async.server.ParameterServer.snapshot_at>`), and :class:`CentreMonitor` copies
them out when training ends: off the replicas' training clock, and exactly at the boundary
whatever the load (a thread polling the clock saw a boundary a few updates late on a busy
machine, so a synchronous run's curve could differ between two identical runs).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from distbench.contracts import SyncKind


class CentreMonitor:
    """The centre at each epoch boundary of a parameter-server run.

    Args:
        server: a started :class:`~distbench.ps_async.server.ParameterServer`.
        total_updates: updates the centre will receive in the whole run (commits of all
            workers for async optimizers, barrier rounds for sync ones).
        epochs: number of epochs (snapshots).

    Attributes:
        snapshots: ``(unix_time, epoch, clock, weights)`` tuples in order, filled by :meth:`stop`.
    """

    def __init__(self, server: Any, total_updates: int, epochs: int) -> None:
        self.server = server
        self.thresholds = [math.ceil(e * total_updates / epochs) for e in range(1, epochs + 1)]
        self.snapshots: list[tuple[float, int, int, list[np.ndarray]]] = []

    def start(self) -> "CentreMonitor":
        """Ask the server for the epoch boundaries' centres; returns ``self``."""
        self.server.snapshot_at(self.thresholds)
        return self

    def stop(self) -> None:
        """Collect the boundaries' centres; a boundary the run never reached (it ended early
        or diverged) gets the centre as training left it, with the clock it had."""
        taken = self.server.snapshots_taken()
        for e, clock in enumerate(self.thresholds, 1):
            if clock in taken:
                t, weights = taken[clock]
                self.snapshots.append((t, e, clock, weights))
            else:
                self.snapshots.append((time.time(), e, self.server.clock, self.server.center()))


def centre_output(spec: Any, results: list[dict[str, Any]], snapshots: list[tuple[float, int, int, list[np.ndarray]]],
                  stats: dict[str, Any], centre: list[np.ndarray], extra: dict[str, Any]) -> Any:
    """The :class:`~distbench.training.TrainOutput` of a parameter-server run, whatever
    its engine.

    Args:
        spec: the run's :class:`~distbench.ps_async.worker.ReplicaSpec`.
        results: each replica's result of :func:`~distbench.ps_async.worker.train_replica`.
        snapshots: :attr:`CentreMonitor.snapshots`.
        stats: the server's :meth:`~distbench.ps_async.server.ParameterServer.stats`.
        centre: the final centre variable.
        extra: engine-specific record fields (``engine``, master, executors...).

    Training time runs from the first replica's first step to the last replica's last
    exchange; snapshot times are clipped to it. When a replica diverged (its result's
    ``diverged``), the record's ``details`` say so and the curve keeps only the epochs the
    centre reached, plus the centre where training stopped (not the epochs never trained).
    """
    from distbench.training import Snapshot, TrainOutput

    t0 = min(r["start_unix"] for r in results)
    t1 = max(r["end_unix"] for r in results)
    diverged = [r["diverged"] for r in results if r.get("diverged")]
    if diverged:  # keep the epochs the centre reached, and the centre where training stopped
        total, epochs = updates_expected(spec), spec.training.epochs
        done = [s[2] >= math.ceil(s[1] * total / epochs) for s in snapshots]
        snapshots = [s for s, d in zip(snapshots, done) if d] + [s for s, d in zip(snapshots, done) if not d][:1]
    snaps = [Snapshot(max(0.0, min(t, t1) - t0), e, clock, w, data_epochs(spec, clock))
             for t, e, clock, w in snapshots]
    steps = sum(r["steps"] for r in results)
    from distbench.ps_async.rules import get_optimizer

    p = spec.params
    local_sgd = get_optimizer(spec.optimizer).local_sgd
    fields = {
        "local_learning_rate": local_sgd(p)["learning_rate"] if local_sgd else None,
        "ps_optimizer": spec.optimizer, "communication_window": p["communication_window"],
        "rho": p.get("rho"), "ps_learning_rate": p.get("learning_rate"), "alpha": p.get("alpha"),
        "momentum": p.get("momentum"),
        "commits": stats.get("commits"), "pulls": stats.get("pulls"), "sync_rounds": stats.get("sync_rounds"),
        "bytes_received": stats.get("bytes_received"), "bytes_sent": stats.get("bytes_sent"),
        "rejected": stats.get("rejected"), "duplicate_commits": stats.get("duplicate_commits"),
        "staleness": stats.get("staleness"), "per_worker_steps": [r["steps"] for r in results],
        "per_worker_exchanges": [r["exchanges"] for r in results], "centre_clock": stats.get("clock"),
        "per_worker_attempts": [r.get("attempt", 0) for r in results],
        "per_worker_train_s": [r["end_unix"] - r["start_unix"] for r in results],
        **({"step_delays": {r["worker"]: r["step_delay"] for r in results if r.get("step_delay")}}
           if any(r.get("step_delay") for r in results) else {}),
        "per_worker_netns": [r.get("netns") for r in results],
        "per_worker_devices": [r.get("device") for r in results],
        "per_worker_hosts": [r.get("host") for r in results],
        "applied_commit_keys": stats.get("applied_commit_keys"), "server_busy_s": stats.get("server_busy_s"),
        **({"diverged": "; ".join(diverged)} if diverged else {}),
        **({"stopped_replicas": {r["worker"]: r["stopped"] for r in results if r.get("stopped")}}
           if any(r.get("stopped") for r in results) else {}),
        "threads_per_replica": spec.threads, "per_replica_batch_size": spec.per_replica_batch,
        **extra,
    }
    return TrainOutput([np.asarray(c, np.float32) for c in centre], snaps, t1 - t0, t0, steps=steps,
                       samples=steps * spec.per_replica_batch, replicas=spec.num_workers, extra=fields)


def data_epochs(spec: Any, clock: int) -> float:
    """Passes over its shard each replica had made in the updates a centre at ``clock`` holds:
    ``clock / N`` commits each (async; ``clock`` barrier rounds, sync), each covering a
    communication window of steps (the last one the rest), over the steps of an epoch. The
    replicas commit in any order, so for an async optimizer this is their mean."""
    from distbench.ps_async.rules import OPTIMIZERS

    total = spec.steps_per_epoch * spec.training.epochs
    w = spec.params["communication_window"] or spec.steps_per_epoch  # None: once per epoch
    each = clock / (spec.num_workers if OPTIMIZERS[spec.optimizer].kind == SyncKind.ASYNC else 1)
    return round(min(total, each * w) / spec.steps_per_epoch, 4)


def updates_expected(spec: Any) -> int:
    """Updates the centre receives in a whole run: commits of all replicas (async) or
    barrier rounds (sync)."""
    from distbench.ps_async.rules import OPTIMIZERS

    return spec.exchanges() * (spec.num_workers if OPTIMIZERS[spec.optimizer].kind == SyncKind.ASYNC else 1)

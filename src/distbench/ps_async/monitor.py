"""Snapshots of the centre variable while a parameter-server run trains.

The driver cannot stop the replicas to take a snapshot, so :class:`CentreMonitor`
polls the server's logical clock in a thread and copies the centre each time the clock
crosses an epoch boundary (``e * total_updates / epochs`` updates for e = 1..epochs).
Copying happens on the driver, off the replicas' training clock.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from distbench.contracts import SyncKind


class CentreMonitor:
    """Polls ``server.clock`` and snapshots ``server.center()`` at epoch boundaries.

    Args:
        server: a started :class:`~distbench.ps_async.server.ParameterServer`.
        total_updates: updates the centre will receive in the whole run (commits of all
            workers for async optimizers, barrier rounds for sync ones).
        epochs: number of epochs (snapshots).
        poll_s: polling interval, seconds.

    Attributes:
        snapshots: ``(unix_time, epoch, clock, weights)`` tuples in order.
    """

    def __init__(self, server: Any, total_updates: int, epochs: int, poll_s: float = 0.01) -> None:
        self.server = server
        self.thresholds = [math.ceil(e * total_updates / epochs) for e in range(1, epochs + 1)]
        self.poll_s = poll_s
        self.snapshots: list[tuple[float, int, int, list[np.ndarray]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="distbench-centre-monitor", daemon=True)

    def start(self) -> "CentreMonitor":
        """Start polling in a daemon thread; returns ``self``."""
        self._thread.start()
        return self

    def _take(self, epoch: int) -> None:
        clock = self.server.clock
        self.snapshots.append((time.time(), epoch, clock, self.server.center()))

    def _run(self) -> None:
        nxt = 0
        while nxt < len(self.thresholds) and not self._stop.is_set():
            if self.server.clock >= self.thresholds[nxt]:
                self._take(nxt + 1)
                nxt += 1
                continue
            time.sleep(self.poll_s)

    def stop(self) -> None:
        """Stop polling; snapshot any epoch boundary not yet taken (the run ended)."""
        self._stop.set()
        self._thread.join()
        for e in range(len(self.snapshots) + 1, len(self.thresholds) + 1):
            self._take(e)


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
    snaps = [Snapshot(max(0.0, min(t, t1) - t0), e, clock, w) for t, e, clock, w in snapshots]
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
        "applied_commit_keys": stats.get("applied_commit_keys"),
        **({"diverged": "; ".join(diverged)} if diverged else {}),
        **({"stopped_replicas": {r["worker"]: r["stopped"] for r in results if r.get("stopped")}}
           if any(r.get("stopped") for r in results) else {}),
        "threads_per_replica": spec.threads, "per_replica_batch_size": spec.per_replica_batch,
        **extra,
    }
    return TrainOutput([np.asarray(c, np.float32) for c in centre], snaps, t1 - t0, t0, steps=steps,
                       samples=steps * spec.per_replica_batch, replicas=spec.num_workers, extra=fields)


def updates_expected(spec: Any) -> int:
    """Updates the centre receives in a whole run: commits of all replicas (async) or
    barrier rounds (sync)."""
    from distbench.ps_async.rules import OPTIMIZERS

    return spec.exchanges() * (spec.num_workers if OPTIMIZERS[spec.optimizer].kind == SyncKind.ASYNC else 1)

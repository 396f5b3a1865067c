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

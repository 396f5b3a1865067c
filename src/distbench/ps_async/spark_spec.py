"""Spark checks made at run time, before a Spark engine's session starts: whether the
master and ``[spark] conf`` hold the barrier stage's replicas, and whether a cluster master
can be reached. The parsing and the checks that need nothing but the config are in
:mod:`distbench.config.spark`.

Pure Python: nothing here imports pyspark or starts a JVM.
"""

from __future__ import annotations

import socket

from distbench.contracts import TrainingFailed
from distbench.config.spark import Master, planned_slots, slots_message


class SparkSpecError(TrainingFailed):
    """A Spark spec that cannot run as given (too few barrier slots, an unreachable master,
    a session that does not start); the message is one line naming the spec and the fix."""



def check_planned_slots(master: Master, conf: dict[str, str], replicas: int) -> None:
    """Fail before any session or data exists when the master and conf cannot hold
    ``replicas`` barrier tasks at once (see :func:`planned_slots`).

    Raises:
        SparkSpecError: too few slots; the message names them and how they were counted.
    """
    slots = planned_slots(master, conf)
    if slots is not None and slots.count < replicas:
        raise SparkSpecError(slots_message(master.url, slots.count, slots.how, replicas, slots.exact))


def probe_master(master: Master, timeout_s: float = 3.0) -> None:
    """Check that a standalone master (any of its hosts) or the Kubernetes API server
    accepts a TCP connection within ``timeout_s``; local masters and yarn pass.

    Raises:
        SparkSpecError: no endpoint answered; names the master and each endpoint's error.
    """
    errors = []
    for host, port in master.endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as e:
            why = "no answer" if isinstance(e, TimeoutError) else e.strerror or type(e).__name__
            errors.append(f"{host}:{port}: {why}")
    if errors:
        raise SparkSpecError(f"Spark master {master.url!r} is unreachable ({'; '.join(errors)}, "
                             f"{timeout_s:g} s connect timeout): start it or fix [spark] master")

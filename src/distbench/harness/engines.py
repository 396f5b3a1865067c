"""The sweep's shared engine, chosen per configuration: :func:`engine_for` starts (or
reuses) the one Spark or MPI engine a configuration runs on, :func:`close_engines` stops
it. Above :mod:`~distbench.harness.shared_engine` (the base class) and its two subclasses,
so that the base never imports them.
"""

from __future__ import annotations

import os
import time
from typing import Any

from distbench.harness.shared_engine import SharedEngine


_RUNNING: list[tuple[tuple[Any, ...], SharedEngine]] = []
"""The sweep's running shared engine with its key; at most one."""


def _engine_key(workload: Any, point: Any) -> tuple[Any, ...] | None:
    """The shared engine ``point`` runs on (Spark: master, threads per replica; MPI: ranks,
    threads per rank), or None when it runs in its own child process."""
    from distbench.cluster.placement import Placement
    from distbench.strategies import registry
    from distbench.training.loop import threads_per_process

    cfg = workload.config
    family = registry.family_of(point.strategy)
    threads = threads_per_process(cfg.training.threads, point.workers)
    if Placement.from_config(cfg.cluster).is_local:
        if family == "spark_ps" and cfg.spark.share_session:
            return ("spark", cfg.spark.master or f"local[{point.workers}]", threads)
        if family == "mpi_ps" and cfg.mpi.share_engine:
            return ("mpi", point.workers + 1, threads)
    return None


def stop_unless_reused(workload: Any, point: Any) -> bool:
    """Stop the running shared engine unless ``point`` runs on it; True when it does.

    The sweep calls this before it starts ``point``'s clock (its spawn time): stopping the
    previous engine (seconds for Spark) belongs to no configuration's start-up.
    """
    key = _engine_key(workload, point)
    if _RUNNING and _RUNNING[0][0] == key and _RUNNING[0][1].alive:
        return True
    close_engines()
    return False


def engine_for(workload: Any, point: Any) -> SharedEngine | None:
    """The running shared engine for ``point`` (a :class:`~distbench.harness.matrix.ConfigPoint`
    of ``workload``'s sweep), started when needed, or None when ``point`` runs in its own
    child process: a strategy no engine runs, sharing turned off (``[spark]
    share_session``, ``[mpi] share_engine``), or a cluster (``[cluster]``). A running
    engine with another key (or none needed) is stopped first.

    Keys: Spark (master, threads per replica); MPI (ranks, threads per rank).
    """
    run_dir = workload.run_dir
    key = _engine_key(workload, point)
    if stop_unless_reused(workload, point):
        return _RUNNING[0][1]
    if key is None:
        return None
    log = run_dir / "logs" / f"{key[0]}-engine-{time.strftime('%H%M%S')}-{os.getpid()}.log"
    engine: SharedEngine
    if key[0] == "spark":
        from distbench.harness.spark_engine import SharedSparkEngine

        engine = SharedSparkEngine(run_dir, key[1], log)
    else:
        from distbench.harness.mpi_engine import SharedMPIEngine

        engine = SharedMPIEngine(run_dir, key[1], log)
    _RUNNING.append((key, engine.start()))
    return engine


def close_engines() -> None:
    """Stop the sweep's shared engine, if one runs (it ends its session; whatever lingers
    is killed)."""
    while _RUNNING:
        _RUNNING.pop()[1].close()

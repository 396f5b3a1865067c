"""One Spark application shared by a sweep's ``spark_ps`` configurations.

Starting Spark is most of a small ``spark_ps`` configuration's wall time: a JVM, a
SparkSession, and Python workers that import TensorFlow before the first replica runs.
With ``[spark] share_session = true`` (the default) ``distbench run`` starts one
*engine* process per (Spark master, threads per replica) and sends it the sweep's
``spark_ps`` configurations one at a time; the engine keeps its SparkSession, so Spark's
Python workers (``spark.python.worker.reuse``, on by default) keep TensorFlow imported
between configurations.

What is still fresh per configuration (so sharing cannot bias the comparison): its own
parameter server (new port, new secret), its own Spark job, the replicas' models built
from the run's saved initial weights with new optimizer state, the same data shards, and
its own training clock, which starts at the first step as always. What is shared: the JVM,
the SparkSession and the Python worker processes (with their imported modules and
TensorFlow's thread pools, which is why the thread count is part of the engine's key).

The request and reply protocol, the timeout and what happens when the engine dies:
:mod:`distbench.harness.shared_engine`. Requests go to the engine's stdin, replies come
back on a pipe descriptor; the engine's stdout and stderr (Spark's and TensorFlow's logs)
go to ``logs/spark-engine-<n>.log``; on its death or a timeout the engine's whole process
group (JVM and Python workers included) is killed.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import click

from distbench.contracts import EngineReply, EngineRequest
from distbench.harness.shared_engine import SharedEngine
from distbench.launch import commands, process

ENGINE_ENTRY = "spark-engine"


class SharedSparkEngine(SharedEngine):
    """The parent's handle on one Spark engine process (see the module docstring).

    Args:
        run_dir: the run directory (the engine loads its workload).
        master: the Spark master for the session (``local[N]``, ``spark://...``).
        log: the engine's log file.
    """

    kind = "Spark engine"

    def __init__(self, run_dir: Path, master: str, log: Path) -> None:
        super().__init__(run_dir, log)
        self.master = master

    def _spawn(self, log: IO[bytes]) -> None:
        """Start ``distbench worker spark-engine`` in its own process group: requests on its
        stdin, replies on a pipe it inherits."""
        r, w = os.pipe()
        argv = commands.worker_argv(ENGINE_ENTRY, self.run_dir, ("--master", self.master), ("--reply-fd", w))
        try:
            self.proc = subprocess.Popen(argv, env=commands.child_env(), stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, pass_fds=(w,), start_new_session=True,
                                         preexec_fn=process._die_with_parent)
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
        self._requests, self._reply = self.proc.stdin, r


def engine_main(run_dir: Path, master: str, reply_fd: int) -> int:
    """The engine process (``distbench worker spark-engine``): one SparkSession, then one
    configuration per request line on stdin, until stdin closes.

    Each configuration runs as the ``config`` child would run it (its result, output or
    failure, written to its artifacts directory); its ``phase_marks`` say when the
    request arrived, so its record's phases count only its own time (the first one also
    pays for this process's start and the session's).
    """
    from distbench.cluster.placement import Placement
    from distbench.harness.child import artifacts_dir, run_configuration
    from distbench.ps_async import spark as engine
    from distbench.config.spark import parse_master
    from distbench.ps_async.spark_spec import check_planned_slots
    from distbench.config.scenario import Scenario
    from distbench.strategies import registry
    from distbench.strategies.base import LaunchContext
    from distbench.workload import Workload

    entered = time.time()
    process.install_cleanup_handler()
    workload = Workload.load(run_dir, cached=True)
    loaded = time.time()
    cfg = workload.config
    spark: Any = None
    first = True

    def train(req: EngineRequest, art: Path) -> Any:
        nonlocal spark
        key, workers = req.key, req.workers
        if spark is None:
            check_planned_slots(parse_master(master), dict(cfg.spark.conf), workers)
            spark = engine.make_session(master, dict(cfg.spark.conf))
        print(f"distbench spark engine: {key}", flush=True)
        ctx = LaunchContext(workload, run_dir, key, workers, art, run_dir / "logs" / key, cfg.run.timeout_s,
                            req.window, scenario=Scenario.from_arg(req.scenario),
                            placement=Placement.from_config(cfg.cluster))
        return registry.get(req.strategy).train_on_session(spark, ctx)

    try:
        for line in sys.stdin:
            req = EngineRequest.from_line(line)
            got = time.time()
            marks = ({"child_start_unix": entered, "workload_unix": loaded} if first
                     else {"child_start_unix": got, "workload_unix": got})
            first = False
            art = artifacts_dir(run_dir, req.key)
            # a configuration that fails is recorded so; the engine goes on with the next one
            run_configuration(art, marks, functools.partial(train, req, art), {"spark_session": "shared"})
            os.write(reply_fd, EngineReply(req.key).to_line())
    finally:
        if spark is not None:
            spark.stop()
    return 0


@click.command(ENGINE_ENTRY, hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--master", required=True)
@click.option("--reply-fd", required=True, type=int)
def engine_command(run_dir: str, master: str, reply_fd: int) -> None:
    """The shared Spark engine of a sweep (started by 'distbench run'; see distbench.harness.spark_engine)."""
    sys.exit(engine_main(Path(run_dir), master, reply_fd))

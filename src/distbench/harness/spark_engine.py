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

Parent and engine talk over two pipes, one JSON object per line: the request
``{"key", "strategy", "workers", "window", "spawn_unix", "scenario"}`` on the engine's stdin, and
``{"key"}`` on a reply descriptor once the configuration's result is written to its
artifacts directory (:func:`~distbench.training.output.write_child_result`), as a child
process's would be. The engine's stdout and stderr (Spark's and TensorFlow's logs) go to
``logs/spark-engine-<n>.log``. If the engine dies or a configuration runs past its
timeout, the engine's whole process group (JVM and Python workers included) is killed,
that configuration's record says so, and the next configuration starts a fresh engine.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from distbench.launch import commands, process

ENGINE_ENTRY = "spark-engine"


@dataclass
class EngineResult:
    """What the parent learned about one configuration sent to an engine.

    Attributes:
        ok: the engine answered (the child result is in the artifacts directory).
        timed_out: the configuration ran past its timeout (the engine was killed).
        reason: why there is no answer (the engine died, with its exit, or timed out).
        elapsed_s: seconds from sending the request to the answer (or the failure).
    """

    ok: bool
    timed_out: bool
    reason: str
    elapsed_s: float


class SharedSparkEngine:
    """The parent's handle on one engine process (see the module docstring).

    Args:
        run_dir: the run directory (the engine loads its workload).
        master: the Spark master for the session (``local[N]``, ``spark://...``).
        log: the engine's log file.
    """

    def __init__(self, run_dir: Path, master: str, log: Path) -> None:
        self.run_dir, self.master, self.log = run_dir, master, log
        self.proc: subprocess.Popen[bytes] | None = None
        self._reply: int = -1
        self._buf = b""
        self.started_unix = 0.0

    def start(self) -> "SharedSparkEngine":
        """Start the engine process in its own process group (killed with the sweep)."""
        r, w = os.pipe()
        argv = commands.worker_argv(ENGINE_ENTRY, self.run_dir, ("--master", self.master), ("--reply-fd", w))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, env=commands.child_env(), stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, pass_fds=(w,), start_new_session=True,
                                         preexec_fn=process._die_with_parent)
        os.close(w)
        self._reply = r
        process._live_groups.add(self.proc.pid)
        self.started_unix = time.time()
        return self

    @property
    def alive(self) -> bool:
        """The engine process is running."""
        return self.proc is not None and self.proc.poll() is None

    def run(self, key: str, strategy: str, workers: int, window: int | None, spawn_unix: float,
            timeout_s: float, scenario: Any = None) -> EngineResult:
        """Send one configuration and wait for its answer, at most ``timeout_s`` seconds
        (``scenario``: its straggler :class:`~distbench.scenario.Scenario`, or None).

        On a timeout or the engine's death the engine is stopped (:meth:`close`); the
        caller starts a new one for the next configuration.
        """
        t0 = time.monotonic()
        req = {"key": key, "strategy": strategy, "workers": workers, "window": window, "spawn_unix": spawn_unix,
               "scenario": scenario.to_arg() if scenario is not None else None}
        if self.proc is None or self.proc.stdin is None:
            return self._failed(t0, False)
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:  # BrokenPipeError: the engine is gone
            return self._failed(t0, True)
        while True:
            left = timeout_s - (time.monotonic() - t0)
            if left <= 0:
                self.close(grace_s=2.0)
                return EngineResult(False, True, f"timed out after {timeout_s:.0f} s (the shared Spark engine "
                                    "was stopped; the next configuration starts a new one)", time.monotonic() - t0)
            ready, _, _ = select.select([self._reply], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self._reply, 4096)
                if not chunk:
                    return self._failed(t0, True)
                self._buf += chunk
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    if json.loads(line).get("key") == key:
                        return EngineResult(True, False, "", time.monotonic() - t0)
            elif not self.alive:
                return self._failed(t0, True)

    def _failed(self, t0: float, died: bool) -> EngineResult:
        rc = None
        if self.proc is not None and died:
            try:  # its reply pipe closes a moment before the kernel reports the exit
                rc = self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                rc = None
        self.close(grace_s=1.0)
        how = process.describe_exit(rc) if rc is not None else "stopped answering"
        return EngineResult(False, False, f"the shared Spark engine (pid {self.proc.pid if self.proc else '?'}) "
                            f"{'died' if died else 'could not take the configuration'}: {how}; the next "
                            "configuration starts a new one", time.monotonic() - t0)

    def close(self, grace_s: float = 10.0) -> None:
        """End the engine: close its stdin (it stops its session and exits), then kill its
        process group if it is still there after ``grace_s``."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        process.terminate_groups([self.proc.pid], grace_s=1.0)
        if self._reply >= 0:
            os.close(self._reply)
            self._reply = -1


def engine_main(run_dir: Path, master: str, reply_fd: int) -> int:
    """The engine process (``distbench worker spark-engine``): one SparkSession, then one
    configuration per request line on stdin, until stdin closes.

    Each configuration runs as the ``config`` child would run it (its result, output or
    failure, written to its artifacts directory); its ``phase_marks`` say when the
    request arrived, so its record's phases count only its own time (the first one also
    pays for this process's start and the session's).
    """
    from distbench.cluster.placement import Placement
    from distbench.harness.runner import PHASE_MARKS, artifacts_dir, failure_reason
    from distbench.ps_async import spark as engine
    from distbench.ps_async.spark_spec import check_planned_slots, parse_master
    from distbench.results.records import Status
    from distbench.scenario import Scenario
    from distbench.strategies import registry
    from distbench.strategies.base import LaunchContext, StrategyUnavailable
    from distbench.training.output import TrainingFailed, write_child_result
    from distbench.workload import Workload

    entered = time.time()
    process.install_cleanup_handler()
    workload = Workload.load(run_dir)
    loaded = time.time()
    cfg = workload.config
    spark: Any = None
    first = True
    try:
        for line in sys.stdin:
            req = json.loads(line)
            got = time.time()
            marks = ({"child_start_unix": entered, "workload_unix": loaded} if first
                     else {"child_start_unix": got, "workload_unix": got})
            first = False
            key, workers = req["key"], int(req["workers"])
            art = artifacts_dir(run_dir, key)
            art.mkdir(parents=True, exist_ok=True)
            try:
                if spark is None:
                    check_planned_slots(parse_master(master), dict(cfg.spark.conf), workers)
                    spark = engine.make_session(master, dict(cfg.spark.conf))
                print(f"distbench spark engine: {key}", flush=True)
                ctx = LaunchContext(workload, run_dir, key, workers, art, run_dir / "logs" / key, cfg.run.timeout_s,
                                    req.get("window"), scenario=Scenario.from_arg(req.get("scenario")),
                                    placement=Placement.from_config(cfg.cluster))
                out = registry.get(req["strategy"]).train_on_session(spark, ctx)
                marks["launch_end_unix"] = time.time()
                out.extra[PHASE_MARKS] = marks
                out.extra["spark_session"] = "shared"
                write_child_result(art, Status.OK, out)
            except StrategyUnavailable as e:
                write_child_result(art, Status.UNAVAILABLE, reason=str(e))
            except Exception as e:  # recorded as failed; the engine goes on with the next one
                traceback.print_exc()
                failed = e if isinstance(e, TrainingFailed) else None
                write_child_result(art, Status.FAILED, reason=failure_reason(e),
                                   failed_process=failed.failed_process if failed else None,
                                   details=failed.details if failed else None)
            os.write(reply_fd, (json.dumps({"key": key}) + "\n").encode())
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

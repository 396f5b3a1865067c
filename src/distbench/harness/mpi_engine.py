"""One ``mpirun`` job shared by a sweep's ``mpi_ps`` configurations.

Starting an ``mpi_ps`` configuration costs an ``mpirun`` and N+1 Python processes that
import TensorFlow before the first replica steps: seconds, for configurations that train
for 1-5 s on the default workload. With ``[mpi] share_engine = true`` (the
default) ``distbench run`` starts one ``mpirun -np N+1`` per (ranks, threads per rank)
whose ranks (``distbench worker mpi-ps-engine``) stay up between configurations and run
the sweep's ``mpi_ps`` configurations one after another, each exactly as
:func:`~distbench.strategies.mpi_ps.rank_main` runs it under its own ``mpirun``.

What is still fresh per configuration (so sharing cannot bias the comparison): its own
parameter server on rank 0 (new server state, new secret), the replicas' models built
from the run's saved initial weights with new optimizer state and the same seeds, the same
data shards, and its own training clock, which starts at the first step as always. What
is shared: the ``mpirun`` job, the rank processes with their imported modules and
TensorFlow's thread pools (which is why the thread count is part of the engine's key),
and the loaded workload. Between configurations rank 0 blocks reading the next request
and the replicas poll for it every :data:`IDLE_POLL_S` seconds (a blocking MPI broadcast
would spin a core each).

Parent and engine: :mod:`distbench.harness.shared_engine`. Requests and replies go
through two named pipes (``mpirun`` passes its ranks no other descriptors) in
``logs/mpi-engine-<n>/``, removed when the engine ends; rank 0 reads the requests and
broadcasts each to the other ranks (its length, then its bytes: no pickle). ``mpirun``'s
output goes to
``logs/mpi-engine-<n>.log``; while a configuration runs, each rank's stdout and stderr go
to ``logs/<key>/ranks/1/rank.<r>/stdout|stderr``, where a separate ``mpirun
--output-filename`` would put them. A replica rank that fails exits 1 and ``mpirun`` ends
the job: the parent names the rank from ``mpirun``'s report
(:func:`~distbench.launch.ranks.failure_error`). Rank 0 records a failure of its own in the
configuration's result, answers ``closing`` and aborts the job, since the replicas may be
anywhere in theirs. Either way the next configuration starts a fresh engine.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any, Iterator

import click
import numpy as np

from distbench.contracts import EngineReply, EngineRequest
from distbench.harness.shared_engine import SharedEngine
from distbench.launch import commands, process

ENGINE_ENTRY = "mpi-ps-engine"
IDLE_POLL_S = 0.01
"""Seconds between two looks of an idle replica rank for the next request."""


def ranks_dir(run_dir: Path, key: str) -> Path:
    """Where configuration ``key``'s rank logs go (as a separate ``mpirun``'s ``--output-filename``)."""
    return run_dir / "logs" / key / "ranks"


def mpirun_engine_command(ranks: int, run_dir: Path, requests: Path, replies: Path, output_dir: Path,
                          python: str, base_env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """``mpirun`` with ``ranks`` ranks on this machine running the engine's ranks
    (``distbench worker mpi-ps-engine --run-dir DIR --requests FIFO --replies FIFO``).

    Returns:
        ``(argv, env)``: see :func:`distbench.launch.commands.mpirun_command` for the flags.
    """
    program = commands.worker_argv(ENGINE_ENTRY, run_dir, ("--requests", requests), ("--replies", replies),
                                   python=python)
    return commands.mpirun_command(ranks, commands.localhost_hosts(ranks), program, output_dir, python, base_env)


class SharedMPIEngine(SharedEngine):
    """The parent's handle on one shared ``mpirun`` job (see the module docstring).

    Args:
        run_dir: the run directory (the ranks load its workload).
        ranks: ``mpirun -np``: the server and the replicas (workers + 1).
        log: ``mpirun``'s log file.
    """

    kind = "MPI engine"
    pid_words = "mpirun pid"

    def __init__(self, run_dir: Path, ranks: int, log: Path) -> None:
        super().__init__(run_dir, log)
        self.ranks = ranks
        self._dir: Path | None = None

    def _spawn(self, log: IO[bytes]) -> None:
        """Make the two named pipes in ``mpirun``'s output directory next to the log (the
        parent holds both ends open: a write never blocks and a read never sees
        end-of-file), then start ``mpirun`` in its own session."""
        self._dir = self.log.with_suffix("")
        self._dir.mkdir(parents=True, exist_ok=True)
        req, rep = self._dir / "requests.fifo", self._dir / "replies.fifo"
        os.mkfifo(req, 0o600)
        os.mkfifo(rep, 0o600)
        self._requests = os.fdopen(os.open(req, os.O_RDWR), "wb")
        self._reply = os.open(rep, os.O_RDWR | os.O_NONBLOCK)
        argv, env = mpirun_engine_command(self.ranks, self.run_dir, req, rep, self._dir, sys.executable)
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=process._die_with_parent)

    def describe_death(self, rc: int | None, key: str) -> tuple[str, str | None]:
        """The rank ``mpirun`` saw fail, how, and its last error (from the configuration's
        rank logs); else how ``mpirun`` itself ended."""
        from distbench.launch.ranks import failure_error, parse_launcher_failure

        found = parse_launcher_failure(process.log_tail(self.log, lines=400, max_chars=60000))
        if rc is None or found is None or found.rank is None:
            return super().describe_death(rc, key)
        group = process.GroupResult(False, False, 0.0, process.ProcResult("mpirun", rc, self.log))
        err = failure_error("mpirun", group, self.log, ranks_dir(self.run_dir, key), timeout_s=0.0)  # (no timeout)
        return err.reason, err.failed_process

    def _cleanup(self) -> None:
        """Remove the named pipes (the rank logs stay)."""
        for name in ("requests.fifo", "replies.fifo"):
            if self._dir is not None:
                (self._dir / name).unlink(missing_ok=True)


@contextlib.contextmanager
def rank_output(directory: Path, rank: int) -> Iterator[None]:
    """This process's stdout and stderr (descriptors 1 and 2: Python's, TensorFlow's)
    appended to ``directory/1/rank.<rank>/stdout`` and ``stderr`` for the block."""
    where = directory / "1" / f"rank.{rank}"
    where.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            f = os.open(where / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(f, fd)
            os.close(f)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, s in zip((1, 2), saved):
            os.dup2(s, fd)
            os.close(s)


def next_request(comm: Any, inbox: IO[bytes] | None) -> EngineRequest | None:
    """The next request on every rank: rank 0 reads a line from ``inbox`` and broadcasts
    its length (int64; 0 = end of requests), then its bytes. The other ranks wait in a
    non-blocking broadcast, polling every :data:`IDLE_POLL_S` seconds.

    Returns:
        The request, or None once the parent closed the request channel.
    """
    from mpi4py import MPI

    line = inbox.readline().strip() if inbox is not None else b""
    size = np.array([len(line)], dtype=np.int64)
    pending = comm.Ibcast([size, 1, MPI.INT64_T], root=0)
    while not pending.Test():
        time.sleep(IDLE_POLL_S)
    if int(size[0]) == 0:
        return None
    buf = np.frombuffer(line, dtype=np.uint8).copy() if inbox is not None else np.empty(int(size[0]), np.uint8)
    comm.Bcast([buf, buf.size, MPI.BYTE], root=0)
    return EngineRequest.from_line(buf.tobytes())


def engine_main(run_dir: Path, requests: Path, replies: Path) -> int:
    """One rank of the engine (``distbench worker mpi-ps-engine``): load the workload, then
    run one configuration per request until the parent closes the request channel.

    Rank 0 leaves each configuration's result in its artifacts directory, with
    ``phase_marks`` saying when the request arrived (so its record's phases count only its
    own time; the first one also pays for the job's start and the workload's load), and
    answers on ``replies``. A replica rank whose configuration fails exits 1 (its
    traceback in the configuration's rank log).
    """
    entered = time.time()
    from mpi4py import MPI

    from distbench.cluster.placement import Placement
    from distbench.harness.child import artifacts_dir, run_configuration
    from distbench.config.scenario import Scenario
    from distbench.strategies import registry
    from distbench.strategies.mpi_ps import placement_details
    from distbench.workload import Workload

    comm = MPI.COMM_WORLD
    rank, workers = comm.Get_rank(), comm.Get_size() - 1
    workload = Workload.load(run_dir, cached=True)
    loaded = time.time()
    cfg = workload.config
    placement = Placement.from_config(cfg.cluster)
    inbox = open(requests, "rb") if rank == 0 else None
    outbox = os.open(replies, os.O_WRONLY) if rank == 0 else -1
    first = True

    def train(strategy: Any, window: int | None, scenario: Any) -> Any:
        out = strategy.run_rank(workload, window, cfg.run.timeout_s, scenario)
        out.extra.update(placement_details(placement, workers))
        return out

    while (req := next_request(comm, inbox)) is not None:
        got = time.time()
        marks = ({"child_start_unix": entered, "workload_unix": loaded} if first
                 else {"child_start_unix": got, "workload_unix": got})
        first = False
        key, window = req.key, req.window
        strategy = registry.strategy_class(req.strategy)
        scenario = Scenario.from_arg(req.scenario)
        if rank == 0:
            print(f"distbench mpi engine: {key}", flush=True)
        with rank_output(ranks_dir(run_dir, key), rank):
            if rank != 0:
                try:
                    strategy.run_rank(workload, window, cfg.run.timeout_s, scenario)
                except BaseException:
                    traceback.print_exc()
                    sys.stderr.flush()
                    os._exit(1)  # mpirun ends the job and reports this rank
                continue
            ok = run_configuration(artifacts_dir(run_dir, key), marks,
                                   functools.partial(train, strategy, window, scenario), {"mpi_engine": "shared"})
        os.write(outbox, EngineReply(key, closing=not ok).to_line())
        if not ok:  # the replicas may be anywhere in this configuration: end the job
            comm.Abort(1)
    return 0


@click.command(ENGINE_ENTRY, hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--requests", required=True, type=click.Path(dir_okay=False))
@click.option("--replies", required=True, type=click.Path(dir_okay=False))
def engine_command(run_dir: str, requests: str, replies: str) -> None:
    """One rank of the shared MPI engine of a sweep (started by 'distbench run' under
    mpirun; see distbench.harness.mpi_engine)."""
    sys.exit(engine_main(Path(run_dir), Path(requests), Path(replies)))

"""``mpi_ps:<optimizer>``: the same parameter-server optimizers as ``spark_ps``, carried
by MPI instead of Spark, so a report can separate what the algorithm costs from what
Spark costs (and set both next to Horovod's ring-allreduce on the same MPI).

How it trains: ``mpirun -np N+1``; rank 0 holds the parameter server
(:class:`~distbench.ps_async.mpi.MPIParameterServer`, the same server core as on Spark)
and snapshots the centre at epoch boundaries; ranks 1..N are replicas running the same
replica loop as the Spark tasks (:func:`~distbench.ps_async.worker.train_replica`) on
their shard of the training split, over :class:`~distbench.ps_async.mpi.MPIClient`.
The rules (:mod:`distbench.ps_async.rules`) are unchanged: they do not know the engine.

How it is launched: by ``distbench run`` on this machine, on the sweep's shared MPI
engine (:mod:`distbench.harness.mpi_engine`, ``[mpi] share_engine``): one ``mpirun``
whose ranks run the sweep's ``mpi_ps`` configurations one after another. Otherwise
:func:`mpi_ps_command` (pure) builds ``mpirun --allow-run-as-root
-np N+1 -H localhost:N+1 --oversubscribe -bind-to none -map-by slot ...`` around
``distbench worker mpi-ps``; the harness's process-group runner starts it, kills the
whole group on failure or timeout, and the record names the failing rank. Under a
user's own ``mpirun`` on a cluster, the same worker entry writes the record itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

from distbench import gpu
from distbench.config import ConfigError, ExperimentConfig
from distbench.contracts import SyncKind
from distbench.ps_async.rules import OPTIMIZERS
from distbench.launch import process
from distbench.strategies.base import Availability, LaunchContext, Strategy
from distbench.launch.commands import exchange_timeout, localhost_hosts, mpirun_command, scenario_arg, worker_argv
from distbench.launch.ranks import failure_error
from distbench.ps_async.rules import DISPLAY
from distbench.strategies.registry import register_family
from distbench.training import TrainOutput
from distbench.training.loop import threads_per_process
from distbench.workload import Workload


def rank_program(python: str, run_dir: Path, optimizer: str, key: str | None = None,
                 window: int | None = None, config_file: str | None = None, scenario: Any = None) -> list[str]:
    """argv each rank runs: ``PYTHON -m distbench worker mpi-ps --run-dir DIR --optimizer O
    [--key K] [--window W] [--scenario JSON] [--config F]``."""
    return worker_argv("mpi-ps", run_dir, ("--optimizer", optimizer), ("--key", key), ("--window", window or None),
                       ("--scenario", scenario_arg(scenario)),
                       ("--config", config_file), python=python)


def mpi_ps_command(workers: int, run_dir: Path, key: str, optimizer: str, output_dir: Path, python: str,
                   window: int | None = None, base_env: dict[str, str] | None = None,
                   mpirun: str = "mpirun", hosts: str | None = None,
                   scenario: Any = None) -> tuple[list[str], dict[str, str]]:
    """``mpirun`` with ``workers + 1`` ranks (rank 0: the server) on ``hosts`` (an ``-H`` list;
    default this machine, ``localhost:N+1``), under the straggler ``scenario`` if given.

    Returns:
        ``(argv, env)``: see :func:`distbench.launch.commands.mpirun_command` for the flags.
    """
    return mpirun_command(workers + 1, hosts or localhost_hosts(workers + 1),
                          rank_program(python, run_dir, optimizer, key, window, scenario=scenario), output_dir, python,
                          base_env, mpirun)


def rank_main(workload: Workload, optimizer: str, window: int | None, timeout_s: float,
              scenario: Any = None) -> TrainOutput | None:
    """Body of one rank under ``mpirun``: rank 0 serves and returns the run's
    :class:`TrainOutput`; replica ranks train and return None (under the straggler
    ``scenario``, a :class:`~distbench.config.scenario.Scenario`, if given).

    Raises:
        ConfigError: fewer than 2 ranks.
    """
    from mpi4py import MPI

    from distbench.ps_async import mpi
    from distbench.ps_async.monitor import CentreMonitor, centre_output, updates_expected
    from distbench.ps_async.protocol import new_secret
    from distbench.ps_async.worker import params_from_config, replica_spec, train_replica

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = size - 1
    if n < 1:
        raise ConfigError(f"mpi_ps needs at least 2 ranks (1 server + replicas), got {size}: use mpirun -np N+1")
    cfg = workload.config
    params = params_from_config(cfg, optimizer, window)
    secret = mpi.broadcast_secret(new_secret() if rank == 0 else None)
    replicas = comm.Split(MPI.UNDEFINED if rank == 0 else 1, rank)  # collective: every rank calls it
    threads = threads_per_process(cfg.training.threads, n)
    spec = replica_spec(workload, n, optimizer, params, mpi.ADDRESS, secret, threads, exchange_timeout(timeout_s),
                        scenario)
    if rank == 0:
        gpu.place(None)  # the server folds on the CPU: no GPU memory reserved for it
    else:
        wid = rank - 1
        res = train_replica(spec, wid, workload.dataset.train, ready=replicas.Barrier, client_factory=mpi.MPIClient)
        replicas.Free()  # a shared engine's ranks run many configurations (a failure ends the job anyway)
        mpi.send_result(res)
        return None
    server = mpi.MPIParameterServer(workload.initial_weights, optimizer, secret, num_workers=n,
                                    params={k: v for k, v in params.items() if k != "alpha"},
                                    sync_timeout_s=exchange_timeout(timeout_s),
                                    non_trainable=spec.non_trainable).start()
    monitor = CentreMonitor(server, updates_expected(spec), cfg.training.epochs).start()
    try:
        if not server.wait_done(timeout_s):
            raise TimeoutError(f"replicas did not all finish within {timeout_s:g} s "
                               f"(done: {server.stats().get('workers_done')})")
    finally:
        monitor.stop()
        stats, centre = server.stats(), server.center()
        server.stop()
    results = mpi.recv_results(n)
    library = MPI.Get_library_version().rstrip("\x00").splitlines()[0].strip()  # a C string: NUL-terminated
    return centre_output(spec, results, monitor.snapshots, stats, centre,
                         {"engine": "mpi", "mpi_ranks": size, "mpi_library": library})


class MPIPS(Strategy):
    """A parameter-server optimizer over MPI: server on rank 0, replicas on ranks 1..N.

    One subclass per optimizer is registered (``mpi_ps:<optimizer>``); ``optimizer`` names it.
    """

    needs = ("Open MPI and mpi4py on every host, started by mpirun (N+1 ranks: rank 0 is the parameter server) "
             "with passwordless ssh between the hosts")
    takes_window = True
    scales_learning_rate = False
    optimizer: ClassVar[str] = ""
    worker_entries = {"mpi-ps": "distbench.harness.cluster:mpi_ps_command",
                      "mpi-ps-engine": "distbench.harness.mpi_engine:engine_command"}

    @classmethod
    def run_rank(cls, workload: Workload, window: int | None, timeout_s: float,
                 scenario: Any = None) -> TrainOutput | None:
        """This process's rank of an ``mpirun -np N+1`` run (see :func:`rank_main`)."""
        return rank_main(workload, cls.optimizer, window, timeout_s, scenario)

    def is_available(self, config: ExperimentConfig, workers: int) -> Availability:
        """``mpirun`` on PATH (next to this interpreter first) and mpi4py importable."""
        import importlib.util
        import shutil

        if importlib.util.find_spec("mpi4py") is None:
            return Availability(False, "mpi4py is not installed: pip install 'distbench[mpi]' (make setup does)")
        path = str(Path(sys.executable).parent) + ":" + __import__("os").environ.get("PATH", "")
        if shutil.which("mpirun", path=path) is None:
            return Availability(False, "mpirun not found: install Open MPI (make setup installs openmpi-bin)")
        return Availability(True)

    def launch(self, ctx: LaunchContext) -> TrainOutput:
        """Run ``mpirun -np N+1`` and load the output rank 0 saved.

        Raises:
            distbench.launch.ranks.HorovodJobError: a rank failed (named) or timed out.
        """
        pl = ctx.placement
        out_dir = ctx.log_dir / "ranks"
        # rank 0 (the parameter server) on the launching host, the replicas on the workers' hosts
        argv, env = mpi_ps_command(ctx.workers, ctx.run_dir, ctx.key, self.optimizer, out_dir, pl.python,
                                   ctx.window, hosts=pl.hosts_arg(ctx.workers + 1, driver_first=True),
                                   scenario=ctx.scenario)
        argv = argv[:1] + pl.mpirun_args() + argv[1:]
        log = ctx.log_dir / "mpirun.log"
        group = process.run_processes([process.ProcSpec("mpirun", argv, env, log)], ctx.timeout_s)
        if not group.ok:
            raise failure_error("mpirun", group, log, out_dir, ctx.timeout_s)
        out = TrainOutput.load(ctx.artifacts_dir)
        out.extra.update(placement_details(pl, ctx.workers))
        return out


def placement_details(placement: Any, workers: int) -> dict[str, Any]:
    """The ``details`` fields saying where an ``mpi_ps`` run's processes ran: the server
    (rank 0) on the launching host, replica w on rank w + 1 (``placement``: a
    :class:`~distbench.cluster.placement.Placement`)."""
    return placement.describe({f"replica {w}": w for w in range(workers)}, driver=["server (rank 0)"])


register_family("mpi_ps", [type(f"MPIPS_{o}", (MPIPS,), {
    "name": f"mpi_ps:{o}", "optimizer": o, "__module__": __name__, "synchronous": spec.kind == SyncKind.SYNC,
    "description": f"{DISPLAY[o]} ({spec.kind}) over MPI (mpi4py): server on rank 0, replicas on ranks 1..N"})
    for o, spec in OPTIMIZERS.items()])

"""Launch commands as pure functions: ``(argv, env)`` for every process distbench starts.

Builders return what to run and do nothing else, so each is tested exactly; running them
is :mod:`distbench.launch.process`'s job. Here: the environment of a child Python process,
the ``distbench worker ...`` argv of every entry point (one builder), ``mpirun`` and
``horovodrun`` around a program, free ports, and the timeouts derived from a
configuration's ``timeout_s``.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distbench.config import ConfigError


def worker_argv(entry: str, run_dir: Path, *options: tuple[str, Any], python: str | None = None) -> list[str]:
    """argv of a ``distbench worker ENTRY`` process: ``PYTHON -m distbench worker ENTRY --run-dir DIR``
    then each ``(flag, value)`` of ``options`` whose value is set (not None, not ``""``).

    Args:
        entry: the worker entry point (``config``, ``tf``, ``tf-server``, ``horovod``, ``mpi-ps``...).
        run_dir: the run directory.
        options: ``(flag, value)`` pairs, in order.
        python: the interpreter (default: this one).
    """
    argv = [python or sys.executable, "-m", "distbench", "worker", entry, "--run-dir", str(run_dir)]
    for flag, value in options:
        if value is not None and value != "":
            argv += [flag, str(value)]
    return argv


def scenario_arg(scenario: Any) -> str | None:
    """The ``--scenario`` value of a process: the :class:`~distbench.config.scenario.Scenario` as
    compact JSON, or ``None`` (no option) without one."""
    return scenario.to_arg() if scenario is not None else None


def exchange_timeout(timeout_s: float) -> float:
    """Seconds to wait for one exchange with a peer (a parameter-server reply, a barrier
    round) in a configuration limited to ``timeout_s``: a quarter of it, at least 60."""
    return max(60.0, timeout_s / 4)


def child_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child Python process: ``base`` (default ``os.environ``) plus
    quiet TensorFlow C++ logs (level 1 keeps errors and warnings) and ``extra``."""
    env = dict(os.environ if base is None else base)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def config_child_command(run_dir: Path, key: str, strategy: str, workers: int,
                         spawn_unix: float, base_env: dict[str, str] | None = None,
                         window: int | None = None, scenario: Any = None) -> tuple[list[str], dict[str, str]]:
    """argv and env of the harness child that runs one configuration in a fresh process.

    ``spawn_unix`` (Unix seconds) is passed as ``DISTBENCH_SPAWN_UNIX`` so the child can
    measure start-up from the moment it was spawned; a straggler ``scenario`` (a
    :class:`~distbench.config.scenario.Scenario`) as ``--scenario`` JSON.
    """
    argv = worker_argv("config", run_dir, ("--key", key), ("--strategy", strategy), ("--workers", workers),
                       ("--window", window or None), ("--scenario", scenario_arg(scenario)))
    return argv, child_env({"DISTBENCH_SPAWN_UNIX": repr(spawn_unix)}, base_env)


MPI_EXPORTS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL",
               "PYTHONUNBUFFERED", "KERAS_BACKEND", "OMP_NUM_THREADS")
"""Variables ``mpirun -x`` forwards to the ranks when set (plus every ``DISTBENCH_*`` and
``HOROVOD_*`` variable); on one host the ranks inherit mpirun's environment anyway,
across hosts only exported variables arrive."""


EXPORT_PREFIXES = ("DISTBENCH_", "HOROVOD_")


def localhost_hosts(ranks: int) -> str:
    """The ``-H`` value for ``ranks`` slots on this machine: ``localhost:N``.

    Raises:
        ConfigError: ``ranks`` < 1.
    """
    if ranks < 1:
        raise ConfigError(f"Horovod needs at least 1 rank, got {ranks}")
    return f"localhost:{ranks}"


def launcher_env(python: str, base_env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a launcher and its ranks: :func:`child_env` of
    ``base_env`` with the directory of ``python`` (the virtualenv's ``bin``) first on
    ``PATH``, so ``horovodrun``/``mpirun`` and their ranks find this interpreter."""
    env = child_env(None, base_env)
    bindir = str(Path(python).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if not parts or parts[0] != bindir:
        env["PATH"] = os.pathsep.join([bindir] + [p for p in parts if p != bindir])
    return env


HOROVODRUN_MODULE = "distbench.launch.horovodrun"
"""``horovodrun`` run as ``python -m`` this module: the same command line without its
per-launch build check (:mod:`distbench.launch.horovodrun`)."""


def horovodrun_command(ranks: int, hosts: str, program: list[str], output_dir: Path, start_timeout_s: int,
                       python: str, base_env: dict[str, str] | None = None, horovodrun: str | None = None,
                       options: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """``horovodrun`` with the Gloo controller running ``program`` on ``ranks`` ranks.

    Args:
        ranks: number of ranks (``-np``).
        hosts: ``-H`` value, e.g. ``localhost:2`` or ``host1:2,host2:2``.
        program: argv every rank runs (e.g. :func:`worker_command`).
        output_dir: ``--output-filename``: per-rank ``rank.<r>/stdout|stderr`` files.
        start_timeout_s: ``--start-timeout``: seconds for all ranks to start.
        python: the interpreter whose ``bin`` directory goes first on ``PATH``.
        base_env: environment to start from (default ``os.environ``).
        horovodrun: a ``horovodrun`` executable to run as it is; by default ``python -m``
            :data:`HOROVODRUN_MODULE`, which skips the Gloo build check the caller made.
        options: further ``horovodrun`` options, placed before the others (e.g. ``-p PORT``).

    Returns:
        ``(argv, env)``. ``--gloo`` is explicit: a Horovod built with MPI picks MPI otherwise.
    """
    argv = [horovodrun] if horovodrun else [python, "-m", HOROVODRUN_MODULE]
    argv += [*options, "-np", str(ranks), "-H", hosts, "--gloo", "--start-timeout", str(int(start_timeout_s))]
    if ranks > 1:  # Horovod 0.28.1 crashes on --output-filename with -np 1 (math.log10(0) in _pad_rank)
        argv += ["--output-filename", str(output_dir)]
    argv += list(program)
    return argv, launcher_env(python, base_env)


def mpi_exports(env: dict[str, str]) -> list[str]:
    """Names ``mpirun -x`` forwards: those of :data:`MPI_EXPORTS` set in ``env`` (in that
    order), then every set ``DISTBENCH_*``/``HOROVOD_*`` variable, sorted."""
    fixed = [k for k in MPI_EXPORTS if k in env]
    return fixed + sorted(k for k in env if k.startswith(EXPORT_PREFIXES) and k not in fixed)


YIELD_MCA = "OMPI_MCA_mpi_yield_when_idle"
"""Open MPI's switch between spinning and yielding the core while a rank waits in a
blocking call. ``mpirun`` decides by its slot count (``-H host:N`` says N cores, so it
spins), but every distbench rank also runs TensorFlow's thread pool sized to fill the
machine's cores (:func:`distbench.training.loop.threads_per_process`): a spinning wait
takes a core from it. Measured on 2 cores (digits, MLP of 19 KB, global batch 120): with
spinning, ``mpi_ps:adag`` took 0.12 / 0.29 / 0.61 s per epoch at 2 / 3 / 4 workers and
``horovod_mpi`` 0.38 s at 3; yielding, 0.02 / 0.04 / 0.07 and 0.02 (docs/engines.md).
Set ``OMPI_MCA_mpi_yield_when_idle=0`` in the environment to keep Open MPI's choice."""


def mpirun_command(ranks: int, hosts: str, program: list[str], output_dir: Path, python: str,
                   base_env: dict[str, str] | None = None,
                   mpirun: str = "mpirun") -> tuple[list[str], dict[str, str]]:
    """Open MPI ``mpirun`` running ``program`` on ``ranks`` ranks (Horovod's MPI controller).

    ``--allow-run-as-root`` (containers and CI run as root), ``--oversubscribe`` (more
    ranks than cores is allowed, as with horovodrun), ``-bind-to none -map-by slot``
    (Horovod's documented settings: no pinning of a rank's threads to one core),
    ``--tag-output`` (each line labelled with its rank), ``--output-filename`` (per-rank
    ``<output_dir>/1/rank.<r>/stdout|stderr`` files), ``--mca mpi_yield_when_idle 1``
    (:data:`YIELD_MCA`) and ``-x NAME`` for every variable of :func:`mpi_exports`.

    Args:
        ranks, hosts, program, output_dir, python, base_env: as :func:`horovodrun_command`.
        mpirun: the ``mpirun`` executable.

    Returns:
        ``(argv, env)``.
    """
    env = launcher_env(python, base_env)
    argv = [mpirun, "--allow-run-as-root", "-np", str(ranks), "-H", hosts, "--oversubscribe",
            "-bind-to", "none", "-map-by", "slot", "--tag-output", "--output-filename", str(output_dir)]
    if YIELD_MCA not in env:  # the user's own OMPI_MCA_mpi_yield_when_idle wins
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    for name in mpi_exports(env):
        argv += ["-x", name]
    return argv + list(program), env


def start_timeout(timeout_s: float) -> int:
    """``--start-timeout`` for a configuration with ``timeout_s`` seconds: a third of it,
    between 30 and 300 seconds (TensorFlow's import alone takes ~5-10 s per rank on a
    loaded 2-core machine)."""
    return int(min(300, max(30, timeout_s / 3)))


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports free on ``host`` right now (bound to port 0, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()

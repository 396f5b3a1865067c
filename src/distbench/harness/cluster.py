"""Worker entry points that users run under their own launchers on a cluster.

``distbench worker tf --run-dir DIR --config cfg.toml`` on each host, with that host's
``TF_CONFIG``: every task loads (or, on first use of DIR, creates) the workload from the
config, trains its share, and the chief evaluates the final weights and snapshots and
appends a record to ``DIR/results.jsonl``, exactly as ``distbench run`` would. Under the
harness (``--key`` given) only the training part runs; the harness writes the record.

``worker tf`` itself never imports TensorFlow: it validates ``TF_CONFIG`` and the config
(bad input: exit 2 in well under a second), then runs the task as a supervised child
(``worker tf-task``, :func:`distbench.launch.process.supervise`) that must reach the
cluster join within :data:`STARTUP_TIMEOUT_S` and join within the join timeout, and that
SIGTERM/SIGINT end at any point (TensorFlow blocks in C++ with the GIL held while the
cluster forms, and replaces the SIGTERM handler, so the task process cannot do either).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import click

from distbench import config as config_mod
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import ConfigPoint
from distbench.harness.progress import result_detail
from distbench.harness.assembly import ok_record
from distbench.harness.child import artifacts_dir
from distbench.results import provenance
from distbench.results.store import RESULTS_FILE, append_record
from distbench.config.scenario import Scenario
from distbench.launch import commands, process
from distbench.launch.tfconfig import JOIN_TIMEOUT_ENV, join_failure, parse_tf_config, silent_peers
from distbench.strategies import registry
from distbench.workload import CONFIG_FILE, WORKLOAD_DIR, Workload, read_recorded
from distbench.entrypoints import run_dir_param, user_errors

DEFAULT_JOIN_TIMEOUT_S = 120.0
STARTUP_TIMEOUT_S = 600.0  # start of a task to the start of its join (TensorFlow import): never legitimately near
TASK_ENV = "DISTBENCH_TF_TASK"  # the validated TF_CONFIG, handed from 'worker tf' to its 'worker tf-task' child


def load_or_create_workload(run_dir: Path, config_file: str | None) -> Workload:
    """Load the workload of ``run_dir``; create it from ``config_file`` when absent.

    On a cluster without a shared filesystem every host creates the same workload from the
    same config and seed (same data fingerprint and initial weights), and the records
    carry both hashes so a mismatch is visible.

    Raises:
        ConfigError: no workload in ``run_dir`` and no config given, or invalid config.
    """
    if (run_dir / WORKLOAD_DIR).exists():
        return Workload.load(run_dir, cached=True)
    cfg = config_mod.load(config_file)
    run_dir.mkdir(parents=True, exist_ok=True)
    return Workload.create(cfg, run_dir)


def join_timeout(flag: float | None, env: dict[str, str] | None = None) -> float:
    """Seconds a ``worker tf`` task waits for its cluster to form: ``--join-timeout`` if
    given, else ``DISTBENCH_JOIN_TIMEOUT_S`` (set by the harness), else
    :data:`DEFAULT_JOIN_TIMEOUT_S`.

    Raises:
        ConfigError: the value is not a finite number > 0.
    """
    env = os.environ if env is None else env
    source, raw = ("--join-timeout", flag) if flag is not None else (JOIN_TIMEOUT_ENV, env.get(JOIN_TIMEOUT_ENV))
    if raw is None or raw == "":
        return DEFAULT_JOIN_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise config_mod.ConfigError(f"{source} {raw!r}: expected a number of seconds > 0, e.g. 120")
    return value


def tf_worker_main(run_dir: Path, key: str | None, config_file: str | None, join_timeout_s: float | None,
                   scenario: str | None = None) -> int:
    """``distbench worker tf``: validate ``TF_CONFIG`` and the config without importing
    TensorFlow, then run the task (:func:`tf_task_main`) as a supervised child.

    Args:
        run_dir: run directory; key: record key under the harness (None on a cluster).
        config_file: experiment TOML, used when ``run_dir`` holds no workload yet.
        join_timeout_s: ``--join-timeout`` (None: see :func:`join_timeout`).
        scenario: ``--scenario`` JSON (a straggler scenario), passed on to the task.

    Returns:
        The exit code: the task's; :data:`~distbench.launch.process.STALLED_EXIT` when
        the cluster did not form in time (one line names the tasks that never joined).

    Raises:
        ConfigError: bad ``TF_CONFIG``, join timeout or config.
    """
    task = parse_tf_config(os.environ.get("TF_CONFIG"), "worker tf")
    wait_s = join_timeout(join_timeout_s)
    if not (run_dir / CONFIG_FILE).exists():
        config_mod.load(config_file)  # a bad config fails here, before TensorFlow starts
    argv = commands.worker_argv("tf-task", run_dir, ("--config", config_file), ("--key", key),
                                ("--scenario", scenario))
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}  # the child gets the validated task
    env.update({TASK_ENV: task.to_json(), "DISTBENCH_SPAWN_UNIX": os.environ.get("DISTBENCH_SPAWN_UNIX",
                                                                                   repr(time.time()))})
    stages = [(STARTUP_TIMEOUT_S, lambda: f"{task.name}: TensorFlow did not start within {STARTUP_TIMEOUT_S:g} s "
                                          "(see the output above)"),
              (wait_s, lambda: join_failure(task, wait_s, silent_peers(task)))]
    return process.supervise(argv, env, stages)


def tf_task_main(run_dir: Path, key: str | None, config_file: str | None, scenario: Scenario | None = None) -> int:
    """One ``multi_worker_mirrored`` task (``distbench worker tf-task``, started by
    :func:`tf_worker_main`); see the module docstring. Returns the exit code.

    Raises:
        ConfigError: ``DISTBENCH_TF_TASK`` is missing or invalid (not started by ``worker tf``).
    """
    train_task = registry.strategy_class("multi_worker_mirrored").train_task
    spawn = float(os.environ.get("DISTBENCH_SPAWN_UNIX", time.time()))
    task = parse_tf_config(os.environ.get(TASK_ENV), "worker tf")
    # The strategy is built before the workload (collective ops first): read its setting now.
    if (run_dir / CONFIG_FILE).exists():
        cfg = config_mod.from_dict(read_recorded(run_dir))
    else:
        cfg = config_mod.load(config_file)
    os.environ.setdefault("DISTBENCH_COLLECTIVE", cfg.tf.collective)
    loaded: list[Workload] = []

    def load() -> Workload:
        loaded.append(load_or_create_workload(run_dir, config_file))
        return loaded[0]

    if key is not None:  # under the harness: it evaluates and records
        train_task(task, load, artifacts_dir(run_dir, key), scenario)
        return 0
    point = ConfigPoint("multi_worker_mirrored", task.replicas, 0, scenario=scenario)
    out = train_task(task, load, artifacts_dir(run_dir, point.key + f"_task{task.rank}"), scenario)
    workload = loaded[0]
    if task.rank == 0:
        prov = provenance.collect(workload.config.training.seed)
        prov["launcher"] = "TF_CONFIG (user)"
        rec = ok_record(workload, point, run_dir.name, prov, out, Evaluator(workload), time.time() - spawn, spawn)
        append_record(run_dir, rec)
    return 0


def mpi_ps_worker_main(run_dir: Path, optimizer: str, key: str | None, window: int | None,
                       config_file: str | None, scenario: Scenario | None = None) -> int:
    """One rank of an ``mpi_ps`` run (``distbench worker mpi-ps``), under the harness
    (``key`` given: rank 0 saves the output for the harness) or under a user's own
    ``mpirun -np N+1`` (rank 0 creates the workload if DIR has none, evaluates and appends
    the record). DIR must be on a filesystem every rank sees, or already hold the workload
    on every host. Returns the exit code.

    Raises:
        ConfigError: unknown optimizer, fewer than 2 ranks, bad config.
    """
    from mpi4py import MPI

    members = registry.families()["mpi_ps"]
    if f"mpi_ps:{optimizer}" not in members:
        raise config_mod.ConfigError(f"--optimizer {optimizer!r}: expected one of "
                                     f"{', '.join(m.split(':', 1)[1] for m in members)}")
    strategy = registry.strategy_class(f"mpi_ps:{optimizer}")
    spawn = float(os.environ.get("DISTBENCH_SPAWN_UNIX", time.time()))
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0 and key is None:
        load_or_create_workload(run_dir, config_file)
    comm.Barrier()
    workload = Workload.load(run_dir, cached=True)
    out = strategy.run_rank(workload, window, workload.config.run.timeout_s, scenario)
    if out is None:
        return 0
    if key is not None:
        out.save(artifacts_dir(run_dir, key))
        return 0
    point = ConfigPoint(f"mpi_ps:{optimizer}", comm.Get_size() - 1, 0, window, scenario=scenario)
    prov = provenance.collect(workload.config.training.seed)
    prov["launcher"] = "mpirun (user)"
    rec = ok_record(workload, point, run_dir.name, prov, out, Evaluator(workload), time.time() - spawn, spawn)
    append_record(run_dir, rec)
    print(f"distbench: {point.label}: {rec['status']} {result_detail(rec)}; record appended to "
          f"{run_dir / RESULTS_FILE}", flush=True)  # as the horovod entry says it
    return 0


# ----------------------------------------------------------------------- the commands
@click.command("tf")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Experiment TOML, used when DIR holds no workload yet.")
@click.option("--join-timeout", type=float, default=None,
              help="Seconds to wait for every task of TF_CONFIG's cluster to join, counted once TensorFlow has "
                   "started [default: $DISTBENCH_JOIN_TIMEOUT_S, else 120]; then exit 3 naming the tasks that "
                   "never joined.")
@click.option("--key", hidden=True, help="Record key (set by distbench run; omit on a cluster).")
@click.option("--scenario", hidden=True, help="Straggler scenario as JSON (set by distbench run).")
@user_errors
@run_dir_param("Run directory (shared by the tasks).")
def tf_command(run_dir: str, config_file: str | None, join_timeout: float | None, key: str | None,
               scenario: str | None) -> None:
    """One MultiWorkerMirroredStrategy task; run it on every host with that host's TF_CONFIG.
    The chief (worker 0) appends the record to RUN_DIR/results.jsonl. TF_CONFIG is checked
    before TensorFlow starts (exit 2 with one line if it is wrong); SIGTERM and SIGINT end
    the task at any point."""
    Scenario.from_arg(scenario)  # a bad one fails here, before TensorFlow starts
    sys.exit(tf_worker_main(Path(run_dir), key, config_file, join_timeout, scenario))


@click.command("tf-task", hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--config", "config_file", type=click.Path(dir_okay=False))
@click.option("--key")
@click.option("--scenario")
@user_errors
def tf_task_command(run_dir: str, config_file: str | None, key: str | None, scenario: str | None) -> None:
    """The TensorFlow process of 'worker tf' (started and supervised by it)."""
    sys.exit(tf_task_main(Path(run_dir), key, config_file, Scenario.from_arg(scenario)))


@click.command("mpi-ps")
@click.option("--optimizer", required=True, help="downpour, adag, dynsgd, aeasgd, eamsgd, easgd or averaging.")
@click.option("--window", type=int, help="Communication window (default: the config's, else the optimizer's).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Experiment TOML, used when DIR holds no workload yet.")
@click.option("--key", hidden=True, help="Record key (set by distbench run; omit on a cluster).")
@click.option("--scenario", hidden=True, help="Straggler scenario as JSON (set by distbench run).")
@user_errors
@run_dir_param("Run directory (seen by every rank).")
def mpi_ps_command(run_dir: str, optimizer: str, window: int | None, config_file: str | None,
                   key: str | None, scenario: str | None) -> None:
    """One rank of a parameter-server run over MPI; run under 'mpirun -np N+1' (rank 0 is
    the server, ranks 1..N the replicas). Without --key rank 0 appends the record to
    RUN_DIR/results.jsonl."""
    sys.exit(mpi_ps_worker_main(Path(run_dir), optimizer, key, window, config_file, Scenario.from_arg(scenario)))

"""Worker entry points that users run under their own launchers on a cluster.

``distbench worker tf --run-dir DIR --config cfg.toml`` on each host, with that host's
``TF_CONFIG``: every task loads (or, on first use of DIR, creates) the workload from the
config, trains its share, and the chief evaluates the final weights and snapshots and
appends a record to ``DIR/results.jsonl``, exactly as ``distbench run`` would. Under the
harness (``--key`` given) only the training part runs; the harness writes the record.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from distbench import config as config_mod
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import ConfigPoint
from distbench.harness.runner import artifacts_dir, ok_record
from distbench.results import provenance
from distbench.results.store import append_record
from distbench.workload import CONFIG_FILE, WORKLOAD_DIR, Workload


def load_or_create_workload(run_dir: Path, config_file: str | None) -> Workload:
    """Load the workload of ``run_dir``; create it from ``config_file`` when absent.

    On a cluster without a shared filesystem every host creates the same workload from the
    same config and seed (same data fingerprint and initial weights), and the records
    carry both hashes so a mismatch is visible.

    Raises:
        ConfigError: no workload in ``run_dir`` and no config given, or invalid config.
    """
    if (run_dir / WORKLOAD_DIR).exists():
        return Workload.load(run_dir)
    cfg = config_mod.load(config_file)
    run_dir.mkdir(parents=True, exist_ok=True)
    return Workload.create(cfg, run_dir)


def tf_worker_main(run_dir: Path, key: str | None, config_file: str | None) -> int:
    """One ``multi_worker_mirrored`` task; see the module docstring. Returns the exit code."""
    from distbench.strategies.multi_worker_mirrored import read_tf_config, threads_for, train_worker
    from distbench.training.tf_loop import configure_threads

    spawn = float(os.environ.get("DISTBENCH_SPAWN_UNIX", time.time()))
    try:
        cluster, index = read_tf_config()
    except ValueError as e:
        raise config_mod.ConfigError(str(e)) from None
    n = len(cluster["worker"])
    configure_threads(threads_for(n))  # before building the workload touches TensorFlow
    # The strategy is built before the workload (collective ops first): read its setting now.
    if (run_dir / CONFIG_FILE).exists():
        cfg = config_mod.from_dict(json.loads((run_dir / CONFIG_FILE).read_text()))
    else:
        cfg = config_mod.load(config_file)
    os.environ.setdefault("DISTBENCH_COLLECTIVE", cfg.tf.collective)
    loaded: list[Workload] = []

    def load() -> Workload:
        loaded.append(load_or_create_workload(run_dir, config_file))
        return loaded[0]

    if key is not None:  # under the harness: it evaluates and records
        train_worker(load, artifacts_dir(run_dir, key))
        return 0
    point = ConfigPoint("multi_worker_mirrored", n, 0)
    out = train_worker(load, artifacts_dir(run_dir, point.key + f"_task{index}"))
    workload = loaded[0]
    if index == 0:
        prov = provenance.collect(workload.config.training.seed)
        prov["launcher"] = "TF_CONFIG (user)"
        rec = ok_record(workload, point, run_dir.name, prov, out, Evaluator(workload), time.time() - spawn, spawn)
        append_record(run_dir, rec)
    return 0


def mpi_ps_worker_main(run_dir: Path, optimizer: str, key: str | None, window: int | None,
                       config_file: str | None) -> int:
    """One rank of an ``mpi_ps`` run (``distbench worker mpi-ps``), under the harness
    (``key`` given: rank 0 saves the output for the harness) or under a user's own
    ``mpirun -np N+1`` (rank 0 creates the workload if DIR has none, evaluates and appends
    the record). DIR must be on a filesystem every rank sees, or already hold the workload
    on every host. Returns the exit code.

    Raises:
        ConfigError: unknown optimizer, fewer than 2 ranks, bad config.
    """
    from mpi4py import MPI

    from distbench.ps_async.rules import OPTIMIZERS
    from distbench.strategies.mpi_ps import rank_main

    if optimizer not in OPTIMIZERS:
        raise config_mod.ConfigError(f"--optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
    spawn = float(os.environ.get("DISTBENCH_SPAWN_UNIX", time.time()))
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0 and key is None:
        load_or_create_workload(run_dir, config_file)
    comm.Barrier()
    workload = Workload.load(run_dir)
    out = rank_main(workload, optimizer, window, workload.config.run.timeout_s)
    if out is None:
        return 0
    if key is not None:
        out.save(artifacts_dir(run_dir, key))
        return 0
    point = ConfigPoint(f"mpi_ps:{optimizer}", comm.Get_size() - 1, 0, window)
    prov = provenance.collect(workload.config.training.seed)
    prov["launcher"] = "mpirun (user)"
    append_record(run_dir, ok_record(workload, point, run_dir.name, prov, out, Evaluator(workload),
                                     time.time() - spawn, spawn))
    return 0

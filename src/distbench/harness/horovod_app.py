"""``distbench worker horovod``: the entry every Horovod rank runs, under the harness or
under a user's own ``horovodrun``/``mpirun`` on a cluster.

Under the harness (``--key KEY``, started by the ``horovod``/``horovod_mpi`` strategies):
rank 0 saves its :class:`~distbench.training.TrainOutput` in
``DIR/artifacts/KEY/``; the harness evaluates it and writes the record.

On a cluster (no ``--key``)::

    horovodrun -np 4 -H host1:2,host2:2 python -m distbench worker horovod --run-dir DIR --config cfg.toml
    mpirun -np 4 -H host1:2,host2:2 -bind-to none -map-by slot -x PATH -x PYTHONPATH \\
        python -m distbench worker horovod --run-dir DIR --config cfg.toml

rank 0 creates the workload in ``DIR`` if it has none (from ``--config``, default the
embedded experiment; an existing one must match ``--config``'s data/model/training),
every rank gets it from rank 0, and after training rank 0 evaluates the final weights
and snapshots on the test split and appends one record to ``DIR/results.jsonl``
(strategy ``horovod`` for Gloo, ``horovod_mpi`` for MPI; ``workers`` = ranks; each new
run of the same rank count is the next repeat), in the same format as ``distbench run``,
so ``distbench report`` merges it with other runs. Only rank 0 writes to ``DIR``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from distbench import config as config_mod
from distbench.config import ConfigError
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import ConfigPoint
from distbench.harness.progress import result_detail
from distbench.harness.assembly import ok_record
from distbench.harness.child import artifacts_dir
from distbench.harness.rundir import prepare_run_dir
from distbench.results import provenance
from distbench.results.records import config_id
from distbench.results.store import append_record, read_records
from distbench.config.scenario import Scenario
from distbench.strategies import registry
from distbench.training import TrainOutput
from distbench.workload import WORKLOAD_DIR, Workload
from distbench.entrypoints import run_dir_param, user_errors


def worker_main(run_dir: Path, key: str | None = None, config_file: str | None = None,
                scenario: Scenario | None = None, threads: int = 0) -> int:
    """Run one rank (call it in every process that ``horovodrun``/``mpirun`` starts).

    Args:
        run_dir: the run directory (rank 0 writes there; other ranks only read the
            config file named by ``--config`` if any).
        key: the record key when started by ``distbench run`` (the workload must exist);
            None for a user's own cluster run.
        config_file: experiment TOML for a cluster run (None = the embedded default).
        scenario: the straggler scenario (``--scenario``; None: none).
        threads: intra-op threads of this rank (``--threads``); 0: ``training.threads``, else
            cores // local ranks.

    Returns:
        Process exit code: 0 when this rank finished.

    Raises:
        ConfigError: bad input (``--config`` with ``--key``, an unreadable config, a
            workload that does not match the config); every rank raises it.
    """
    if key and config_file:
        raise ConfigError("--config is for runs outside 'distbench run'; with --key the workload already in "
                          f"{str(run_dir)!r} is used: drop --config")
    if not key and config_file:
        config_mod.load(config_file)  # fail fast on every rank, before hvd.init()
    horovod = registry.strategy_class("horovod")
    threads = threads or horovod.configured_threads(run_dir, config_file)
    if key:
        art = artifacts_dir(run_dir, key)

        def save(out: TrainOutput, workload: Workload, info: Any) -> None:
            out.save(art)

        return horovod.run_rank(run_dir, lambda: Workload.load(run_dir, cached=True), save, threads, scenario)
    return horovod.run_rank(run_dir, lambda: _prepare(run_dir, config_file),
                            lambda out, wl, info: record_cluster_run(out, wl, info, scenario), threads, scenario)


def _prepare(run_dir: Path, config_file: str | None) -> Workload:
    """Rank 0 of a cluster run: create the workload in ``run_dir``, or load the existing
    one (which must match ``config_file`` when it is given)."""
    if not (run_dir / WORKLOAD_DIR).exists():
        return prepare_run_dir(config_mod.load(config_file), run_dir, resume=False)
    if config_file:
        return prepare_run_dir(config_mod.load(config_file), run_dir, resume=True)
    return Workload.load(run_dir)


def record_cluster_run(out: TrainOutput, workload: Workload, info: Any, scenario: Scenario | None = None) -> dict:
    """Rank 0 of a cluster run: save ``out`` under ``DIR/artifacts/<key>/``, evaluate it
    like the harness does and append the record to ``DIR/results.jsonl``.

    Returns:
        The record written.
    """
    run_dir = workload.run_dir
    cid = config_id(info.strategy, info.size, scenario=scenario)
    repeat = sum(1 for r in read_records(run_dir) if r.get("config_id") == cid)
    point = ConfigPoint(info.strategy, info.size, repeat, scenario=scenario)
    art = artifacts_dir(run_dir, point.key)
    out.save(art)
    prov = provenance.collect(workload.config.training.seed)
    prov["launcher"] = "user (horovodrun or mpirun, distbench worker horovod)"
    prov["hostnames"] = sorted(set(info.hostnames))
    total_s = time.time() - info.start_unix
    rec = ok_record(workload, point, run_dir.name, prov, out, Evaluator(workload), total_s, info.start_unix)
    append_record(run_dir, rec)
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=2))
    print(f"distbench: {point.label}: {rec['status']} {result_detail(rec)}; record appended to "
          f"{run_dir / 'results.jsonl'}", flush=True)
    return rec


@click.command("horovod")
@click.option("--key", help="Record key; set by 'distbench run' (omit on your own cluster).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Experiment TOML for a cluster run (default: the embedded experiment).")
@click.option("--scenario", hidden=True, help="Straggler scenario as JSON (set by 'distbench run').")
@click.option("--threads", type=click.IntRange(min=0), default=0, hidden=True,
              help="Intra-op threads of this rank (set by 'distbench run' on an emulated cluster; 0: "
                   "training.threads or cores // local ranks).")
@user_errors
@run_dir_param("Run directory (rank 0 writes the workload, artifacts and results there).")
def command(run_dir: str, key: str | None, config_file: str | None, scenario: str | None, threads: int) -> None:
    """One Horovod rank; run it under horovodrun or mpirun, e.g.
    'horovodrun -np 4 -H host1:2,host2:2 python -m distbench worker horovod DIR
    --config cfg.toml'. Without --key, rank 0 evaluates and appends a record to
    DIR/results.jsonl."""
    sys.exit(worker_main(Path(run_dir), key, config_file, Scenario.from_arg(scenario), threads))

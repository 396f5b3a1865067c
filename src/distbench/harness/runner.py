"""Run a sweep: each configuration in its own fresh child process, with a timeout,
logs in ``<run_dir>/logs/``, one record appended per configuration as it finishes,
``--resume`` skipping what is recorded, and progress shown with rich.

Process layout: ``distbench run`` (this module, :func:`run_sweep`) spawns, per
configuration, ``python -m distbench worker config ...``
(:func:`~distbench.harness.child.child_main`) in a new
process group; the child loads the workload and calls the strategy's ``launch``, which
trains in the child or starts more processes. The child saves a
:class:`~distbench.training.TrainOutput` in ``<run_dir>/artifacts/<key>/``; the parent
evaluates it (:mod:`distbench.harness.evaluate`) and writes the record
(:mod:`distbench.harness.assembly`). The ``spark_ps`` and ``mpi_ps`` configurations go to one
engine shared by the sweep instead (:mod:`distbench.harness.shared_engine`), which leaves the
same result. The run directory itself is :mod:`distbench.harness.rundir`'s.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from distbench.config import ConfigError, ExperimentConfig
from distbench import gpu
from distbench.harness import progress
from distbench.harness.child import artifacts_dir
from distbench.harness.assembly import make_record, no_timings, ok_record
from distbench.harness.evaluate import Evaluator
from distbench.harness.engines import close_engines, engine_for, stop_unless_reused
from distbench.harness.matrix import ConfigPoint, auto_round, expand
from distbench.harness.rundir import prepare_run_dir
from distbench.results import provenance
from distbench.results.records import Status
from distbench.results.store import append_record, read_records, recorded
from distbench.cluster.placement import CLUSTER_ID_ENV
from distbench.launch import commands, process
from distbench.strategies import registry
from distbench.strategies.base import Availability
from distbench.training.output import SNAPS_FILE, ChildResult, read_child_result
from distbench.workload import Workload, remove_dataset_cache

_LOG = logging.getLogger("distbench.harness.runner")


def run_point(workload: Workload, point: ConfigPoint, run_id: str, prov: dict[str, Any],
              evaluator: Callable[[], Evaluator]) -> dict[str, Any]:
    """Run one configuration in a fresh child process, or on the sweep's shared engine
    (:func:`~distbench.harness.engines.engine_for`), and return its record."""
    cfg = workload.config
    run_dir = workload.run_dir
    strat = registry.get(point.strategy)
    if cfg.run.device == "cpu":
        gpu.hide_gpus()
    why = gpu.for_strategy(point.strategy, cfg.run.device)  # no silent CPU fallback
    avail = Availability(False, why) if why else strat.is_available(cfg, point.workers)
    if not avail.ok:
        return make_record(workload, point, run_id, prov, Status.UNAVAILABLE, reason=avail.reason)
    art = artifacts_dir(run_dir, point.key)
    if art.exists():  # leftovers of an interrupted attempt
        for f in art.iterdir():
            if f.is_file():
                f.unlink()
    stop_unless_reused(workload, point)  # a previous engine's shutdown is on no configuration's clock
    spawn = time.time()
    engine = engine_for(workload, point)
    failed_process = None
    if engine is not None:
        log = engine.log
        done = engine.run(point.key, point.strategy, point.workers, point.window, spawn, cfg.run.timeout_s,
                          point.scenario)
        timed_out, exited_ok, why, elapsed = done.timed_out, done.ok, done.reason, done.elapsed_s
        failed_process = done.failed_process
    else:
        log = run_dir / "logs" / f"{point.key}.log"
        argv, env = commands.config_child_command(run_dir, point.key, point.strategy, point.workers, spawn,
                                                   window=point.window, scenario=point.scenario)
        group = process.run_processes([process.ProcSpec(point.key, argv, env, log)], cfg.run.timeout_s)
        timed_out, exited_ok, elapsed = group.timed_out, group.ok, group.elapsed_s
        why = group.reason(cfg.run.timeout_s)
    tail, log_name = process.log_tail(log), str(log.relative_to(run_dir))
    if timed_out:  # say where it was: a start-up longer than the timeout reads differently from a slow epoch
        why = f"{why}; it was {progress.phase(run_dir / 'logs', point.key)} when stopped"
        return make_record(workload, point, run_id, prov, Status.TIMEOUT, reason=why, log_tail=tail, log=log_name,
                           timings=no_timings(elapsed))
    try:
        res = read_child_result(art) if exited_ok or engine is None else None
    except (OSError, ValueError, KeyError) as e:
        res = ChildResult(Status.FAILED, reason=f"the configuration's result in {art} is unreadable ({e})")
    if res is not None and res.status == Status.UNAVAILABLE:
        return make_record(workload, point, run_id, prov, Status.UNAVAILABLE, reason=res.reason)
    if res is None or res.status != Status.OK or not exited_ok:
        res = res or ChildResult(Status.FAILED, failed_process=failed_process)
        reason = res.reason or why or "no result written"
        return make_record(workload, point, run_id, prov, Status.FAILED, reason=reason, log_tail=tail, log=log_name,
                           failed_process=res.failed_process, details=res.details, timings=no_timings(elapsed))
    record = ok_record(workload, point, run_id, prov, res.output, evaluator(), elapsed, spawn, log=log_name)
    # The snapshots are evaluated (the record's curve holds what they gave): their file is the
    # model's weights once per epoch (48 MB for the embedded default's 40 epochs of a
    # 300k-parameter MLP), which no later step reads. The final weights stay.
    (art / SNAPS_FILE).unlink(missing_ok=True)
    return record


HOST_CHECK_S = 20.0
"""Bound on checking every host of a ``[cluster] hosts`` list before a sweep (seconds)."""


def check_cluster_ready(cfg: ExperimentConfig) -> None:
    """Before anything is written: ``[run] device = "gpu"`` has a GPU where the sweep runs on
    this machine (user test, helper-40: every configuration was recorded ``unavailable``,
    exit 1); an emulated cluster can be built here; every real host answers (within
    :data:`HOST_CHECK_S`) with the same distbench, TensorFlow, Keras and Horovod as this
    machine, as ``distbench env --cluster`` checks.

    Raises:
        ConfigError: no GPU (or every GPU hidden) for ``device = "gpu"``; one line per
            problem, each naming its host (unreachable, no answer in time, a different
            version, a port in use), or why no cluster can be emulated.
    """
    if cfg.run.device == "gpu" and not cfg.cluster.hosts:  # a real cluster's hosts may have GPUs its head has not
        from distbench import gpu

        if not gpu.listed() or gpu.hidden_by_user():
            raise ConfigError(gpu.problem("gpu") or 'run.device = "gpu": no GPU here')
    if cfg.cluster.emulate is not None:
        from distbench.cluster.emulated import require_available, require_free_subnet
        from distbench.config.cluster import parse_subnet

        require_available()
        require_free_subnet(parse_subnet("cluster.emulate.subnet", cfg.cluster.emulate.subnet,
                                         cfg.cluster.emulate.hosts))
    elif cfg.cluster.hosts:
        from distbench.cluster.hostcheck import check_cluster_hosts

        _, checks = check_cluster_hosts(cfg, HOST_CHECK_S)
        problems = [p for c in checks for p in c.problems]
        if problems:
            raise ConfigError(f"[cluster] hosts not ready: {'; '.join(problems)} (see 'distbench env --cluster "
                              "CONFIG')")


@contextlib.contextmanager
def emulated_cluster(cfg: ExperimentConfig) -> Iterator[Any]:
    """The sweep's emulated cluster (``[cluster] emulate``), created for the sweep and torn
    down after it (also on an error or a signal; a SIGKILLed sweep's leftovers go with the
    next one or ``distbench cluster down``); its id reaches the configurations' processes
    through :data:`~distbench.cluster.placement.CLUSTER_ID_ENV`. ``None`` without ``emulate``.

    Raises:
        ConfigError: the cluster could not be built (:func:`check_cluster_ready` said it can).
    """
    if cfg.cluster.emulate is None:
        yield None
        return
    from distbench.cluster.emulated import EmulatedCluster

    with EmulatedCluster.from_config(cfg.cluster) as cluster:
        os.environ[CLUSTER_ID_ENV] = cluster.id  # inherited by every configuration's process
        try:
            yield cluster
        finally:
            os.environ.pop(CLUSTER_ID_ENV, None)


Execute = Callable[[Workload, ConfigPoint, str, dict[str, Any], Callable[[], Evaluator]], dict[str, Any]]
"""How the sweep runs one configuration: ``(workload, point, run_id, provenance, evaluator) -> record``."""


def _next_round(cfg: ExperimentConfig, points: list[ConfigPoint], run_dir: Path,
                on_round: Callable[[str, list[ConfigPoint]], None] | None) -> list[ConfigPoint]:
    """The next round of ``repeats = "auto"`` (none without it), announced through
    ``on_round`` (default: logged); see :func:`run_sweep`."""
    if not cfg.run.auto_repeats:
        return []
    more, decision = auto_round(points, read_records(run_dir))
    line = decision.line()  # None once advice needs no more runs
    if line:
        (on_round or (lambda text, _: _LOG.info("%s", text)))(line, more)
    return more


def _provenance(cfg: ExperimentConfig, run_dir: Path, launcher: str | None) -> dict[str, Any]:
    """The sweep's provenance, written to ``run_dir/provenance.json``; with ``[run] device =
    "cpu"`` the GPUs are hidden first, so that its ``CUDA_VISIBLE_DEVICES`` says so."""
    if cfg.run.device == "cpu":
        gpu.hide_gpus()
    prov = provenance.collect(cfg.training.seed)
    if launcher:
        prov["launcher"] = launcher
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=2))
    return prov


def run_sweep(cfg: ExperimentConfig, run_dir: Path, resume: bool = False,
              on_progress: Callable[[str, int, int, dict[str, Any] | None], None] | None = None,
              workload: Workload | None = None, execute: Execute | None = None,
              launcher: str | None = None,
              on_round: Callable[[str, list[ConfigPoint]], None] | None = None) -> list[dict[str, Any]]:
    """Run every configuration of ``cfg`` not yet recorded in ``run_dir`` (the one sweep loop:
    ``distbench run`` and the spark-submit app both use it).

    Under ``repeats = "auto"`` every configuration runs once, then round after round the
    ones the recommendation cannot separate yet run once more
    (:func:`~distbench.harness.matrix.auto_round`), until it can or each has run
    :data:`~distbench.results.advice.AUTO_MAX_RUNS` times; a resumed sweep continues the
    rounds from its records.

    Args:
        cfg: validated experiment config.
        run_dir: run directory (created if missing).
        resume: continue an existing run directory, skipping recorded configurations.
        on_progress: called as ``(key, index, total, record_or_None)`` before (record None)
            and after each configuration; ``index`` counts across the rounds and ``total``
            grows by each extra round when it is planned.
        workload: the workload already prepared by :func:`prepare_run_dir` (else done here).
        execute: runs one configuration and returns its record (default :func:`run_point`:
            a fresh child process per configuration).
        launcher: recorded in the provenance (e.g. ``spark-submit``); None for ``distbench run``.
        on_round: called as ``(line, points)`` when ``"auto"`` plans an extra round (its
            configurations, before ``on_progress`` announces the first), and with no points
            when the rounds stop short of advice; the line says why (default: logged).

    Returns:
        Every record of the run directory (earlier and new).

    Raises:
        ConfigError: see :func:`prepare_run_dir` and :func:`check_cluster_ready`; unknown
            strategies.
    """
    points = expand(cfg)  # validates strategy names before anything is written
    if workload is None:  # (else the caller checked and prepared)
        check_cluster_ready(cfg)
        workload = prepare_run_dir(cfg, run_dir, resume)
    run_id = run_dir.name
    prov = _provenance(cfg, run_dir, launcher)
    done = recorded(read_records(run_dir))
    todo = [p for p in points if (p.config_id, p.repeat) not in done]
    cached: list[Evaluator] = []

    def evaluator() -> Evaluator:
        if not cached:
            cached.append(Evaluator(workload))
        return cached[0]

    next_round = functools.partial(_next_round, cfg, points, run_dir, on_round)
    with emulated_cluster(cfg) as cluster, contextlib.ExitStack() as stack:
        stack.callback(close_engines)
        if not todo:  # a resumed "auto" sweep continues its rounds
            todo = next_round()
        if todo:  # the configurations' processes read the splits from here (docs/architecture.md)
            stack.callback(remove_dataset_cache, run_dir)
            try:
                workload.write_dataset_cache()
            except OSError as e:  # each process then loads the source, as without a cache
                _LOG.warning("could not cache the dataset in %s (%s): each configuration loads it", run_dir, e)
        i, total = 0, len(todo)
        while todo:
            for point in todo:
                if on_progress:
                    on_progress(point.key, i, total, None)
                if cluster is not None and point.bandwidth:
                    cluster.set_bandwidth(point.bandwidth)
                rec = (execute or run_point)(workload, point, run_id, prov, evaluator)
                append_record(run_dir, rec)
                i += 1
                if on_progress:
                    on_progress(point.key, i, total, rec)
            todo = next_round()
            total += len(todo)
    return read_records(run_dir)

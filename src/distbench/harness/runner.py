"""Run a sweep: each configuration in its own fresh child process, with a timeout,
logs in ``<run_dir>/logs/``, one record appended per configuration as it finishes,
``--resume`` skipping what is recorded, and progress shown with rich.

Process layout: ``distbench run`` (this module, :func:`run_sweep`) spawns, per
configuration, ``python -m distbench worker config ...`` (:func:`child_main`) in a new
process group; the child loads the workload and calls the strategy's ``launch``, which
trains in the child or starts more processes. The child saves a
:class:`~distbench.training.TrainOutput` in ``<run_dir>/artifacts/<key>/``; the parent
evaluates it (:mod:`distbench.harness.evaluate`) and writes the record. The ``spark_ps``
and ``mpi_ps`` configurations go to one engine shared by the sweep instead
(:mod:`distbench.harness.shared_engine`), which leaves the same result.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from distbench.config import ConfigError, ExperimentConfig, from_dict
from distbench import gpu
from distbench.harness import progress
from distbench.harness.child import (  # noqa: F401 (re-exported: the engines' and apps' contract)
    PHASE_MARKS, artifacts_dir, failure_reason, run_configuration)
from distbench.harness.evaluate import Evaluator
from distbench.harness.engines import close_engines, engine_for, stop_unless_reused
from distbench.harness.matrix import ConfigPoint, auto_round, expand
from distbench.results import provenance
from distbench.results.records import Status, new_record
from distbench.results.store import append_record, read_records, recorded
from distbench.scenario import Scenario
from distbench.cluster.placement import CLUSTER_ID_ENV, Placement
from distbench.launch import commands, process
from distbench.strategies import registry
from distbench.strategies.base import Availability, LaunchContext
from distbench.training import TrainOutput
from distbench.training.output import SNAPS_FILE, ChildResult, read_child_result
from distbench.workload import CONFIG_FILE, WORKLOAD_DIR, Workload, checked_dataset, remove_dataset_cache

_LOG = logging.getLogger("distbench.harness.runner")
WORKLOAD_SECTIONS = ("data", "model", "training")


def recorded_config(run_dir: Path) -> ExperimentConfig:
    """The config recorded in ``run_dir`` (keys added since then hold their defaults).

    Raises:
        ConfigError: no readable config file there, or one this version cannot read.
    """
    path = run_dir / CONFIG_FILE
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"--resume: cannot read {str(path)!r} ({e}); expected a run directory made by "
                          "'distbench run'") from None
    try:
        return from_dict(raw)
    except ConfigError as e:
        raise ConfigError(f"--resume: the config recorded in {str(path)!r} cannot be read by this version ({e}); "
                          "pass the run's TOML file as CONFIG_FILE") from None


def check_run_dir(cfg: ExperimentConfig, run_dir: Path, resume: bool, flags: dict[str, str] | None = None) -> None:
    """The run-directory errors, which need no TensorFlow: ``distbench run`` checks them
    before importing it, so a used ``--out`` is refused at once (0.3 s on 2 cores; after
    TensorFlow's import it took 4.7-8.6 s there, 18.8 s on a newcomer's machine).

    Args:
        cfg: the sweep's config.
        run_dir: the run directory.
        resume: continue the run in ``run_dir``.
        flags: ``section.key`` -> the command-line flag that set it (named in errors).

    Raises:
        ConfigError: results already exist without ``--resume``; or on resume the
            data/model/training settings differ from the recorded ones (naming each
            setting, its recorded and given value and the flag that changed it).
    """
    if not (run_dir / WORKLOAD_DIR).exists():
        return
    if not resume:
        raise ConfigError(f"run directory {run_dir} already holds a run: pass --resume to continue it, "
                          "or choose a new --out directory")
    raw = json.loads((run_dir / CONFIG_FILE).read_text())
    new = cfg.to_dict()
    defaults = ExperimentConfig().to_dict()  # keys added since the run was made hold their defaults
    flags = flags or {}
    old = {sec: {**defaults[sec], **raw.get(sec, {})} for sec in WORKLOAD_SECTIONS}
    changed = [(sec, k) for sec in WORKLOAD_SECTIONS for k, v in new[sec].items() if old[sec].get(k) != v]
    if not changed:
        return
    keys = [f"{sec}.{k}" for sec, k in changed]
    diff = "; ".join(f"{key} recorded {old[sec].get(k)!r}, given {new[sec][k]!r}"
                     + (f" by {flags[key]}" if key in flags else "") for key, (sec, k) in zip(keys, changed))
    named = [flags[key] for key in keys if key in flags]
    fix = (f"drop {' and '.join(named)} (the recorded values are used)" if named else
           "give the recorded values in CONFIG_FILE, or leave CONFIG_FILE out to use the recorded config")
    if keys == ["training.target_accuracy"]:  # scored after the run: no new training needed
        fix += (f"; to score the recorded runs against another target, use 'distbench report {run_dir} "
                f"--target-accuracy {new['training']['target_accuracy']}'")
    raise ConfigError(f"--resume: the workload must stay identical to the run in {run_dir}, but {diff}; "
                      f"{fix}, or use a new --out")


def prepare_run_dir(cfg: ExperimentConfig, run_dir: Path, resume: bool,
                    flags: dict[str, str] | None = None, before_model: Callable[[], None] | None = None) -> Workload:
    """Create the workload in a new run directory, or load it for ``--resume``.

    Everything that needs no TensorFlow is checked before the model is built: the run
    directory (:func:`check_run_dir`) and the data (:func:`~distbench.workload.checked_dataset`);
    building the model imports TensorFlow, and its errors (a factory that fails, an output
    of the wrong shape) need it.

    Args:
        cfg: the sweep's config.
        run_dir: the run directory.
        resume: continue the run in ``run_dir``.
        flags: ``section.key`` -> the command-line flag that set it (named in errors).
        before_model: called once those checks pass, before a new run's model is built
            (``distbench run``: :func:`~distbench.harness.evaluate.hide_accelerators`, which
            imports TensorFlow quietly and off the GPUs; a Horovod rank keeps its GPU).

    Returns:
        the run's :class:`~distbench.workload.Workload`.

    Raises:
        ConfigError: see :func:`check_run_dir`; the data or the model are invalid.
    """
    check_run_dir(cfg, run_dir, resume, flags)
    if not (run_dir / WORKLOAD_DIR).exists():
        dataset = checked_dataset(cfg)  # bad data files are reported before TensorFlow is imported
        if before_model is not None:
            before_model()
        created = not run_dir.exists()
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create the run directory {str(run_dir)!r} ({e.strerror or e}); "
                              "pass --out with a path in a writable folder") from None
        try:
            return Workload.create(cfg, run_dir, dataset)
        except BaseException:
            if created:  # leave nothing that looks like a run
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
    (run_dir / CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))  # new sweep settings (run/ps/spark)
    return Workload.load(run_dir)


def base_fields(workload: Workload, point: ConfigPoint, replicas: int) -> dict[str, Any]:
    """Record fields known before a configuration runs.

    ``learning_rate`` is the local optimizer's, as the strategy trains with it: scaled by
    the replicas under ``lr_scaling = "linear"`` only where the strategy applies the
    scaling (:attr:`~distbench.strategies.base.Strategy.scales_learning_rate`).
    """
    t = workload.config.training
    scaled = registry.strategy_class(point.strategy).scales_learning_rate
    return {
        "global_batch_size": t.global_batch_size,
        "per_replica_batch_size": t.global_batch_size // replicas,
        "replicas": replicas,
        "epochs": t.epochs,
        "learning_rate": workload.learning_rate(replicas if scaled else 1),
        "lr_scaling": t.lr_scaling,
        "optimizer": t.optimizer,
        "target_accuracy": t.target_accuracy,
        "initial_weights_sha256": workload.initial_weights_sha256,
        "workload": workload.describe(),
    }


def make_record(workload: Workload, point: ConfigPoint, run_id: str, prov: dict[str, Any], status: Status,
                replicas: int | None = None, **fields: Any) -> dict[str, Any]:
    """A record of ``point`` with the fields every record carries (:func:`base_fields`, the
    provenance) and ``fields``; the one place the harness builds records (through
    :func:`distbench.results.records.new_record`).

    Args:
        replicas: replicas that trained (default: the strategy's count for ``point.workers``).
    """
    if replicas is None:
        replicas = registry.get(point.strategy).replicas(point.workers)
    base = base_fields(workload, point, replicas)
    return new_record(run_id, point.strategy, point.workers, point.repeat, status, point.window,
                      point.bandwidth, scenario=point.scenario, **{**base, "provenance": prov, **fields})


def phases(out: TrainOutput, spawn_unix: float, total_s: float, eval_s: float) -> dict[str, float]:
    """Where a configuration's wall time went, in seconds, from the child's timestamps.

    Keys (each >= 0; together they add up to ``total_s + eval_s`` within clock noise):
    ``process_start_s`` (spawn of the configuration's process to its entry: Python and
    distbench imports), ``workload_s`` (loading the run's workload and initial weights),
    ``engine_start_s`` (the strategy's own start-up to its first step: TensorFlow import,
    worker processes, Spark session/executors, horovodrun/mpirun and rendezvous, TF
    servers; tracing excluded), ``trace_s`` (tracing the step before the clock),
    ``train_s`` (the training clock), ``off_clock_s`` (during training but off its clock:
    per-epoch snapshots, plus the engine's teardown before the strategy returns),
    ``exit_s`` (saving the output and leaving the process) and ``eval_s`` (evaluation in the
    sweep's process). When the child recorded no timestamps (a strategy run under the
    user's own launcher: horovodrun, mpirun, TF_CONFIG, spark-submit), the phases it cannot
    tell apart are not guessed: ``engine_start_s`` is then everything from ``spawn_unix`` to
    the first step but tracing (process start and workload included), ``off_clock_s``
    everything from the end of the training clock to ``total_s`` (exit included), and
    ``process_start_s``, ``workload_s`` and ``exit_s`` are absent.

    Args:
        out: the child's output; its ``extra`` holds :data:`PHASE_MARKS` (popped).
        spawn_unix: Unix time the sweep spawned the child.
        total_s: seconds from the spawn to the child's exit.
        eval_s: evaluation seconds.
    """
    marks = out.extra.pop(PHASE_MARKS, None)
    trace = float(out.extra.get("trace_s") or 0.0)
    if not marks:
        coarse = {"engine_start_s": out.first_step_unix - spawn_unix - trace, "trace_s": trace,
                  "train_s": out.train_s, "off_clock_s": spawn_unix + total_s - out.first_step_unix - out.train_s,
                  "eval_s": eval_s}
        return {k: round(max(0.0, v), 4) for k, v in coarse.items()}
    start, loaded, end = marks["child_start_unix"], marks["workload_unix"], marks["launch_end_unix"]
    raw = {"process_start_s": start - spawn_unix, "workload_s": loaded - start,
           "engine_start_s": out.first_step_unix - loaded - trace, "trace_s": trace, "train_s": out.train_s,
           "off_clock_s": end - out.first_step_unix - out.train_s, "exit_s": spawn_unix + total_s - end,
           "eval_s": eval_s}
    return {k: round(max(0.0, v), 4) for k, v in raw.items()}


PHASE_WORDS = (("train_s", "training"), ("engine_start_s", "engine start-up"), ("process_start_s", "process start"),
               ("workload_s", "workload load"), ("trace_s", "tracing"), ("off_clock_s", "snapshots and teardown"),
               ("exit_s", "exit"), ("eval_s", "evaluation"))


def time_breakdown(records: list[dict[str, Any]], wall_s: float, setup_s: float = 0.0, report_s: float = 0.0) -> str:
    """One line saying where a sweep's wall time went: the sum of each phase of
    :func:`phases` over ``records`` (seconds and share of ``wall_s``), the sweep's own
    set-up and report, and what none of these accounts for (between configurations:
    spawning, records, progress; records without phases).

    Args:
        records: the records this sweep wrote.
        wall_s: the sweep's wall-clock seconds.
        setup_s: seconds before the first configuration (config, TensorFlow import in
            the sweep's process, workload preparation: data load, split, initial weights).
        report_s: seconds writing and printing the report after the last one.
    """
    sums = {k: 0.0 for k, _ in PHASE_WORDS}
    for r in records:
        t = r.get("timings") or {}
        for k in sums:
            sums[k] += float((t.get("phases") or {}).get(k) or (t.get(k) if k in ("train_s", "eval_s") else 0) or 0)
    if not records:
        return f"sweep: nothing to run (every configuration was already recorded); {wall_s:.1f} s"
    wall = max(wall_s, 1e-9)
    sums["setup_s"], sums["report_s"] = setup_s, report_s
    words = PHASE_WORDS + (("setup_s", "sweep set-up (workload, initial weights)"), ("report_s", "report"))
    parts = [f"{word} {sums[k]:.1f} s ({100 * sums[k] / wall:.0f}%)" for k, word in words if sums[k] >= 0.05]
    rest = wall_s - sum(sums.values())
    if rest >= 0.05:
        parts.append(f"other {rest:.1f} s ({100 * rest / wall:.0f}%: between configurations)")
    return f"sweep: {len(records)} configuration(s) in {wall_s:.1f} s" + (": " + ", ".join(parts) if parts else "")


def _no_timings(total_s: float | None) -> dict[str, float | None]:
    return {"total_s": total_s, "startup_s": None, "train_s": None, "eval_s": None}


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
                           timings=_no_timings(elapsed))
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
                           failed_process=res.failed_process, details=res.details, timings=_no_timings(elapsed))
    record = ok_record(workload, point, run_id, prov, res.output, evaluator(), elapsed, spawn, log=log_name)
    # The snapshots are evaluated (the record's curve holds what they gave): their file is the
    # model's weights once per epoch (48 MB for the embedded default's 40 epochs of a
    # 300k-parameter MLP), which no later step reads. The final weights stay.
    (art / SNAPS_FILE).unlink(missing_ok=True)
    return record


def ok_record(workload: Workload, point: ConfigPoint, run_id: str, prov: dict[str, Any], out: TrainOutput,
              evaluator: Evaluator, total_s: float, spawn_unix: float, **fields: Any) -> dict[str, Any]:
    """The record of a configuration that trained: evaluate ``out`` and fill every field.

    Args:
        total_s: wall seconds of the whole configuration (spawn to end of training).
        spawn_unix: Unix time the configuration's process (or job) started.
        fields: extra record fields (e.g. ``log``).

    A ``replicas_in_sync_check`` of ``"failed"`` in ``out.extra`` makes the record
    ``failed`` ("ranks diverged"), with its numbers kept.
    """
    scored = evaluator.score(out, workload.config.training.target_accuracy)
    phase_s = phases(out, spawn_unix, total_s, scored["eval_s"])
    extra = dict(out.extra)
    status, reason = Status.OK, ""
    if extra.get("replicas_in_sync_check") == "failed":
        status, reason = Status.FAILED, "ranks diverged: replicas ended with different weights"
    lr = {"learning_rate": extra["local_learning_rate"]} if extra.get("local_learning_rate") is not None else {}
    return make_record(
        workload, point, run_id, prov, status, out.replicas, **lr, reason=reason,
        timings={"total_s": total_s, "startup_s": max(0.0, out.first_step_unix - spawn_unix),
                 "train_s": out.train_s, "eval_s": scored.pop("eval_s"), **({"phases": phase_s} if phase_s else {})},
        samples_per_s=out.samples / out.train_s if out.train_s > 0 else None,
        steps=out.steps, samples=out.samples, details=extra,
        hosts=extra.get("cluster_hosts") or [prov.get("hostname")], **scored, **fields,
    )


HOST_CHECK_S = 20.0
"""Bound on checking every host of a ``[cluster] hosts`` list before a sweep (seconds)."""


def check_cluster_ready(cfg: ExperimentConfig) -> None:
    """Before anything is written: an emulated cluster can be built here; every real host
    answers (within :data:`HOST_CHECK_S`) with the same distbench, TensorFlow, Keras and
    Horovod as this machine, as ``distbench env --cluster`` checks.

    Raises:
        ConfigError: one line per problem, each naming its host (unreachable, no answer in
            time, a different version, a port in use), or why no cluster can be emulated.
    """
    if cfg.cluster.emulate is not None:
        from distbench.cluster.emulated import require_available, require_free_subnet
        from distbench.cluster.spec import parse_subnet

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


def child_main(run_dir: Path, key: str, strategy: str, workers: int, window: int | None = None,
               scenario: Scenario | None = None) -> int:
    """Entry of the per-configuration child process (``distbench worker config``).

    Trains with the strategy and saves its :class:`TrainOutput`; on
    :class:`StrategyUnavailable` or an exception it writes a ``result.json`` with that
    status and reason. Returns the process exit code (0 ok/unavailable, 1 failed).
    """
    marks = {"child_start_unix": time.time()}
    process.install_cleanup_handler()
    art = artifacts_dir(run_dir, key)

    def train() -> TrainOutput:
        workload = Workload.load(run_dir, cached=True)
        marks["workload_unix"] = time.time()
        ctx = LaunchContext(workload, run_dir, key, workers, art, run_dir / "logs" / key,
                            workload.config.run.timeout_s, window, scenario=scenario,
                            placement=Placement.from_config(workload.config.cluster))
        return registry.get(strategy).launch(ctx)

    return 0 if run_configuration(art, marks, train) else 1

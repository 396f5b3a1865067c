"""Record assembly: the fields every record carries, a trained configuration's record from
its child output (evaluated), the phases of its wall time and the sweep's time breakdown.
Every record goes through :func:`make_record` to
:func:`distbench.results.records.new_record`."""

from __future__ import annotations

from typing import Any

from distbench.harness.child import PHASE_MARKS
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import ConfigPoint
from distbench.results.records import Status, new_record
from distbench.strategies import registry
from distbench.training import TrainOutput
from distbench.workload import Workload


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


PHASE_WORDS = (("train_s", "training"), ("engine_start_s", "framework and engine start-up"),
               ("process_start_s", "process start"),
               ("workload_s", "workload load"), ("trace_s", "tracing"), ("off_clock_s", "snapshots and teardown"),
               ("exit_s", "exit"), ("eval_s", "evaluation"))


def time_breakdown(records: list[dict[str, Any]], wall_s: float, setup_s: float = 0.0, report_s: float = 0.0) -> str:
    """One line saying where a sweep's wall time went: the sum of each phase of
    :func:`phases` over ``records`` (seconds and share of ``wall_s``), the sweep's own
    set-up and report, the wall time of configurations that ended without phases (failed,
    timed out: user test, helper-40, two time-outs read as "between configurations"), and
    what none of these accounts for (between configurations: spawning, records, progress).

    Args:
        records: the records this sweep wrote.
        wall_s: the sweep's wall-clock seconds.
        setup_s: seconds before the first configuration (config, TensorFlow import in
            the sweep's process, workload preparation: data load, split, initial weights).
        report_s: seconds writing and printing the report after the last one.
    """
    sums = {k: 0.0 for k, _ in PHASE_WORDS} | {"not_ok_s": 0.0}
    for r in records:
        t = r.get("timings") or {}
        if not t.get("phases") and r.get("status", "ok") != "ok":
            sums["not_ok_s"] += float(t.get("total_s") or 0)
            continue
        for k, _ in PHASE_WORDS:
            sums[k] += float((t.get("phases") or {}).get(k) or (t.get(k) if k in ("train_s", "eval_s") else 0) or 0)
    if not records:
        return f"sweep: nothing to run (every configuration was already recorded); {wall_s:.1f} s"
    wall = max(wall_s, 1e-9)
    sums["setup_s"], sums["report_s"] = setup_s, report_s
    words = PHASE_WORDS + (("not_ok_s", "configurations that failed or timed out"),
                           ("setup_s", "sweep set-up (workload, initial weights)"), ("report_s", "report"))
    parts = [f"{word} {sums[k]:.1f} s ({100 * sums[k] / wall:.0f}%)" for k, word in words if sums[k] >= 0.05]
    rest = wall_s - sum(sums.values())
    if rest >= 0.05:
        parts.append(f"other {rest:.1f} s ({100 * rest / wall:.0f}%: between configurations)")
    return f"sweep: {len(records)} configuration(s) in {wall_s:.1f} s" + (": " + ", ".join(parts) if parts else "")


def no_timings(total_s: float | None) -> dict[str, float | None]:
    return {"total_s": total_s, "startup_s": None, "train_s": None, "eval_s": None}


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

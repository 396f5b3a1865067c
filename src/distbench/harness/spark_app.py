"""The ``spark-submit`` application: the parameter-server strategies of a config, run on
the cluster that ``spark-submit`` gives, writing the same records as ``distbench run``.

    PYSPARK_PYTHON=$(which python) spark-submit --master spark://host:7077 \\
        $(distbench where spark-app) --config cfg.toml --out DIR

It runs every ``spark_ps:*`` configuration of the config's sweep (``run.strategies``;
``all`` = every parameter-server optimizer) for each worker count and repeat, in this
driver process on the SparkSession ``spark-submit`` created, evaluates each centre on
the test split, and appends one record per configuration to ``DIR/results.jsonl``
(``--resume`` semantics: already recorded configurations are skipped, so re-submitting
continues a sweep). ``distbench report DIR`` renders it, alone or merged with others.

Once its session exists, the master and Spark properties ``spark-submit`` gave are
checked like a config's ``[spark]`` section (exit 2 with one line), and each
configuration first checks the barrier slots (too few: a ``failed`` record naming them,
and the sweep goes on).
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import click

from distbench import config as config_mod
from distbench.config import ConfigError
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import ConfigPoint, expand, strategy_names
from distbench.harness.progress import progress_label, result_detail
from distbench.harness.assembly import make_record, ok_record, time_breakdown
from distbench.harness.child import artifacts_dir, failure_reason
from distbench.harness.rundir import prepare_run_dir
from distbench.harness.runner import run_sweep
from distbench.contracts import Status
from distbench.results.store import RESULTS_FILE, no_answer, read_records, recorded
from distbench.strategies import registry
from distbench.strategies.base import LaunchContext
from distbench.training.output import TrainingFailed
from distbench.workload import Workload


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Experiment TOML (default: embedded).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Run directory (created or resumed).")
@click.option("--workers", help="Worker counts, e.g. 2 or 2,4 (overrides run.workers).")
def main(config_file: str | None, out: str, workers: str | None) -> None:
    """Run the config's spark_ps strategies on the cluster spark-submit provides."""
    try:
        cfg = config_mod.load(config_file)
        if workers:
            cfg = config_mod.override(cfg, run__workers=[int(w) for w in workers.split(",")])
        family = registry.families()["spark_ps"]
        names = [s for s in strategy_names(cfg) if s in family]
        cfg = config_mod.override(cfg, run__strategies=names or ["spark_ps"])
        run_dir = Path(out)
        workload = prepare_run_dir(cfg, run_dir, resume=run_dir.exists())
    except (ConfigError, ValueError) as e:
        click.echo(f"distbench spark-app: error: {e}", err=True)
        sys.exit(2)
    from distbench.ps_async.spark import make_session
    from distbench.config.spark import check_conf, parse_master
    from distbench.ps_async.spark_spec import SparkSpecError

    try:
        spark = make_session(None, cfg.spark.conf)  # the master comes from spark-submit
    except SparkSpecError as e:
        click.echo(f"distbench spark-app: error: {e}", err=True)
        sys.exit(1)
    try:  # the master and properties spark-submit gave get the checks a config's [spark] gets
        sc = spark.sparkContext
        check_conf(parse_master(sc.master), {k: v for k, v in sc.getConf().getAll() if k != "spark.master"})
    except ConfigError as e:
        spark.stop()
        click.echo(f"distbench spark-app: error: {e}", err=True)
        sys.exit(2)

    def on_session(workload: Workload, point: ConfigPoint, run_id: str, prov: dict[str, Any],
                   evaluator: Callable[[], Evaluator]) -> dict[str, Any]:
        """Run one configuration in this driver on spark-submit's session."""
        t0 = time.time()
        ctx = LaunchContext(workload, run_dir, point.key, point.workers, artifacts_dir(run_dir, point.key),
                            run_dir / "logs" / point.key, cfg.run.timeout_s, point.window,
                            scenario=point.scenario)
        try:
            out_ = registry.get(point.strategy).train_on_session(spark, ctx)
            return ok_record(workload, point, run_id, prov, out_, evaluator(), time.time() - t0, t0)
        except Exception as e:  # recorded (its traceback in a log file, not on the console), and the sweep goes on
            failed = e if isinstance(e, TrainingFailed) else None
            log, trace = Path("logs") / f"{point.key}.log", traceback.format_exc()
            (run_dir / log).parent.mkdir(parents=True, exist_ok=True)
            (run_dir / log).write_text(trace)
            return make_record(workload, point, run_id, prov, Status.FAILED, reason=failure_reason(e),
                               log=str(log), log_tail=trace[-4000:],
                               failed_process=failed.failed_process if failed else None,
                               details=failed.details if failed else None,
                               timings={"total_s": time.time() - t0, "startup_s": None, "train_s": None,
                                        "eval_s": None})

    done = recorded(read_records(run_dir))
    points = expand(cfg)
    label_of = {p.key: progress_label(p, cfg.run.repeats) for p in points}  # as distbench run names them
    todo = sum((p.config_id, p.repeat) not in done for p in points)
    click.echo(f"distbench spark-app: {run_dir}: {todo} of {len(points)} configuration(s) to run"
               + (f", {len(points) - todo} already recorded (skipped)" if todo < len(points) else ""))

    def progress(key: str, i: int, n: int, rec: dict[str, Any] | None) -> None:
        if rec is not None:
            click.echo(f"[{i}/{n}] {label_of.get(key, key)}: {rec['status']} {result_detail(rec)}")

    def on_round(line: str, more: list[ConfigPoint]) -> None:  # repeats "auto" plans another round
        label_of.update((p.key, progress_label(p, cfg.run.repeats)) for p in more)
        click.echo(line)

    t0 = time.time()
    try:
        records = run_sweep(cfg, run_dir, resume=True, on_progress=progress, workload=workload,
                            execute=on_session, launcher="spark-submit", on_round=on_round)
    finally:
        spark.stop()
    new = [r for r in records if (r.get("config_id"), r.get("repeat")) not in done]  # this submission's
    click.echo(time_breakdown(new, time.time() - t0))
    click.echo(f"distbench spark-app: {len(records)} record(s) in {run_dir / RESULTS_FILE}; "
               f"'distbench report {run_dir}' shows them")
    _exit_without_answer(new, run_dir)


def _exit_without_answer(new: list[dict[str, Any]], run_dir: Path) -> None:
    """Exit 1 (spark-submit's exit status, as ``distbench run``'s) when none of this submission's
    records ``new`` ended ok, saying so in one line."""
    nothing = no_answer(new)
    if nothing:
        click.echo(f"distbench spark-app: {nothing}: 'distbench report {run_dir}' lists each one's reason", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

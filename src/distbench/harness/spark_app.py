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

import click

from distbench import config as config_mod
from distbench.config import ConfigError
from distbench.harness.evaluate import Evaluator
from distbench.harness.matrix import expand
from distbench.harness.runner import artifacts_dir, failure_reason, ok_record, prepare_run_dir
from distbench.results import provenance
from distbench.results.records import new_record
from distbench.results.store import append_record, read_records
from distbench.strategies.base import LaunchContext
from distbench.strategies.spark_ps import train_on_spark


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
        names = [s for s in cfg.run.strategies if s.startswith("spark_ps:")]
        if "all" in cfg.run.strategies or not names:
            names = ["spark_ps:" + o for o in ("downpour", "adag", "dynsgd", "aeasgd", "eamsgd", "easgd", "averaging")]
        cfg = config_mod.override(cfg, run__strategies=names)
        run_dir = Path(out)
        workload = prepare_run_dir(cfg, run_dir, resume=run_dir.exists())
    except (ConfigError, ValueError) as e:
        click.echo(f"distbench spark-app: error: {e}", err=True)
        sys.exit(2)
    from distbench.ps_async.spark import make_session
    from distbench.ps_async.spark_spec import SparkSpecError, check_conf, parse_master

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
    prov = provenance.collect(cfg.training.seed)
    prov["launcher"] = "spark-submit"
    evaluator = Evaluator(workload)
    done = {(r.get("config_id"), r.get("repeat")) for r in read_records(run_dir)}
    for point in expand(cfg):
        if (point.config_id, point.repeat) in done:
            continue
        t0 = time.time()
        ctx = LaunchContext(workload, run_dir, point.key, point.workers, artifacts_dir(run_dir, point.key),
                            run_dir / "logs" / point.key, cfg.run.timeout_s, point.window)
        try:
            out_ = train_on_spark(spark, ctx, point.strategy.split(":", 1)[1])
            rec = ok_record(workload, point, run_dir.name, prov, out_, evaluator, time.time() - t0, t0)
        except Exception as e:  # recorded, and the sweep goes on
            traceback.print_exc()
            rec = new_record(run_dir.name, point.strategy, point.workers, point.repeat, "failed", point.window,
                             reason=failure_reason(e),
                             log_tail=traceback.format_exc()[-4000:], provenance=prov,
                             timings={"total_s": time.time() - t0, "startup_s": None, "train_s": None, "eval_s": None})
        append_record(run_dir, rec)
        click.echo(f"{point.key}: {rec['status']} {rec.get('final_test_accuracy') or rec.get('reason')}")
    spark.stop()


if __name__ == "__main__":
    main()

"""The ``distbench`` command line (click): ``run``, ``report``, ``env``, ``list``, ``worker``.

Bad input (config, flags, data files) exits with status 2 and one line naming what was
received and what is allowed; no traceback.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from distbench import __version__
from distbench import config as config_mod
from distbench.config import ConfigError


def _user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn :class:`ConfigError` into one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            click.echo(f"distbench: error: {e}", err=True)
            sys.exit(2)

    return wrapper


def _int_list(flag: str, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected an integer or a comma-separated list, e.g. 2 or 1,2,4") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distbench")
def main() -> None:
    """Train the same Keras model under several distributed-training strategies and
    compare them fairly (accuracy, time, throughput, speed-up)."""
    logging.basicConfig(level=logging.WARNING, format="distbench: %(levelname)s: %(message)s")
    # TensorFlow's C++ start-up notices (oneDNN, cuInit on CPU machines) are noise here;
    # level 2 still shows errors. A user's own setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@main.command()
@click.argument("config_file", required=False, type=click.Path(dir_okay=False))
@click.option("--strategies", help="Comma-separated strategy names, or 'all' (see 'distbench list').")
@click.option("--workers", help="Worker count, or comma-separated counts to sweep, e.g. 1,2,4.")
@click.option("--epochs", type=int, help="Training epochs.")
@click.option("--batch-size", type=int, help="Global batch size (per-replica = global / replicas).")
@click.option("--repeats", type=int, help="Repetitions of each configuration.")
@click.option("--out", type=click.Path(file_okay=False), help="Run directory (default runs/<timestamp>).")
@click.option("--resume", is_flag=True, help="Continue OUT, skipping configurations already recorded.")
@click.option("--timeout", type=float, help="Per-configuration time limit, seconds.")
@click.option("--preset", help="Apply a preset (local-validation, production, max-throughput, elastic) "
                               "before the other flags.")
@_user_errors
def run(config_file: str | None, strategies: str | None, workers: str | None, epochs: int | None,
        batch_size: int | None, repeats: int | None, out: str | None, resume: bool,
        timeout: float | None, preset: str | None) -> None:
    """Run the sweep in CONFIG_FILE (default: the embedded digits experiment), print the
    comparison table, and write report.md and summary.csv into the run directory."""
    from distbench.harness.runner import run_sweep

    cfg = config_mod.load(config_file)
    if preset:
        cfg = config_mod.apply_preset(cfg, preset)
    cfg = config_mod.override(
        cfg,
        run__strategies=[s.strip() for s in strategies.split(",") if s.strip()] if strategies else None,
        run__workers=_int_list("--workers", workers),
        training__epochs=epochs, training__global_batch_size=batch_size,
        run__repeats=repeats, run__timeout_s=timeout, run__out=out,
    )
    run_dir = Path(cfg.run.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    if resume and not run_dir.exists():
        raise ConfigError(f"--resume given but the run directory {str(run_dir)!r} does not exist; pass --out DIR")
    from distbench.harness.evaluate import hide_accelerators

    hide_accelerators()  # import TensorFlow here quietly, off the GPUs the children use
    records = _run_with_progress(cfg, run_dir, resume, run_sweep)
    _print_report(records, run_dir)


def _run_with_progress(cfg: config_mod.ExperimentConfig, run_dir: Path, resume: bool,
                       run_sweep: Callable[..., list[dict[str, Any]]]) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    console.print(f"distbench: run directory [bold]{run_dir}[/]")
    with Progress(TextColumn("configuration"), MofNCompleteColumn(), TextColumn("[bold]{task.description}"),
                  BarColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task("preparing workload", total=None)

        def on_progress(key: str, i: int, n: int, rec: dict[str, Any] | None) -> None:
            progress.update(task, total=n, completed=i, description=key)
            if rec is not None:
                acc = rec.get("final_test_accuracy")
                t = (rec.get("timings") or {}).get("train_s")
                detail = (f"test acc {acc:.3f}, train {t:.1f} s" if rec["status"] == "ok" and acc is not None
                          else rec.get("reason", ""))
                progress.console.print(f"[{i}/{n}] {escape(key)}: [bold]{rec['status']}[/] {escape(detail)}")

        return run_sweep(cfg, run_dir, resume=resume, on_progress=on_progress)


def _print_report(records: list[dict[str, Any]], run_dir: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from distbench.results.report import COLUMNS, table_rows, write_report
    from distbench.results.stats import summarize

    table = Table(title=f"distbench: {run_dir}")
    for c in COLUMNS:
        table.add_column(escape(c))
    summaries = summarize(records)
    for row in table_rows(summaries):
        table.add_row(*row)
    console = Console(width=max(140, Console().width))
    console.print(table)
    for s in summaries:
        if s.ok < s.repeats:
            for reason in s.reasons:
                console.print(f"  {s.config_id}: {reason}")
    paths = write_report(records, run_dir)
    console.print("wrote " + ", ".join(str(p) for p in paths))


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Output directory (default: the first RUN_DIR).")
@_user_errors
def report(run_dirs: tuple[str, ...], out: str | None) -> None:
    """Render report.md and summary.csv from one or more run directories."""
    from distbench.results.report import write_report
    from distbench.results.store import RESULTS_FILE, read_records

    records: list[dict[str, Any]] = []
    for d in run_dirs:
        if not (Path(d) / RESULTS_FILE).exists():
            raise ConfigError(f"{d!r} holds no {RESULTS_FILE}: expected a run directory made by 'distbench run'")
        records += read_records(d)
    paths = write_report(records, Path(out or run_dirs[0]))
    click.echo(Path(paths[0]).read_text())
    click.echo("wrote " + ", ".join(str(p) for p in paths))


@main.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--workers", type=int, default=2, show_default=True, help="Worker count to probe for.")
@_user_errors
def env_cmd(as_json: bool, workers: int) -> None:
    """Print this machine's provenance and whether each strategy can run here, and why not."""
    from distbench.env import report as env_report

    info = env_report(config_mod.load(None), workers)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    p = info["provenance"]
    click.echo(f"distbench {p['versions'].get('distbench')}  Python {p['python']}  {p['os']}")
    click.echo(f"host {p['hostname']}: {p['cpu_count']} x {p['cpu_model']}; GPUs: {', '.join(p['gpus']) or 'none'}")
    click.echo("packages: " + ", ".join(f"{k} {v or '-'}" for k, v in p["versions"].items()))
    click.echo(f"git commit: {p['git_commit']}")
    click.echo("\nstrategies:")
    for s in info["strategies"]:
        mark = "available  " if s["available"] else "unavailable"
        click.echo(f"  {s['name']:<22} {mark} {s['reason']}")


@main.command("list")
def list_cmd() -> None:
    """List strategies, datasets and models."""
    from distbench.models import MODEL_DESCRIPTIONS
    from distbench.strategies import registry

    click.echo("strategies:")
    for name in registry.names():
        click.echo(f"  {name:<22} {registry.get(name).description}")
    click.echo("datasets:")
    for d, desc in (("digits", "scikit-learn's bundled 8x8 digits, 1,797 images, 10 classes (default)"),
                    ("mnist", "MNIST from a local Keras .npz or IDX files (data.path)"),
                    ("fashion_mnist", "Fashion-MNIST from a local Keras .npz or IDX files (data.path)"),
                    ("synthetic", "random images/labels of data.image_shape (throughput runs)")):
        click.echo(f"  {d:<22} {desc}")
    click.echo("models:")
    for m, desc in MODEL_DESCRIPTIONS.items():
        click.echo(f"  {m:<22} {desc}")


@main.command()
@click.argument("what", type=click.Choice(["spark-app"]))
def where(what: str) -> None:
    """Print the path of an entry point for external launchers (spark-app: for spark-submit)."""
    from distbench.harness import spark_app

    click.echo(Path(spark_app.__file__).resolve())


@main.group()
def worker() -> None:
    """Entry points run by launchers (and by users under their own launchers)."""


@worker.command("config", hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--key", required=True)
@click.option("--strategy", required=True)
@click.option("--workers", required=True, type=int)
@click.option("--window", type=int)
def worker_config(run_dir: str, key: str, strategy: str, workers: int, window: int | None) -> None:
    """Run one configuration (started by 'distbench run' in a fresh process)."""
    from distbench.harness.runner import child_main

    sys.exit(child_main(Path(run_dir), key, strategy, workers, window))

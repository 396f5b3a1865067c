"""``distbench report`` and ``distbench advise``: a run's report rendered again, merged or
compared, and its recommendation."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from distbench import api
from distbench.cli.common import ACCURACY, STEP, print_warnings, require_results
from distbench.config import ConfigError
from distbench.entrypoints import user_errors


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), help="Output directory (default: the first RUN_DIR).")
@click.option("--format", "formats", default="md,html,csv,json", show_default=True,
              help="Outputs to write, comma-separated: md (report.md), html (self-contained report.html), "
                   "csv (summary.csv), json (summary.json). md and html also write the plots as PNG files.")
@click.option("--tensorboard", is_flag=True,
              help="Also write TensorBoard scalars (test accuracy and loss vs step and vs training time) under "
                   "OUT/tensorboard/<config_id>/.")
@click.option("--compare", nargs=2, metavar="BASE NEW", type=click.Path(file_okay=False),
              help="Print, per configuration, the change from run directory BASE to NEW in median test accuracy "
                   "and training time with their spread; writes nothing.")
@click.option("--target-accuracy", type=ACCURACY,
              help="Score time to target against this test accuracy instead of the recorded one (from each "
                   "run's accuracy-vs-time curve).")
@user_errors
def report(run_dirs: tuple[str, ...], out: str | None, formats: str, tensorboard: bool,
           compare: tuple[str, str] | None, target_accuracy: float | None) -> None:
    """Render report.md, a self-contained report.html (plots embedded), summary.csv and
    summary.json from one or more run directories. Several directories are merged; each
    record keeps its provenance, and rows from different hardware are marked and compared
    only within their hardware."""
    from distbench.results.report import parse_formats
    from distbench.results.store import read_records

    def load(d: str) -> list[dict[str, Any]]:
        require_results(d)
        return read_records(d)

    if compare:
        if run_dirs or out or tensorboard:
            raise ConfigError("--compare BASE NEW takes no RUN_DIR, --out or --tensorboard: it only prints")
        from rich.console import Console

        from distbench.results.compare import print_comparison

        base, new = compare
        print_comparison(load(base), load(new), base, new, Console())
        return
    if not run_dirs:
        raise ConfigError("report needs one or more RUN_DIRs (or --compare BASE NEW)")
    try:
        fmts = parse_formats(formats)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    records: list[dict[str, Any]] = []
    for d in run_dirs:
        records += load(d)
    if target_accuracy is not None:
        from distbench.results.records import retarget

        try:
            records = retarget(records, target_accuracy)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    out_dir = Path(out or run_dirs[0])
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the report folder {str(out_dir)!r} ({e.strerror or e}); "
                          "pass --out with a path in a writable folder") from None
    api.print_report(records, out_dir, fmts, tensorboard=tensorboard,
                  advise_dir=run_dirs[0] if len(run_dirs) == 1 else None, target_accuracy=target_accuracy)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--target", help='The cluster you mean to train on, e.g. "8 nodes x 4 GPUs, 25 Gbit/s", '
                               '"4x8 GPUs @ 25 Gbit/s" or "16 workers, 10 GbE" (optional ", 50 us latency"): the '
                               "candidates are extrapolated to it with the scaling model of 'distbench predict'.")
@click.option("--target-accuracy", type=ACCURACY,
              help="Rank against this test accuracy instead of the recorded one, as 'distbench report "
                   "--target-accuracy' does.")
@click.option("--node-step", type=STEP, default=None,
              help="With --target: single's step at the run's global batch measured on one target node: seconds, or "
                   "with a unit: 4ms, 250us [default: a node computes like this machine].")
@click.option("--json", "as_json", is_flag=True, help="Print the advice as JSON.")
@user_errors
def advise(run_dir: str, target: str | None, target_accuracy: float | None, node_step: float | None,
           as_json: bool) -> None:
    """Say which strategy to use for RUN_DIR's workload, and why: the recommended strategy and
    the runner-up with the reasons as numbers (time to accuracy with its spread, accuracy,
    straggler tolerance, the --target prediction), what each needs installed and running, and,
    when the runs cannot separate the candidates, the exact 'distbench run' command to run next."""
    from distbench.results.advice import advise as make_advice
    from distbench.results.advice import keep_accuracy, parse_target
    from distbench.results.store import read_records

    require_results(run_dir)
    if target is not None:
        from distbench.calibrate import ensure

        ensure(run_dir)
    records = read_records(run_dir)
    if target_accuracy is not None:
        from distbench.results.records import retarget

        try:
            records = retarget(records, target_accuracy)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    warned = print_warnings()  # a bare --node-step 250 (seconds): said once the command line parsed
    if node_step is not None and target is None:
        raise ConfigError("advise: --node-step needs --target (the cluster whose node it was measured on)")
    tgt = parse_target(target) if target is not None else None
    if tgt is not None and node_step is not None:
        if tgt.emulated:
            from distbench.costmodel import EMULATED_NODE_STEP

            raise ConfigError(f"advise: {EMULATED_NODE_STEP}")
        tgt = dataclasses.replace(tgt, node_step_s=node_step)
    for line in tgt.warnings() if tgt else []:
        click.echo(f"distbench: warning: --target: {line}", err=True)
    adv = make_advice(records, run_dir, tgt)
    keep_accuracy(adv, run_dir, target_accuracy, target)
    adv.target_warnings += [w.removeprefix("distbench: warning: ") for w in warned if "--node-step" in w]  # helper-28
    if as_json:
        click.echo(json.dumps(adv.to_dict(), indent=2))
    else:
        from distbench.results.terminal import output_width, wrap_text

        click.echo(wrap_text(adv.to_text(), output_width()))
    if adv.target_refused:  # user test (helper-26): exit 0 though the prediction asked for was refused
        click.echo(f"distbench: advise: no prediction for --target: {adv.target_refused}", err=True)
        sys.exit(2)

"""The ``distbench`` command line (click): ``run``, ``report``, ``advise``, ``env``, ``list``, ``cluster``,
``worker``.

Bad input (config, flags, data files) exits with status 2 and one line naming what was
received and what is allowed; no traceback.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from distbench import __version__
from distbench import api
from distbench import config as config_mod
from distbench import values
from distbench.cluster.cli import cluster_group
from distbench.config import ConfigError, user_errors


def _int_list(flag: str, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",")]
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected an integer or a comma-separated list, e.g. 2 or 1,2,4") from None


def _repeats(flag: str, value: str | None) -> int | str | None:
    """``--repeats``: a positive integer or ``auto``; ``None`` when not given.

    Raises:
        ConfigError: anything else.
    """
    if value is None or value.strip().lower() == config_mod.AUTO_REPEATS:
        return None if value is None else config_mod.AUTO_REPEATS
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected a positive integer (runs of each configuration) or "
                          f"'{config_mod.AUTO_REPEATS}'") from None


def _name_list(flag: str, value: str | None) -> list[str] | None:
    """``a,b`` -> ``["a", "b"]``; ``None`` (flag not given) -> ``None``.

    Raises:
        ConfigError: the flag was given but names nothing, or holds an empty item.
    """
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    if not any(names) or not all(names):
        raise ConfigError(f"{flag} {value!r}: expected comma-separated names, e.g. single,mirrored "
                          "(see 'distbench list'), or 'all'")
    return names


class _OneLineErrors(click.Group):
    """The top-level group: a click usage error (unknown option, missing or malformed
    value) prints as one line, ``distbench: error: ... (see 'distbench run --help')``, and
    exits with status 2, like every other bad input (:func:`user_errors`); click's own
    format is four lines (usage, hint, blank line, error)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("standalone_mode", None)
        kwargs["prog_name"] = "distbench"  # also under ``python -m distbench`` and click's test runner
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else _command_path(self, kwargs.get("args"))
            msg = e.format_message()
            extra = re.search(r"unexpected extra arguments? \(([^)\s]+)", msg)
            if extra and extra.group(1).lower() in {*BANDWIDTH.units, *LATENCY.units}:
                msg += "; a unit is written without a space: --latency 50us, --bandwidth 25Gbit/s"
            print(f"distbench: error: {msg} (see '{where} --help')", file=sys.stderr, flush=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C before a command's own handler was set
                print("distbench: interrupted", file=sys.stderr, flush=True)
                sys.exit(130)
            print("Aborted!", file=sys.stderr, flush=True)
            sys.exit(1)
        # without standalone mode click returns ctx.exit()'s status instead of exiting
        sys.exit(rv if isinstance(rv, int) else 0)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``distbench`` command itself (the console script, ``python -m distbench``;
        click's test runner calls :meth:`main`). Bad input (exit status 2) found after
        TensorFlow was imported, e.g. a model whose output does not fit the data, leaves
        with ``os._exit``: the interpreter's teardown with TensorFlow loaded took 1.2 s
        (measured on 2 cores), and at that point nothing has run that needs it.

        Raises:
            SystemExit: the command's exit status (every other exit).
        """
        try:
            return self.main(*args, **kwargs)
        except SystemExit as e:
            if e.code == 2 and "tensorflow" in sys.modules:
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(2)
            raise


def _command_path(group: click.Group, args: Any) -> str:
    """``distbench <command>`` for the first word of ``args`` (default ``sys.argv[1:]``)
    that names a command, else ``distbench``: for errors raised without a context."""
    words = [a for a in (sys.argv[1:] if args is None else args) if not str(a).startswith("-")]
    return f"distbench {words[0]}" if words and words[0] in group.commands else "distbench"


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distbench")
def main() -> None:
    """Train the same Keras model under several distributed-training strategies and
    compare them fairly (accuracy, time, throughput, speed-up)."""
    logging.basicConfig(level=logging.WARNING, format="distbench: %(levelname)s: %(message)s")
    # TensorFlow's C++ start-up notices (oneDNN, cuInit on CPU machines) are noise here;
    # level 2 still shows errors. A user's own setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@main.command()
@click.argument("config_file", required=False, type=click.Path())
@click.option("--strategies", help="Comma-separated strategy names, or 'all' (see 'distbench list').")
@click.option("--workers", help="Worker count, or comma-separated counts to sweep, e.g. 1,2,4.")
@click.option("--epochs", type=int, help="Training epochs.")
@click.option("--batch-size", type=int, help="Global batch size (per-replica = global / replicas).")
@click.option("--target-accuracy", type=float,
              help="Test accuracy for time-to-target, in (0, 1] [default: training.target_accuracy: 0.97 "
                   "without a config file, 0.9 in a file without the key].")
@click.option("--repeats", metavar="N|auto",
              help="Repetitions of each configuration, or 'auto': every configuration once, then the two the "
                   "recommendation cannot separate yet once more per round, up to 3 runs each [default: 'auto' "
                   "without CONFIG_FILE, else run.repeats, 1].")
@click.option("--out", type=click.Path(file_okay=False), help="Run directory (default runs/<timestamp>).")
@click.option("--resume", is_flag=True,
              help="Continue OUT, skipping configurations already recorded; options not given come from the "
                   "run's recorded config.")
@click.option("--timeout", type=float, help="Per-configuration time limit, seconds.")
@click.option("--emulate", metavar="HOSTS[xSLOTS][@RATE]",
              help="Run on an emulated cluster of this machine ([cluster] emulate; needs root): e.g. 4x2@10gbit is "
                   "4 hosts of 2 workers each, links shaped at 10 Gbit/s.")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]),
              help="[run] device: auto (GPUs where the framework can use them; refused where it cannot), cpu "
                   "(GPUs hidden) or gpu (refused without one) [default: auto].")
@click.option("--preset", help="Apply a preset (local-validation, production, max-throughput, elastic) "
                               "before the other flags.")
@user_errors
def run(config_file: str | None, strategies: str | None, workers: str | None, epochs: int | None,
        batch_size: int | None, target_accuracy: float | None, repeats: str | None, out: str | None, resume: bool,
        timeout: float | None, emulate: str | None, device: str | None, preset: str | None) -> None:
    """Run the sweep in CONFIG_FILE (default: the embedded digits experiment), print the
    comparison table, and write report.md, report.html, summary.csv and summary.json
    (and the plots) into the run directory.

    With --resume the run directory's recorded config is the starting point (unless
    CONFIG_FILE is given): only the options given are changed, and one that changes the
    workload (data, model, training) is refused, naming it."""
    t0 = time.time()
    cfg = _run_config(config_file, resume, out, preset)
    given = {"run__strategies": _name_list("--strategies", strategies), "run__workers": _int_list("--workers", workers),
             "training__epochs": epochs, "training__global_batch_size": batch_size,
             "training__target_accuracy": target_accuracy, "run__repeats": _repeats("--repeats", repeats),
             "run__timeout_s": timeout, "cluster__emulate": _emulate(emulate),
             "run__out": out, "run__device": device}
    # the flags given, by the config key each sets (named in errors instead of only the key)
    flags = {k.replace("__", "."): f for k, f in RUN_FLAGS.items() if given[k] is not None}
    try:
        cfg = config_mod.override(cfg, **given)
    except ConfigError as e:
        flag = flags.get(str(e).split(" ", 1)[0].split("[", 1)[0])
        if flag is None:
            raise
        raise ConfigError(f"{flag}: {e}") from None
    run_dir = Path(cfg.run.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        api.run_config(cfg, run_dir, resume, flags, t0=t0, on_started=_on_started, on_report=_on_report)
    except api.Interrupted as e:
        click.echo(f"distbench: {e}", err=True)
        sys.exit(128 + _STOPPED_BY[0])  # 130 after Ctrl-C, 143 after SIGTERM, as shells report them


def _on_started() -> None:
    """Once the run directory is prepared: SIGTERM (a scheduler or CI cancelling us) is handled
    like Ctrl-C: children are killed, finished records stay, and the run can be resumed."""
    _STOPPING[0] = _STOPPING_SWEEP
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job keeps ignoring it
        signal.signal(signal.SIGINT, _interrupt)


def _on_report() -> None:
    """Once every configuration has finished: a signal now stops the report only."""
    _STOPPING[0] = "stopping the report (every configuration has finished; the records are kept)"


def _emulate(text: str | None) -> dict[str, Any] | None:
    """``--emulate HOSTS[xSLOTS][@RATE]`` as ``[cluster] emulate``'s table (``None`` when not given).

    Raises:
        ConfigError: the text is not of that form.
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*(?:[x×]\s*(\d+))?\s*(?:@\s*(\S+))?\s*", text)
    if not m:
        raise ConfigError(f"--emulate {text!r}: expected HOSTS[xSLOTS][@RATE], e.g. 2, 4x2 or 4x2@10gbit (hosts, "
                          "workers per host, link rate as tc writes it)")
    out: dict[str, Any] = {"hosts": int(m[1])}
    if m[2]:
        out["slots"] = int(m[2])
    if m[3]:
        out["bandwidth"] = m[3]
    return out


def _run_config(config_file: str | None, resume: bool, out: str | None, preset: str | None) -> Any:
    """The sweep's config before the flags: CONFIG_FILE (default: the embedded default), or
    with ``--resume`` and no CONFIG_FILE the run directory's recorded config; then the preset.

    Raises:
        ConfigError: CONFIG_FILE is a directory; ``--resume`` without a run directory, or
            with one that does not exist; a bad config or preset.
    """
    from distbench.harness.runner import recorded_config

    if config_file and os.path.isdir(config_file):
        recorded = os.path.join(config_file, "config.json")
        hint = (f"to continue that run: distbench run --resume --out {shlex.quote(config_file)}; to run its "
                f"configuration again: distbench run {shlex.quote(recorded)}" if os.path.isfile(recorded) else
                "pass a TOML (or JSON) config file")
        raise ConfigError(f"CONFIG_FILE {config_file!r} is a directory, not a config file; {hint}")
    cfg = config_mod.load(config_file)
    if resume:
        if not (out or cfg.run.out):
            raise ConfigError("--resume needs the run directory to continue: pass --out DIR (the run's directory, "
                              "e.g. runs/20261201-091500)")
        resume_dir = Path(out or cfg.run.out or "")
        if not resume_dir.exists():
            raise ConfigError(f"--resume given but the run directory {str(resume_dir)!r} does not exist: nothing "
                              "to resume; pass --out with an existing run's directory (e.g. runs/20261201-091500), "
                              "or drop --resume to start a new run there")
        if config_file is None:
            cfg = recorded_config(resume_dir)  # options not given keep the run's values
    return config_mod.apply_preset(cfg, preset) if preset else cfg


RUN_FLAGS = {"run__strategies": "--strategies", "run__workers": "--workers", "training__epochs": "--epochs",
             "training__global_batch_size": "--batch-size", "training__target_accuracy": "--target-accuracy",
             "run__repeats": "--repeats", "run__timeout_s": "--timeout", "run__out": "--out",
             "cluster__emulate": "--emulate", "run__device": "--device"}
"""``distbench run``'s flags by the config key (``section__key``) each overrides."""


_STOPPED_BY = [int(signal.SIGINT)]  # the signal that stopped the sweep (its exit status is 128 + it)
_STOPPING_SWEEP = "stopping the running configuration and its engine (seconds; up to about 15 for a Spark engine)"
_STOPPING = [_STOPPING_SWEEP]
"""What the first SIGINT/SIGTERM stops, as :func:`_interrupt` says it: the sweep, then the report."""


def _interrupt(signum: int, frame: object) -> None:
    """Signal handler for SIGINT and SIGTERM during a sweep: say at once that the sweep is
    stopping (stopping a Spark or MPI engine takes seconds), then raise KeyboardInterrupt,
    whose clean-up kills the children and keeps the finished records. A second signal
    during that clean-up interrupts it (Python's default)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _STOPPED_BY[0] = int(signum)
    print(f"distbench: {signal.Signals(signum).name}: {_STOPPING[0]}...", file=sys.stderr, flush=True)
    raise KeyboardInterrupt


@main.command()
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
@click.option("--target-accuracy", type=float,
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
        _require_results(d)
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


def _require_results(run_dir: str) -> None:
    """Raise unless ``run_dir`` holds results: naming whether it does not exist, is a run
    that finished no configuration yet (with the command that continues it), or is not a
    run directory at all.

    Raises:
        ConfigError: as above.
    """
    from distbench.results.store import RESULTS_FILE

    d = Path(run_dir)
    if (d / RESULTS_FILE).exists():
        return
    if not d.exists():
        raise ConfigError(f"{run_dir!r} does not exist: expected a run directory made by 'distbench run' "
                          "(e.g. runs/20261201-091500)")
    if (d / "config.json").exists():
        raise ConfigError(f"{run_dir!r} holds a run that finished no configuration yet (no {RESULTS_FILE}): "
                          f"continue it with distbench run --resume --out {shlex.quote(run_dir)}")
    raise ConfigError(f"{run_dir!r} holds no {RESULTS_FILE}: expected a run directory made by 'distbench run'")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--target", help='The cluster you mean to train on, e.g. "8 nodes x 4 GPUs, 25 Gbit/s", '
                               '"4x8 GPUs @ 25 Gbit/s" or "16 workers, 10 GbE" (optional ", 50 us latency"): the '
                               "candidates are extrapolated to it with the scaling model of 'distbench predict'.")
@click.option("--target-accuracy", type=float,
              help="Rank against this test accuracy instead of the recorded one, as 'distbench report "
                   "--target-accuracy' does.")
@click.option("--json", "as_json", is_flag=True, help="Print the advice as JSON.")
@user_errors
def advise(run_dir: str, target: str | None, target_accuracy: float | None, as_json: bool) -> None:
    """Say which strategy to use for RUN_DIR's workload, and why: the recommended strategy and
    the runner-up with the reasons as numbers (time to accuracy with its spread, accuracy,
    straggler tolerance, the --target prediction), what each needs installed and running, and,
    when the runs cannot separate the candidates, the exact 'distbench run' command to run next."""
    from distbench.results.advice import advise as make_advice
    from distbench.results.advice import parse_target, with_target
    from distbench.results.store import read_records

    _require_results(run_dir)
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
    adv = make_advice(records, run_dir, parse_target(target) if target is not None else None)
    if target_accuracy is not None and adv.next_command:
        adv.next_command = with_target(adv.next_command, run_dir, target_accuracy)
    if as_json:
        click.echo(json.dumps(adv.to_dict(), indent=2))
    else:
        from distbench.results.terminal import output_width, wrap_text

        click.echo(wrap_text(adv.to_text(), output_width()))


@main.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--workers", type=int, default=2, show_default=True, help="Worker count to probe for.")
@click.option("--cluster", "cluster_config", type=click.Path(dir_okay=False),
              help="Instead: check every host of this config's [cluster] (reachable, same versions, free port); "
                   "exit 1 on a problem.")
@user_errors
def env_cmd(as_json: bool, workers: int, cluster_config: str | None) -> None:
    """Print this machine's provenance and whether each strategy can run here, and why not
    (with --cluster: check the cluster's hosts)."""
    api.reap_dead_clusters()
    from distbench.env import report as env_report

    if cluster_config:
        from distbench.cluster.cli import env_cluster

        sys.exit(env_cluster(cluster_config, as_json, timeout_s=30.0))
    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected a worker count >= 1")
    # the probes take seconds (a minute on a busy machine): say so before going quiet
    print("probing engines (TF, Horovod, Spark, MPI)...", file=sys.stderr, flush=True)
    info = env_report(config_mod.load(None), workers)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    import textwrap

    from distbench.results.terminal import hanging, output_width

    p, width = info["provenance"], output_width()
    lines = [f"distbench {p['versions'].get('distbench')}  Python {p['python']}  {p['os']}",
             f"host {p['hostname']}: {p['cpu_count']} x {p['cpu_model']}", *info["gpus"],
             "packages: " + ", ".join(f"{k} {v or '-'}" for k, v in p["versions"].items())]
    lines += [f"build: {line}" for line in info["builds"]] + [f"git commit: {p['git_commit']}"]
    for line in lines:  # (wrap_text would keep the first line whole: it starts like a command)
        click.echo(line if width is None else textwrap.fill(line, max(20, width), subsequent_indent="  ",
                                                              break_long_words=False, break_on_hyphens=False))
    click.echo("\nstrategies:")
    for s in info["strategies"]:
        mark = "available  " if s["available"] else "unavailable"
        reason = ("GPUs its framework cannot use (see GPUs above)" if s["reason"].startswith("this machine has ")
                  else s["reason"])  # the GPU line once, not once per strategy
        click.echo(hanging(s["name"], f"{mark} {reason}".rstrip(), width,
                           name_width=max(22, *(len(t["name"]) for t in info["strategies"]))))


@main.command("list")
@user_errors
def list_cmd() -> None:
    """List strategies, datasets and models."""
    from distbench.models import MODEL_DESCRIPTIONS
    from distbench.results.terminal import hanging, output_width
    from distbench.strategies import registry

    strategy_names = registry.names()  # loads DISTBENCH_PLUGINS: a bad one is reported before any output
    width = output_width()
    nw = max(22, *(len(n) for n in strategy_names))  # one name column for every section
    click.echo("strategies:")
    for name in strategy_names:
        click.echo(hanging(name, registry.get(name).description, width, name_width=nw))
    for fam, members in registry.families().items():  # a small family is named member by member
        which = f"all {len(members)} {fam}:<optimizer> strategies above" if len(members) > 3 else \
            f"{', '.join(members)} above"
        click.echo(hanging(fam, f"the family: {which} (also {fam}:all)", width, name_width=nw))
    click.echo("datasets:")
    for d in config_mod.DATASETS:
        click.echo(hanging(d, DATASET_DESCRIPTIONS[d], width, name_width=nw))
    click.echo("models:")
    for m, desc in MODEL_DESCRIPTIONS.items():
        click.echo(hanging(m, desc, width, name_width=nw))


DATASET_DESCRIPTIONS = {
    "digits": "scikit-learn's bundled 8x8 digits, 1,797 images, 10 classes (default)",
    "breast_cancer": "scikit-learn's bundled Wisconsin breast cancer table, 569 samples, 30 features, 2 classes",
    "mnist": "MNIST from a local Keras .npz or IDX files (data.path)",
    "fashion_mnist": "Fashion-MNIST from a local Keras .npz or IDX files (data.path)",
    "synthetic": "random images/labels of data.image_shape (throughput runs)",
    "npz": "your arrays: an .npz with x, y (and optionally x_test, y_test) at data.path",
    "parquet": "your table: Parquet file(s) at data.path, streamed by row group (larger than memory)",
}
"""One line per dataset of ``distbench list`` (every name of :data:`distbench.config.DATASETS`)."""


@main.command()
@click.argument("what", type=click.Choice(["spark-app"]))
def where(what: str) -> None:
    """Print the path of an entry point for external launchers (spark-app: for spark-submit)."""
    from distbench.harness import spark_app

    click.echo(Path(spark_app.__file__).resolve())


class _Quantity(click.ParamType):
    """A positive quantity with an optional unit suffix (case-insensitive), converted to
    the base unit: a bare number is taken in the base unit (``--bandwidth 1.25e9`` is
    bytes/s, ``--latency 5e-5`` seconds).

    Args:
        units: suffix -> factor to the base unit, e.g. ``{"gbit": 1.25e8}`` (bytes/s).
        example: shown in the error, e.g. ``10gbit``.
        positive: 0 is refused too.
        plausible: ``(low, high)`` in the base unit: a bare number outside it is used as given
            but warned about on stderr (``--latency 50`` is 50 seconds, not 50 us).
    """

    def __init__(self, name: str, units: dict[str, float], example: str, positive: bool = False,
                 plausible: tuple[float, float] = (0.0, math.inf)) -> None:
        self.name, self.units, self.example, self.positive = name, units, example, positive
        self.plausible = plausible

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        """``"10Gbit"`` -> 1.25e9 (bytes/s); a float passes through; anything else fails
        with the accepted forms."""
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().replace(" ", "")
        for unit in sorted(self.units, key=len, reverse=True):
            if text.lower().endswith(unit):
                text, factor = text[: -len(unit)], self.units[unit]
                break
        else:
            factor = 1.0
        try:
            v = float(text) * factor
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or v < 0 or (self.positive and v == 0):
            self.fail(f"{value!r}: expected a number {'>' if self.positive else '>='} 0, bare ({self.name}) or "
                      f"with a unit ({', '.join(self.units)}), e.g. {self.example}", param, ctx)
        if factor == 1.0 and not self.plausible[0] <= v <= self.plausible[1]:
            warning = (f"distbench: warning: {getattr(param, 'opts', [''])[0]} {value}: a bare number is {self.name}, "
                       f"so this is {v:g} {self.name}; did you mean a unit (e.g. {self.example})?")
            if ctx is not None:  # printed once the whole command line parsed (not before a usage error)
                ctx.meta.setdefault(WARNINGS_KEY, []).append(warning)
        return v


WARNINGS_KEY = "distbench.warnings"  # click context meta: warnings about parsed values, see print_warnings


def print_warnings() -> None:
    """Print the warnings the parameter types left in the current click context (stderr)."""
    for w in click.get_current_context().meta.pop(WARNINGS_KEY, []):
        click.echo(w, err=True)


# bytes per second: tc's decimal bit rates (values.RATE_UNITS, as [cluster] emulate reads them) and byte rates
BANDWIDTH = _Quantity("bytes/s", {**{unit: bits / 8 for unit, bits in sorted(values.RATE_UNITS.items(),
                                                                  key=lambda u: -u[1])},
                                  **{f"{unit}/s": bits / 8 for unit, bits in values.RATE_UNITS.items()},
                                  "gb/s": 1e9, "mb/s": 1e6, "kb/s": 1e3, "b/s": 1.0}, "10gbit or 1.25GB/s",
                      positive=True, plausible=(1e5, 1e12))  # 0.8 Mbit/s .. 8 Tbit/s
LATENCY = _Quantity("seconds", {"us": 1e-6, "ms": 1e-3, "s": 1.0}, "50us or 0.05ms", plausible=(0.0, 1.0))


@main.command()
@user_errors
@config_mod.run_dir_param("Run directory made by 'distbench run' (its workload is used).")
def calibrate(run_dir: str) -> None:
    """Measure the compute of one step of RUN_DIR's model on this machine against the
    per-worker batch and the CPU threads (single's own step, a few epochs at each batch);
    write RUN_DIR/calibration.json for 'predict --target' and 'advise --target'."""
    from distbench.calibrate import calibrate as measure

    _require_results(run_dir)
    doc = measure(run_dir)
    for t in sorted({p["threads"] for p in doc["points"]}, reverse=True):
        pts = sorted((p["batch"], p["step_s"]) for p in doc["points"] if p["threads"] == t)
        click.echo(f"{t} thread(s): " + ", ".join(f"batch {b}: {s * 1e3:.3g} ms" for b, s in pts))
    click.echo(f"wrote {Path(run_dir) / 'calibration.json'}")


@main.command()
@click.option("--bandwidth", type=BANDWIDTH, default=None,
              help="Link bandwidth each way: bytes/s, or with a unit: 10gbit, 100mbit, 1.25GB/s "
                   "[default: 10gbit = 1.25e9 bytes/s, 10 GbE].")
@click.option("--latency", type=LATENCY, default=None,
              help="Per-message latency: seconds, or with a unit: 50us, 0.2ms [default: 50us].")
@click.option("--window", type=int, default=None,
              help="Parameter-server communication window, local steps [default: the run's spark_ps/mpi_ps window, "
                   "else 1].")
@click.option("--per-worker-batch", type=int, default=None,
              help="Samples per step per worker, fixed as N grows [default: single's batch]; the step time "
                   "is scaled linearly from single's.")
@click.option("--samples", type=int, default=None, help="Training samples per epoch [default: the run's].")
@click.option("--max-workers", type=int, default=1024, show_default=True, help="Largest N (powers of two from 1).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="PNG to write [default: RUN_DIR/predict.png].")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON instead of a table.")
@click.option("--target", help='Instead: predict each strategy the run measured on this cluster, e.g. "4 nodes x 2, '
                               '10 Gbit/s", "4x8 GPUs @ 25 Gbit/s", "3 nodes x 1, 1gbit, emulated" (per-strategy '
                               "model calibrated from the run; the first-order options do not apply).")
@click.option("--against", "against", type=click.Path(file_okay=False), default=None,
              help="With --target: a run made on that cluster (real or emulated): its measured epoch times and times "
                   "to target next to the prediction.")
@click.option("--node-step", type=float, default=None,
              help="With --target: seconds of single's step at the run's global batch measured on one target node "
                   "[default: a node computes like this machine].")
@user_errors
@config_mod.run_dir_param("Run directory with at least one ok 'single' record (its step time and model size "
                          "are used).")
def predict(run_dir: str, bandwidth: float | None, latency: float | None, window: int | None,
            per_worker_batch: int | None, samples: int | None, max_workers: int, plot_path: str | None,
            as_json: bool, target: str | None, against: str | None, node_step: float | None) -> None:
    """Predict seconds per epoch for ring-allreduce and single-parameter-server training on N = 1, 2,
    4, ... workers (per-worker batch fixed) from a run's step time and model size; print a table and
    write a plot (distbench/predict.py). With --target: each strategy's epoch time, time to target and
    rank on that cluster, from the per-strategy model calibrated on the run (distbench/costmodel.py)."""
    import textwrap

    print_warnings()  # a bare --latency 50 (seconds): said once the command line parsed
    if target is not None or node_step is not None or against is not None:
        return _predict_target(run_dir, target, node_step, as_json, against, {
            "--bandwidth": bandwidth, "--latency": latency, "--window": window, "--samples": samples,
            "--per-worker-batch": per_worker_batch, "--plot": plot_path})

    from distbench import predict as model
    from distbench.results.terminal import output_width

    try:
        inp = model.inputs_from_run(run_dir)
        for flag, v in (("--window", window), ("--per-worker-batch", per_worker_batch), ("--samples", samples),
                        ("--max-workers", max_workers)):
            if v is not None and v < 1:
                raise ValueError(f"{flag} {v}: expected an integer >= 1 (or leave it out for the default)")
        for flag, v, lo in (("--bandwidth", bandwidth, "> 0"), ("--latency", latency, ">= 0")):
            if v is not None and (not math.isfinite(v) or v < 0 or (lo == "> 0" and v == 0)):
                raise ValueError(f"{flag} {v}: expected a finite number {lo} (bytes/s for --bandwidth, "
                                 "seconds for --latency)")
        b = per_worker_batch or inp.global_batch
        bw = model.DEFAULT_BANDWIDTH_BPS if bandwidth is None else bandwidth
        lat = model.DEFAULT_LATENCY_S if latency is None else latency
        win = window or inp.window or 1
        ns = [n for n in model.POWERS_OF_TWO + tuple(2 ** k for k in range(11, 21)) if n <= max_workers]
        preds = model.predict(inp.step_s * b / inp.global_batch, inp.model_bytes, samples or inp.n_train, b,
                              bw, lat, ns, win)
    except ValueError as e:
        raise ConfigError(f"predict: {e}") from None
    png_path = plot_path or Path(run_dir) / "predict.png"
    try:
        png = model.plot(preds, png_path, f"{run_dir}: {inp.model_bytes / 1e6:.3g} MB model, "
                         f"{bw / 1e9:.3g} GB/s, {lat * 1e6:.0f} us, batch {b}/worker")
    except OSError as e:
        raise ConfigError(f"predict: cannot write the plot {str(png_path)!r} ({e.strerror or e}); "
                          "pass --plot with a path in a writable folder") from None
    measured = model.measured_vs_predicted(run_dir, inp, bw, lat)
    if as_json:
        click.echo(json.dumps({"inputs": {**inp.__dict__, "per_worker_batch": b, "bandwidth_Bps": bw,
                                          "latency_s": lat, "window": win}, "predictions": model.to_json(preds),
                               "measured": [{**m.__dict__, "ratio": m.ratio} for m in measured]}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    from distbench.results.terminal import print_fitted

    width = output_width()
    for text in (f"compute per step: {inp.step_s * 1e3:.2f} ms at batch {inp.global_batch} ({inp.source}; "
                 f"train_s/steps = {inp.step_s_all * 1e3:.2f} ms), {inp.step_s * b / inp.global_batch * 1e3:.2f} ms "
                 f"at {b}/worker",
                 f"model {inp.model_bytes:,} bytes; bandwidth {bw:.3g} B/s; latency {lat:.3g} s; PS window {win}; "
                 f"{samples or inp.n_train:,} samples per epoch; per-worker batch fixed as N grows"):
        click.echo(text if width is None else textwrap.fill(text, width))
    console, _ = print_fitted(model.TABLE_HEADERS, model.table_rows(preds), Console(highlight=False), left=(),
                              block_head=1, drop=("allreduce comm/step", "PS comm/window", "steps/epoch"))
    thin = [p.workers for p in preds if p.steps_per_epoch < 1]
    if thin:
        console.print(escape(f"from {thin[0]} workers each worker takes less than one step per epoch: the data, not "
                             "the model, limits those rows (give --samples for a larger dataset); the parameter "
                             "server still pays one whole exchange per worker and epoch"))
    if measured:
        console.print(escape(f"measured in {run_dir} next to the model's prediction for the same setting (its global "
                             "batch split over N workers, its window and link rate; steady-state epochs 2..E):"))
        print_fitted(model.MEASURED_HEADERS, model.measured_rows(measured), console, left=("strategy", "scheme"),
                     block_head=3, drop=("measured s/epoch", "predicted s/epoch"))
        console.print(escape(model.MEASURED_LEGEND))
    console.print(escape("first-order model: no contention, stragglers, compute/communication overlap, per-call "
                         "framework costs or topology; trust the shape of scaling, not absolute times "
                         "(docs/predict.md, 'Commands')"))
    console.print(escape(f"wrote {png}"), soft_wrap=True)


def _predict_target(run_dir: str, target_text: str | None, node_step: float | None, as_json: bool,
                    against: str | None, first_order_flags: dict[str, Any]) -> None:
    """``distbench predict RUN_DIR --target TEXT``: the per-strategy table (or JSON).

    Raises:
        ConfigError: ``--node-step`` or ``--against`` without ``--target``, or with the first-order
            table's options (``first_order_flags``: each flag's value); a bad target or step; what
            the model misses.
    """
    from distbench import costmodel
    from distbench.calibrate import ensure as ensure_calibration
    from distbench.results.advice import parse_target

    first_order = [f for f, v in first_order_flags.items() if v is not None]
    if target_text is None:
        raise ConfigError("predict: --node-step and --against need --target (the cluster they are about)")
    if first_order:
        raise ConfigError(f"predict: {' and '.join(first_order)} belongs to the first-order table: give --target "
                          "(per-strategy model, the link in its text) or the first-order options, not both")
    tgt = parse_target(target_text)
    if node_step is not None and not (math.isfinite(node_step) and node_step > 0):
        raise ConfigError(f"predict: --node-step {node_step}: expected seconds > 0 (single's step at the run's "
                          "global batch, measured on one target node)")
    _require_results(run_dir)
    ensure_calibration(run_dir)
    try:
        preds, inputs = costmodel.predict_strategies(run_dir, tgt.cluster(node_step))
    except ValueError as e:
        raise ConfigError(f"predict: {e}") from None
    if against is not None:
        _require_results(against)
    measured = costmodel.measured_on(against, tgt.workers) if against is not None else None
    if as_json:
        click.echo(json.dumps({"target": {"text": tgt.text, "nodes": tgt.nodes, "per_node": tgt.per_node,
                                          "bandwidth_Bps": tgt.bandwidth_Bps, "latency_s": tgt.latency_s,
                                          "emulated": tgt.emulated, "inputs": inputs,
                                          "strategies": [p.__dict__ for p in preds]},
                               **({"measured": measured} if measured is not None else {})}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    from distbench.results.terminal import print_fitted

    console = Console(highlight=False)
    console.print(escape(costmodel.describe(tgt.text, tgt.cluster(node_step), inputs)))
    print_fitted(costmodel.TABLE_HEADERS, costmodel.table_rows(preds, inputs["target_accuracy"]), console,
                 left=("strategy", "notes"), block_head=2, drop=("compute", "framework", "link"))
    if measured is not None:
        rows = costmodel.against_rows(preds, measured)
        console.print(escape(f"measured in {against} at {tgt.workers} workers (median [min-max] over repeats; "
                             "ratio = predicted / measured):" if rows else
                             f"{against} has no ok row at {tgt.workers} workers of a predicted strategy"))
        if rows:
            print_fitted(costmodel.AGAINST_HEADERS, rows, console, left=("strategy",), block_head=1)


class _WorkerGroup(click.Group):
    """``distbench worker``: the ``config`` entry of the harness, and every entry point the
    registered strategies declare (:attr:`~distbench.strategies.base.Strategy.worker_entries`),
    imported only when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from distbench.strategies import registry

        return sorted({*super().list_commands(ctx), *registry.worker_entries()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        import importlib

        from distbench.strategies import registry

        ref = registry.worker_entries().get(name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)


main.add_command(cluster_group)


@main.group(cls=_WorkerGroup)
def worker() -> None:
    """Entry points run by launchers (and by users under their own launchers).

    Each enables :mod:`faulthandler`: a process that dies of SIGSEGV, SIGFPE, SIGABRT or
    SIGBUS (a crash inside TensorFlow, Horovod or MPI) leaves its Python stack in its log,
    which the failed record's log tail shows next to the signal."""
    import faulthandler
    import io

    for stream in (sys.stderr, sys.__stderr__):  # a caller's captured stderr (a test runner) has no descriptor
        try:
            faulthandler.enable(file=stream)
            break
        except (AttributeError, ValueError, io.UnsupportedOperation):
            continue


@worker.command("config", hidden=True)
@click.option("--run-dir", required=True, type=click.Path(file_okay=False))
@click.option("--key", required=True)
@click.option("--strategy", required=True)
@click.option("--workers", required=True, type=int)
@click.option("--window", type=int)
@click.option("--scenario", help="Straggler scenario as JSON (set by 'distbench run').")
@user_errors
def worker_config(run_dir: str, key: str, strategy: str, workers: int, window: int | None,
                  scenario: str | None) -> None:
    """Run one configuration (started by 'distbench run' in a fresh process).

    Leaves with ``os._exit`` once the result is on disk: the strategy has already stopped
    its processes, servers and clients, and the interpreter's teardown with TensorFlow
    loaded (1-1.5 s on 2 cores, every configuration, on the sweep's wall time) would do
    nothing the sweep needs."""
    import logging

    from distbench.harness.runner import child_main
    from distbench.scenario import Scenario

    code = child_main(Path(run_dir), key, strategy, workers, window, Scenario.from_arg(scenario))
    logging.shutdown()
    from distbench.procinfo import remove_autograph_sources

    remove_autograph_sources()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

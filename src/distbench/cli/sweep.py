"""``distbench run``: a sweep from a config file and flags (the one implementation is
:func:`distbench.api.run_config`), and what Ctrl-C and SIGTERM do to it."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from distbench import api
from distbench import config as config_mod
from distbench.cli.common import ACCURACY, int_list, name_list, repeats_value
from distbench.config import ConfigError
from distbench.entrypoints import user_errors


@click.command()
@click.argument("config_file", required=False, type=click.Path())
@click.option("--strategies", help="Comma-separated strategy names, or 'all' (see 'distbench list').")
@click.option("--workers", help="Worker count, or comma-separated counts to sweep, e.g. 1,2,4.")
@click.option("--epochs", type=int, help="Training epochs.")
@click.option("--batch-size", type=int, help="Global batch size (per-replica = global / replicas).")
@click.option("--target-accuracy", type=ACCURACY,
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
    given = {"run__strategies": name_list("--strategies", strategies), "run__workers": int_list("--workers", workers),
             "training__epochs": epochs, "training__global_batch_size": batch_size,
             "training__target_accuracy": target_accuracy, "run__repeats": repeats_value("--repeats", repeats),
             "run__timeout_s": timeout, "cluster__emulate": _emulate(emulate),
             "run__out": out, "run__device": device}
    # the flags given, by the config key each sets (named in errors instead of only the key)
    flags = {k.replace("__", "."): f for k, f in RUN_FLAGS.items() if given[k] is not None}
    if preset:  # a resume's refusal names the preset that changed a setting (helper-31: it named CONFIG_FILE)
        flags = {**{k.replace("__", "."): f"--preset {preset}" for k in config_mod.PRESETS.get(preset, {})}, **flags}
    try:
        cfg = config_mod.override(cfg, **given)
    except ConfigError as e:
        flag = flags.get(str(e).split(" ", 1)[0].split("[", 1)[0])
        if flag is None:
            raise
        raise ConfigError(f"{flag}: {e}") from None
    run_dir = Path(cfg.run.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    had = {(r.get("config_id"), r.get("repeat")) for r in api.records_of(run_dir)} if resume else set()
    try:
        records = api.run_config(cfg, run_dir, resume, flags, t0=t0, on_started=_on_started, on_report=_on_report)
    except api.Interrupted as e:
        click.echo(f"distbench: {e}", err=True)
        sys.exit(128 + _STOPPED_BY[0])  # 130 after Ctrl-C, 143 after SIGTERM, as shells report them
    from distbench.results.store import no_answer

    new = [r for r in records if (r.get("config_id"), r.get("repeat")) not in had]
    # a --resume with nothing left to run of a run that never ended ok is no answer either (helper-25: a CI retry
    # step turned green)
    nothing = no_answer(new) if new else no_answer(records, str(run_dir))
    if nothing:  # CI and schedulers read the exit status, not the table
        again = "" if new else ", and --resume runs only what is not recorded (a new --out runs them again)"
        click.echo(f"distbench: {nothing}{again}: each one's reason is under 'Not run or failed' in "
                   f"{run_dir / 'report.md'}", err=True)
        sys.exit(1)


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
    from distbench.harness.rundir import recorded_config

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

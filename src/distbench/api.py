"""The Python API: :func:`compare` runs the sweep ``distbench run`` runs and returns a
:class:`Results`; :func:`run_config` is the one implementation both use (the CLI parses
its flags into a config and calls it).

From a script or a notebook::

    import distbench
    res = distbench.compare(model, (x, y), strategies=["single", "horovod"], workers=2, epochs=5)
    res.records            # a pandas DataFrame, one row per configuration and repeat
    res.headline           # the recommendation's one sentence
    res.advise(target="4 nodes x 2, 10 Gbit/s")
    res.predict(target="4 nodes x 2, 10 Gbit/s")

Errors are the CLI's as exceptions (:class:`~distbench.config.ConfigError`,
:class:`~distbench.data.DataError`), with the same messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import re
import shlex
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from distbench.config import SECTIONS, ConfigError, ExperimentConfig
from distbench.contracts import INPUTS_DIR, DataError


class Interrupted(KeyboardInterrupt):
    """The sweep (or its report) was interrupted (Ctrl-C, SIGTERM); the message says what was
    kept and the command that continues. A ``KeyboardInterrupt``, so a script's ``except
    KeyboardInterrupt`` catches it (user test, helper-40)."""


def run_config(cfg: ExperimentConfig, run_dir: Path, resume: bool = False, flags: dict[str, str] | None = None,
               t0: float | None = None, on_started: Callable[[], None] | None = None,
               on_report: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Run the sweep of ``cfg`` into ``run_dir`` under a progress display, print the
    comparison table and write the report: what ``distbench run`` does once its flags are
    a config.

    Args:
        cfg: the validated sweep config.
        run_dir: the run directory (made if missing; refused if it holds a run and not ``resume``).
        resume: continue the run in ``run_dir``.
        flags: ``section.key`` -> the command-line flag that set it (named in errors).
        t0: when the command started (``time.time()``), for the time breakdown.
        on_started: called once the run directory is prepared, before the first configuration.
        on_report: called when every configuration has finished, before the report.

    Returns:
        every record of the run (this sweep's and those resumed).

    Raises:
        ConfigError, DataError: bad config, data, model, run directory or cluster (before
            anything is trained).
        Interrupted: a KeyboardInterrupt during the sweep or the report (its records kept).
    """
    from distbench.harness.evaluate import hide_accelerators
    from distbench.harness.matrix import expand
    from distbench.harness.assembly import time_breakdown
    from distbench.harness.rundir import check_run_dir, prepare_run_dir
    from distbench.harness.runner import check_cluster_ready, run_sweep
    from distbench.results.store import recorded
    from distbench.results.terminal import output_width, wrap_text

    t0 = t0 if t0 is not None else time.time()
    expand(cfg)  # unknown strategies are reported before anything is written
    check_run_dir(cfg, run_dir, resume, flags)  # so is a used run directory, at once (no TensorFlow needed)
    reap_dead_clusters()  # what a killed sweep left (before the subnet check: it may hold the subnet)
    check_cluster_ready(cfg)  # and a cluster that cannot run the sweep
    lock = lock_run_dir(run_dir) if run_dir.exists() else None
    finished = lock is not None and all_recorded(cfg, run_dir, resume)
    try:
        # nothing to train (finished): neither the data nor TensorFlow is loaded (3.6 s, was 10.4 s on 2 cores), and
        # config.json stays as it is; else bad data files are reported here, before TensorFlow; then the model's
        if not finished:
            workload = prepare_run_dir(cfg, run_dir, resume, flags, before_model=hide_accelerators)
    except BaseException:
        if lock is not None:
            lock.close()  # (a caller in this process, e.g. a test runner, may keep this frame alive)
        raise
    lock = lock or lock_run_dir(run_dir)  # held until the sweep and its report are done
    try:
        if not finished:
            hide_accelerators()  # import TensorFlow here quietly, off the GPUs the children use
        if on_started:
            on_started()
        before = recorded(records_of(run_dir))
        setup_s = time.time() - t0
        try:
            records = records_of(run_dir) if finished else run_with_progress(
                cfg, run_dir, resume, functools.partial(run_sweep, workload=workload))
        except KeyboardInterrupt:
            raise Interrupted(interrupted_text(cfg, run_dir)) from None
        t_report = time.time()
        if on_report:
            on_report()
        try:
            print_report(records, run_dir)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while writing the report; all {len(records)} record(s) are kept in "
                              f"{run_dir}. Write it again with: distbench report {shlex.quote(str(run_dir))}") from None
        click.echo(wrap_text(time_breakdown([r for r in records if (r.get("config_id"), r.get("repeat")) not in before],
                                            time.time() - t0, setup_s=setup_s, report_s=time.time() - t_report),
                             output_width()))
        return records
    finally:
        lock.close()


def interrupted_text(cfg: ExperimentConfig, run_dir: Path, python: bool = False) -> str:
    """What a sweep interrupted in ``run_dir`` says: the records kept and the command that
    continues it (``python``: for :func:`compare`, the same call with ``resume=True`` first;
    user test, helper-40), or ``distbench report DIR`` once every configuration was recorded
    (user test, helper-39: Ctrl-C while an engine stopped after the last said to resume)."""
    n = len(records_of(run_dir))
    if all_recorded(cfg, run_dir, True):
        return (f"interrupted after every configuration was recorded; all {n} record(s) are kept in {run_dir}. "
                "Write the report with: " + (f"the same compare() call and out={str(run_dir)!r}, resume=True (it "
                                             "trains nothing more), or in a shell: " if python else "")
                + f"distbench report {shlex.quote(str(run_dir))}")
    if python:
        return (f"interrupted; {n} record(s) kept in {run_dir}. Continue with the same compare() call and "
                f"out={str(run_dir)!r}, resume=True (or in a shell: {continue_command(cfg, run_dir)})")
    return (f"interrupted; {n} record(s) kept in {run_dir}. Continue with: {continue_command(cfg, run_dir)} (options "
            "not given keep the run's values)")


def continue_command(cfg: ExperimentConfig, run_dir: Path) -> str:
    """The command that finishes an interrupted sweep: a resume of ``run_dir`` with this sweep's
    own strategies, worker counts and repeats (user test, helper-38: config.json records the
    union of every sweep's, so a plain ``--resume`` after ``--resume --strategies single,mirrored
    --repeats 3`` also ran the run's 3 other strategies twice more)."""
    r = cfg.run
    return (f"distbench run --resume --out {shlex.quote(str(run_dir))} --strategies {','.join(r.strategies)} "
            f"--workers {','.join(map(str, r.workers))} --repeats {r.repeats}")


def lock_run_dir(run_dir: Path) -> Any:
    """Hold an exclusive lock on ``run_dir`` (``fcntl.flock`` on ``run_dir/.distbench.lock``,
    released when the process ends, also on SIGKILL) so that two sweeps never write one
    run directory: two ``--resume`` runs at once would record a configuration twice.

    Returns:
        the open lock file (keep a reference while the sweep runs).

    Raises:
        ConfigError: another process holds the lock (its pid is named).
    """
    import fcntl

    f = open(run_dir / ".distbench.lock", "a+")  # noqa: SIM115 - held open for the whole sweep
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise ConfigError(f"another distbench run (pid {holder}) is writing {run_dir}: wait for it to end, or "
                          "choose another --out") from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


def all_recorded(cfg: ExperimentConfig, run_dir: Path, resume: bool) -> bool:
    """True for a ``--resume`` whose every configuration and repeat is already recorded in
    ``run_dir`` (not under ``repeats = "auto"``, whose rounds the sweep decides as it goes):
    the sweep then trains nothing, and :func:`run_config` writes the report without loading
    the data or TensorFlow (or setting up an emulated cluster)."""
    from distbench.harness.matrix import expand
    from distbench.results.store import recorded

    if not resume or cfg.run.auto_repeats or not (run_dir / "workload").exists():
        return False
    done = recorded(records_of(run_dir))
    return all((p.config_id, p.repeat) in done for p in expand(cfg))


def records_of(run_dir: Path) -> list[dict[str, Any]]:
    """The records already in ``run_dir`` (none when it does not exist yet)."""
    from distbench.results.store import read_records

    return read_records(run_dir) if (run_dir / "results.jsonl").exists() else []


def run_with_progress(cfg: ExperimentConfig, run_dir: Path, resume: bool,
                       run_sweep: Callable[..., list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run the sweep under a progress line: ``configuration i/n``, its name, its phase (read
    from its logs once a second), elapsed time and an ETA seeded per strategy family
    (:mod:`distbench.harness.progress`; ``~`` until a configuration finished); one line per
    finished configuration."""
    import threading

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    from distbench.harness import progress as prog
    from distbench.harness.matrix import expand
    from distbench.results.store import read_records, recorded

    done = recorded(read_records(run_dir)) if resume else set()
    todo = [p for p in expand(cfg) if (p.config_id, p.repeat) not in done]
    strategy_of = {p.key: p.strategy for p in todo}
    label_of = {p.key: prog.progress_label(p, cfg.run.repeats) for p in todo}  # as the table and headline name it
    finished: list[tuple[str, float, float | None]] = []
    shared = _shared_engines(cfg)
    state: dict[str, Any] = {"key": None, "start": 0.0, "index": 0}
    stop = threading.Event()

    console = Console(stderr=True)
    console.print(f"distbench: run directory [bold]{run_dir}[/]")
    with Progress(*_progress_columns(console.width), console=console, transient=False) as progress:
        task = progress.add_task("preparing workload", total=None, counter="", phase="", eta="-")

        def refresh() -> None:
            key = state["key"]
            if key is None:
                return
            eta = _eta(list(strategy_of.values())[state["index"]:], finished, shared, time.monotonic() - state["start"])
            progress.update(task, phase=prog.phase(run_dir / "logs", key),
                            eta=("~" if not finished else "") + time.strftime("%H:%M:%S", time.gmtime(max(0.0, eta))))

        def poll() -> None:
            while not stop.wait(1.0):
                refresh()

        poller = threading.Thread(target=poll, name="distbench-progress", daemon=True)
        poller.start()

        def on_round(line: str, points: list[Any]) -> None:  # repeats "auto" plans another round
            strategy_of.update((p.key, p.strategy) for p in points)
            label_of.update((p.key, prog.progress_label(p, cfg.run.repeats)) for p in points)
            progress.console.print(escape(line), soft_wrap=True)

        def on_progress(key: str, i: int, n: int, rec: dict[str, Any] | None) -> None:
            name = label_of.get(key, key)
            if rec is None:  # configuration i (0-based) starts
                state.update(key=key, start=time.monotonic(), index=i)
                progress.update(task, total=n, completed=i, description=name, counter=f"{i + 1}/{n}")
                refresh()
                return
            state["key"] = None
            timings = rec.get("timings") or {}
            finished.append((rec.get("strategy", ""), time.monotonic() - state["start"], timings.get("startup_s")))
            progress.update(task, completed=i, counter=f"{i}/{n}",
                            **({"phase": "done", "eta": "00:00:00"} if i == n else {}))
            head = f"[{i}/{n}] {name}: {rec['status']} "
            detail = prog.result_detail(rec)  # whole in a log or CI (helper-32: "train 1.…" in a file)
            detail = _fit(detail, progress.console.width - len(head)) if progress.console.is_terminal else detail
            progress.console.print(f"[{i}/{n}] {escape(name)}: [bold]{rec['status']}[/] {escape(detail)}",
                                   soft_wrap=True)  # one line per configuration

        try:
            return run_sweep(cfg, run_dir, resume=resume, on_progress=on_progress, on_round=on_round)
        except KeyboardInterrupt:  # the progress line stays on screen: it must not read as still running
            stop.set()
            poller.join(timeout=2.0)
            between = {} if state.get("key") else {"description": "sweep"}  # helper-42: not the last row, done ok
            progress.update(task, phase="interrupted", eta="-", **between)
            raise
        finally:
            stop.set()
            poller.join(timeout=2.0)


def _eta(todo: list[str], finished: list[tuple[str, float, float | None]], shared: set[str], ran: float) -> float:
    """Seconds left for the strategies ``todo`` (the running one first, ``ran`` seconds in)."""
    from distbench.harness import progress as prog

    return prog.eta_s(todo, finished, shared) - min(ran, prog.eta_s(todo[:1], finished, shared))


def _shared_engines(cfg: ExperimentConfig) -> set[str]:
    """The families that run on one engine per sweep, as the runner decides (only on this machine)."""
    local = cfg.cluster.emulate is None and not cfg.cluster.hosts  # as Placement decides, before the cluster is up
    return ({"spark_ps"} if cfg.spark.share_session and local else set()) | (
        {"mpi_ps"} if cfg.mpi.share_engine and local else set())


def _progress_columns(width: int) -> list[Any]:
    """The progress line's columns; an 80-column terminal gets no bar and no "configuration"
    word, so the times stay whole."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    narrow = width < 110
    return ([TextColumn("{task.fields[counter]}")] if narrow else
            [TextColumn("configuration {task.fields[counter]}")]) + \
        [TextColumn("[bold]{task.description}"), TextColumn("{task.fields[phase]}")] + \
        ([] if narrow else [BarColumn(bar_width=20)]) + [TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}")]


def _fit(detail: str, room: int) -> str:
    """``detail`` cut to ``room`` columns (at least 20) with an ellipsis: the whole reason is
    printed under the table and kept in the record."""
    return detail if len(detail) <= room else detail[:max(20, room - 1)].rstrip() + "…"


def print_report(records: list[dict[str, Any]], run_dir: Path, formats: tuple[str, ...] | None = None,
                  tensorboard: bool = False, advise_dir: Path | str | None = None,
                  target_accuracy: float | None = None) -> None:
    """Print the comparison table (and reasons of non-ok configurations), then write the
    report outputs (``formats``, default all) and optionally TensorBoard scalars into
    ``run_dir``; ``advise_dir``: the run directory the records come from, which the
    recommendation line and the report's "Run next" command name (default ``run_dir``
    when it holds the records); ``target_accuracy``: the target the records were
    re-scored with (``report --target-accuracy``), which those commands carry."""
    from rich.markup import escape

    from distbench.results.advice import with_target
    from distbench.results.headline import legend, terminal_lines
    from distbench.results.report import (FORMATS, NARROW_DROP, SHORT_COLUMNS, build, table_columns, table_rows,
                                          write_report)
    from distbench.results.terminal import print_fitted

    if advise_dir is None and (Path(run_dir) / "results.jsonl").exists():
        advise_dir = run_dir
    data = build(records, Path(advise_dir) if advise_dir is not None else None)
    if target_accuracy is not None and advise_dir is not None and data.advice and data.advice.next_command:
        data.advice.next_command = with_target(data.advice.next_command, str(advise_dir), target_accuracy)
    summaries = data.summaries
    headers = [SHORT_COLUMNS.get(c, c) for c in table_columns(summaries)]
    console, dropped = print_fitted(headers, table_rows(summaries), title=f"distbench: {run_dir}", drop=NARROW_DROP,
                                    left=("strategy", "straggler", "status"))
    if dropped:
        console.print(escape(f"(left out at this width: {', '.join(dropped)}; see report.md)"))
    console.print(escape(legend([h for h in headers if h not in dropped])))
    advise_line = None if advise_dir is None else " ".join(
        [shlex.quote(str(advise_dir))] + ([f"--target-accuracy {target_accuracy:g}"] if target_accuracy else []))
    for text in terminal_lines(data, advise_line):
        console.print("- " + escape(text))
    for s in summaries:
        if s.ok < s.repeats:
            for reason in s.reasons:
                console.print(f"  {escape(s.label)}: {escape(reason)}")
    paths = write_report(records, run_dir, formats or FORMATS, tensorboard=tensorboard, data=data)
    main_paths = [str(p) for p in paths if p.suffix != ".png"]
    pngs = [p for p in paths if p.suffix == ".png"]
    console.print(escape("wrote " + ", ".join(main_paths) + (f" and {len(pngs)} plots in {pngs[0].parent}" if pngs
                                                             else "")))


def reap_dead_clusters() -> None:
    """Remove the emulated clusters a killed sweep left (:func:`distbench.cluster.netns.reap_dead_clusters`),
    saying so on stderr."""
    from distbench.cluster.netns import reap_dead_clusters

    for line in reap_dead_clusters():
        click.echo(f"distbench: {line} (left by a sweep that was killed)", err=True)


# --------------------------------------------------------------------- compare()
FLAG_KEYS = {"strategies": "run__strategies", "workers": "run__workers", "epochs": "training__epochs",
             "batch_size": "training__global_batch_size", "target_accuracy": "training__target_accuracy",
             "repeats": "run__repeats", "timeout": "run__timeout_s", "device": "run__device"}
""":func:`compare`'s keyword arguments by the config key each sets (as ``distbench run``'s flags)."""


def compare(model: Any = None, data: Any = None, *, strategies: str | list[str] | None = None,
            workers: int | list[int] | None = None, epochs: int | None = None, batch_size: int | None = None,
            target_accuracy: float | None = None, repeats: int | str | None = None, timeout: float | None = None,
            device: str | None = None,
            out: str | Path | None = None, config: str | Path | None = None, features: str | list[str] | None = None,
            label: str = "label", resume: bool = False, **sections: dict[str, Any]) -> "Results":
    """Train ``model`` on ``data`` under each strategy and return the comparison: the sweep
    ``distbench run`` runs, from Python.

    Args:
        model: a ``keras.Model`` (its architecture and weights become the run's initial
            weights, saved as ``RUN_DIR/inputs/model.keras``, which every process loads); a
            factory ``(input_shape, num_classes) -> keras.Model`` importable from a module
            (or, defined in a notebook, called here when ``data`` are arrays); a ``[model]``
            form as a string (``"mlp"``, ``"path/model.keras"``, ``"pkg.mod:build"``) or a
            dict; ``None``: the config's.
        data: ``(x, y)`` or ``(x, y, x_test, y_test)`` NumPy arrays (saved as
            ``RUN_DIR/inputs/data.npz``); a pandas DataFrame (feature columns ``features``,
            default every column but ``label``); a Parquet file or directory (``features``
            names its feature column(s)); an ``.npz`` path; a dataset name (``"digits"``);
            ``None``: the config's.
        strategies, workers, epochs, batch_size, target_accuracy, repeats, timeout, device: as
            ``distbench run``'s flags (lists or comma-separated strings).
        out: the run directory [default: ``runs/<timestamp>``].
        config: a TOML or JSON config file to start from [default: the embedded default].
        features, label: a DataFrame's or Parquet data's feature columns (default: all but label) and label.
        resume: continue the run in ``out``.
        **sections: more config, one dict per section: ``training={"learning_rate": 0.1}``.

    Returns:
        :class:`Results` of the run directory.

    Raises:
        ConfigError, DataError: what ``distbench run`` refuses, with its message.
        Interrupted: Ctrl-C during the sweep (the records so far are kept in ``out``).
    """
    from distbench import config as config_mod
    from distbench.harness.rundir import check_run_dir, recorded_config

    t0 = time.time()
    run_dir = _compare_dir(out, resume, config)
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]  # the folders this call creates
    try:
        # resuming starts from the run's recorded config, as distbench run --resume does
        cfg = recorded_config(run_dir) if resume and config is None else config_mod.load(
            str(config) if config is not None else None)
        given: dict[str, Any] = {}
        for arg, value in (("strategies", strategies), ("workers", workers), ("epochs", epochs),
                           ("batch_size", batch_size), ("target_accuracy", target_accuracy), ("repeats", repeats),
                           ("timeout", timeout), ("device", device)):
            if value is not None:
                given[FLAG_KEYS[arg]] = _listed(arg, value)
        given.update(_section_keys(sections, list(cfg.to_dict())))
        given["run__out"] = str(run_dir)
        cfg = config_mod.override(cfg, **given)
        if not resume:
            check_run_dir(cfg, run_dir, resume)  # a used directory is refused before anything is written into it
        given.update(_data_keys(data, run_dir, features, label))
        given.update(_model_keys(model, data, run_dir))
        cfg = config_mod.override(cfg, **given)
        with _warnings_to_stderr(data):
            if model is None and data is not None and config is None and not resume:  # user test
                _warn_default_model(cfg)
            try:
                run_config(cfg, run_dir, resume, t0=t0)
            except Interrupted:
                raise Interrupted(interrupted_text(cfg, run_dir, python=True)) from None
    except ConfigError as e:
        if made and not (run_dir / "results.jsonl").exists():  # refused: nothing of it is left behind
            import shutil

            shutil.rmtree(made[-1], ignore_errors=True)
        raise _as_given(e, run_dir, data, model) from None
    return Results(run_dir)


def _compare_dir(out: str | Path | None, resume: bool, config: Any) -> Path:
    """``compare``'s run directory: ``out``, else ``runs/<timestamp>``.

    Raises:
        ConfigError: ``resume`` without ``out`` (user test, helper-36: it named a new
            ``runs/<timestamp>`` as holding no run) or into a directory that holds no run;
            ``out`` is a file.
    """
    if resume and out is None:
        raise ConfigError("compare(resume=True) needs the run directory to continue: pass out=DIR (the run's)")
    run_dir = Path(out) if out is not None else Path(f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"compare(out={str(run_dir)!r}): that is a file, not a directory; give a new directory")
    if resume and config is None and not (run_dir / "config.json").exists():
        raise ConfigError(f"compare(resume=True): {str(run_dir)!r} holds no run to continue; leave resume out to "
                          "start one there")
    return run_dir


def _section_keys(sections: dict[str, Any], known: list[str]) -> dict[str, Any]:
    """``compare``'s ``**sections`` (one dict per config section) as ``section__key`` overrides.

    Raises:
        ConfigError: a name that is neither a keyword argument nor a section (with a
            did-you-mean), or a section given as something other than a dict.
    """
    given: dict[str, Any] = {}
    for section, values in sections.items():
        if section not in known:
            import difflib

            words = [*FLAG_KEYS, "out", "config", "features", "label", "resume"]
            near = difflib.get_close_matches(section, [*words, *known], n=1)
            owner = next((s for s in known if s in SECTIONS
                          and section in {f.name for f in dataclasses.fields(SECTIONS[s])}), None)
            hint = (f"; did you mean {owner}={{{section!r}: {values!r}}}?" if owner else
                    f"; did you mean {near[0]}?" if near else "")
            raise ConfigError(f"compare({section}=...): no such keyword argument or config section" + hint
                              + f" (keyword arguments: {', '.join(words)}; config sections, each a dict of its keys: "
                              f"{', '.join(known)})")
        if not isinstance(values, dict):
            raise ConfigError(f"compare({section}=...): expected a dict of [{section}] keys, e.g. "
                              f"training={{'learning_rate': 0.1}}; got {type(values).__name__}")
        given.update({f"{section}__{k}": v for k, v in values.items()})
    return given


API_FLAGS = {"--resume": "resume=True", "--out": "out=", "--batch-size": "batch_size=", "--workers": "workers=",
             "--strategies": "strategies=", "--epochs": "epochs=", "--repeats": "repeats=", "--timeout": "timeout=",
             "--device": "device=", "--target-accuracy": "target_accuracy="}
"""``distbench run``'s flags that errors name, by :func:`compare`'s keyword argument for each."""


def _as_given(e: ConfigError, run_dir: Path, data: Any, model: Any = None) -> ConfigError:
    """``e`` as a :func:`compare` caller gives its input: ``compare``'s keyword arguments
    where it named ``distbench run``'s flags (``resume=True``, not ``--resume``), and the
    user's arrays and model instance where it named the ``.npz`` and ``.keras`` files
    :func:`compare` made of them (helper-31: a temporary path, removed with the refused run)."""
    saved = run_dir / INPUTS_DIR / "data.npz"
    if hasattr(model, "get_weights"):
        keras_file = run_dir / INPUTS_DIR / "model.keras"
        for form in (f"model 'path:{keras_file.absolute()}'", f"model 'path:{keras_file}'",
                     f"'path:{keras_file.absolute()}'", f"'path:{keras_file}'", str(keras_file.absolute()),
                     str(keras_file)):
            e = type(e)(str(e).replace(form, "compare's model"))
    e = type(e)(str(e).replace('run.device = "gpu"', 'device="gpu"')  # helper-42: the config file's spelling
                .replace('use device = "auto" or "cpu" (--device cpu)', 'use device="auto" or "cpu"')
                .replace("--device cpu", 'device="cpu"').replace('[run] device = "cpu" (device="cpu")', 'device="cpu"'))
    text = re.sub(r"(--[a-z][a-z-]*)\b(?: (\d[\w.]*))?",  # '--batch-size 96' -> 'batch_size=96'
                  lambda m: (API_FLAGS[m[1]] + (m[2] or "") if m[1] in API_FLAGS else m[0]),
                  str(e).replace(str(saved.absolute()), str(saved)))
    text = re.sub(r" or global_batch_size = \d+ under \[training\]", "", text)  # the config file's spelling
    text = text.replace("give the recorded values in CONFIG_FILE, or leave CONFIG_FILE out to use the recorded config",
                        "leave model, data and config= out to use the recorded ones")
    if isinstance(data, (str, os.PathLike)):  # helper-38: a Parquet path's errors named the config keys
        text = re.sub(r"\bdata\.label_col(?: = )?", "label=", text)
        text = re.sub(r"\bdata\.features_col(?: = )?", "features=", text)
        text = text.replace("e.g. features_col = [", "e.g. features=[")
    if not isinstance(data, (str, os.PathLike)) and str(saved) in text:
        text = text.replace(str(saved), "compare's data")
    return e if text == str(e) else type(e)(text)


def _warn_default_model(cfg: ExperimentConfig) -> None:
    """Warn that :func:`compare` called without a model trains the embedded default's."""
    logging.getLogger("distbench.api").warning(
        "compare(model=None): training the embedded default's model (%s, hidden %s), not one of yours; "
        "pass model= a keras.Model, a factory or a .keras path to compare your own", cfg.model.name, cfg.model.hidden)


@contextlib.contextmanager
def _warnings_to_stderr(data: Any) -> Iterator[None]:
    """Print distbench's warnings during :func:`compare` as ``distbench run`` does
    (``distbench: WARNING: ...`` on stderr, naming the user's arrays or DataFrame as
    ``compare's data``, not the ``.npz`` made of them), unless the caller's program
    configured logging itself (then its handlers get the records unchanged)."""
    logger = logging.getLogger("distbench")
    if logging.getLogger().handlers or logger.handlers:
        yield
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("distbench: %(levelname)s: %(message)s"))
    if not isinstance(data, (str, os.PathLike)) and data is not None:
        def as_given(record: logging.LogRecord) -> bool:
            record.msg, record.args = record.getMessage().replace("dataset 'npz'", "compare's data"), None
            return True
        handler.addFilter(as_given)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _listed(arg: str, value: Any) -> Any:
    """A list-valued keyword given as one value or a comma-separated string, as a list; a
    ``target_accuracy`` as the CLI reads it (``"97%"`` is 0.97; user test, helper-40)."""
    if arg == "target_accuracy" and isinstance(value, str):
        from distbench.text import parse_accuracy

        try:
            return parse_accuracy(value)
        except ValueError as e:
            raise ConfigError(f"compare(target_accuracy={value!r}): {e}") from None
    if arg not in ("strategies", "workers"):
        return value
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]
    if arg == "strategies":
        return [str(v).strip() for v in items]
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError):
        raise ConfigError(f"compare(workers={value!r}): expected a worker count or a list of them, e.g. workers=2 "
                          "or workers=[1, 2, 4]") from None


def _inputs(run_dir: Path) -> Path:
    d = run_dir / INPUTS_DIR
    d.mkdir(parents=True, exist_ok=True)
    return d


def _data_keys(data: Any, run_dir: Path, features: Any, label: str) -> dict[str, Any]:
    """The ``[data]`` keys for ``data`` (saving arrays and DataFrames as ``inputs/data.npz``)."""
    import numpy as np

    if data is None:
        return {}
    if isinstance(data, (tuple, list)):
        if len(data) not in (2, 4):
            raise ConfigError(f"compare(data=...): a tuple of {len(data)} items; expected (x, y) or "
                              "(x, y, x_test, y_test) NumPy arrays")
        arrays = dict(zip(("x", "y", "x_test", "y_test"), (np.asarray(a) for a in data)))
        _check_arrays(arrays)
    elif type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
        if label not in data.columns:
            raise ConfigError(f"compare(data=DataFrame): no label column {label!r}; its columns are "
                              f"{', '.join(map(str, data.columns))}: pass label='your_label_column'")
        cols = [features] if isinstance(features, str) else list(features or [c for c in data.columns if c != label])
        missing = [c for c in cols if c not in data.columns]
        if missing:
            raise ConfigError(f"compare(features=...): no column(s) {missing} in the DataFrame; its columns are "
                              f"{', '.join(map(str, data.columns))}")
        if label in cols:
            raise ConfigError(f"compare(features=...): the label column {label!r} is also a feature: the model would "
                              "read the answer (test accuracy 1.0 by construction); leave it out of features")
        bad = [c for c in cols if data[c].dtype.kind not in "biuf"]
        if bad:
            raise DataError(f"compare(data=DataFrame): feature column(s) {bad} are not numeric "
                            f"({', '.join(str(data[c].dtype) for c in bad)}); encode them as numbers")
        y = data[label]
        if str(y.dtype) == "category" and y.cat.categories.dtype.kind in "biuf":  # helper-40: "string labels"
            y = y.astype(y.cat.categories.dtype)
        if y.dtype.kind not in "biuf":
            raise DataError(f"compare(data=DataFrame): labels in column {label!r} are {y.dtype}, not class "
                            "indices; string labels are not supported: encode them as class indices 0..k-1 "
                            f"(e.g. pandas' factorize{', or .cat.codes' if str(y.dtype) == 'category' else ''})")
        arrays = {"x": data[cols].to_numpy(), "y": y.to_numpy()}
    elif isinstance(data, (str, Path)):
        p = Path(data)
        if p.suffix == ".npz":
            return {"data__name": "npz", "data__path": str(p)}
        if p.suffix.lower() in (".csv", ".tsv"):  # user test (helper-31): "data.name = 'data.csv'" and no way out
            raise ConfigError(f"compare(data={str(data)!r}): CSV files are not read directly; pass the DataFrame "
                              f"(data=pd.read_csv({str(data)!r}), label='your_label_column') or write it as Parquet")
        if p.suffix == ".parquet" or p.is_dir() or "://" in str(data):  # features None: all columns but label
            return {"data__name": "parquet", "data__path": str(data), "data__features_col": features or "",
                    "data__label_col": label}
        return {"data__name": str(data)}
    else:
        raise ConfigError(f"compare(data=...): got {type(data).__name__}; expected (x, y) NumPy arrays, a pandas "
                          "DataFrame, a Parquet or .npz path, or a dataset name such as 'digits'")
    path = run_dir / INPUTS_DIR / "data.npz"
    if not _same_as_recorded(path, arrays):
        np.savez(_inputs(run_dir) / "data.npz", **arrays)
    return {"data__name": "npz", "data__path": str(path)}


def _check_arrays(arrays: dict[str, Any]) -> None:
    """``compare``'s arrays checked as the ``.npz`` reader checks them, before they are saved or
    a factory is called on them (user test, helper-40: NaN, string or no labels reached a
    factory defined in the script as a bare ValueError, and string labels were told about
    "a valid .npz file").

    Raises:
        DataError: features that are not numbers, no samples, or labels that are strings,
            not whole numbers, or not class indices or one-hot rows.
    """
    from distbench.data.base import class_indices

    for k, a in arrays.items():
        if k.startswith("x") and a.dtype.kind not in "biuf":
            raise DataError(f"compare's data {k}: features of dtype {a.dtype}; expected numbers (encode strings and "
                            "categories as numbers)")
        if a.ndim == 0 or len(a) == 0:
            raise DataError(f"compare's data {k} has shape {a.shape}: no samples; expected (n, ...) with n >= 1 rows")
        if k.startswith("y"):
            try:
                class_indices(a, f"compare's data {k}")
            except DataError as e:  # helper-42: compare's caller saved nothing
                raise DataError(str(e).replace(") before saving", ")")) from None


def _same_as_recorded(path: Path, arrays: dict[str, Any]) -> bool:
    """True when a resumed run's saved ``inputs/data.npz`` holds ``arrays`` (then it is not
    written again); False when there is none (a new run).

    Raises:
        ConfigError: the run saved other arrays: a resume would overwrite the data its
            records were trained on (user test, helper-31: it did, and the next ``--resume``
            refused the run as 'the data file changed').
    """
    import numpy as np

    if not (path.exists() and (path.parent.parent / "workload").exists()):
        return False
    with np.load(path, allow_pickle=False) as saved:
        old = {k: saved[k] for k in saved.files}
    if old.keys() == arrays.keys() and all(np.array_equal(old[k], arrays[k]) for k in old):
        return True

    raise ConfigError(f"compare(resume=True): data= differ from the data this run was trained on "
                      f"({_difference(old, arrays)}): a run compares strategies on one workload; pass the same "
                      "data, or leave resume out and give a new out= to compare on these")


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between the recorded arrays ``old`` and the given ``new`` (same names):
    their shapes and dtypes where those differ, else how many values and the first (user test,
    helper-38: both sides read 'x (1200, 12) float32, y (1200,) int64')."""
    import numpy as np

    def shapes(d: dict[str, Any]) -> str:
        return ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in d.items())

    if old.keys() != new.keys() or any(old[k].shape != new[k].shape or old[k].dtype != new[k].dtype for k in old):
        return f"{shapes(old)}; given {shapes(new)}"
    k = next(k for k in old if not np.array_equal(old[k], new[k]))
    diff = old[k] != new[k]
    at = tuple(int(i) for i in np.argwhere(diff)[0])
    where = f"{k}[{', '.join(map(str, at))}]"
    return (f"the same shapes and dtypes, but {int(diff.sum()):,} of the {diff.size:,} values of {k} differ, "
            f"first {where}: {old[k][at].item():.6g} recorded, {new[k][at].item():.6g} given")


def _model_keys(model: Any, data: Any, run_dir: Path) -> dict[str, Any]:
    """The ``[model]`` keys for ``model`` (saving a model instance as ``inputs/model.keras``)."""
    if model is None:
        return {}
    if isinstance(model, dict):
        return {f"model__{k}": v for k, v in model.items()}
    if isinstance(model, (str, Path)):
        s = str(model)
        if s.endswith(".keras"):
            return {"model__path": s}
        return {"model__factory": s} if ":" in s else {"model__name": s}
    if hasattr(model, "save") and hasattr(model, "get_weights"):
        return {"model__path": _save_model(model, run_dir), "model__factory": ""}
    if callable(model):
        mod, name = getattr(model, "__module__", None), getattr(model, "__qualname__", "")
        if mod and mod != "__main__" and "<" not in name:
            return {"model__factory": f"{mod}:{name}"}
        if isinstance(data, (tuple, list)) and len(data) in (2, 4):  # a notebook's factory: build the model here
            import numpy as np

            x, y = np.asarray(data[0]), np.asarray(data[1])
            classes = int(y.shape[1]) if y.ndim == 2 else int(y.max()) + 1
            try:
                built = model(tuple(x.shape[1:]), classes)
            except Exception as e:
                raise ConfigError(f"compare(model={name}): the factory raised {type(e).__name__} for input_shape="
                                  f"{tuple(x.shape[1:])}, num_classes={classes}: {e}") from None
            return _model_keys(built, None, run_dir)
        raise ConfigError(f"compare(model={name or model!r}): a factory defined in __main__ (a notebook or script) "
                          "cannot be imported by the processes that train; pass the model it builds, arrays as data "
                          "(then it is called here), or move it to a module: model='mymodule:build'")
    raise ConfigError(f"compare(model=...): got {type(model).__name__}; expected a keras.Model, a factory, a "
                      "'.keras' path, 'module:function', a model name ('mlp', 'cnn') or a dict of [model] keys")


def _save_model(model: Any, run_dir: Path) -> str:
    """Save a ``keras.Model`` as ``RUN_DIR/inputs/model.keras``; refuse one the training processes cannot load."""
    def layers(m: Any) -> list[Any]:
        return [m] + [x for sub in getattr(m, "layers", []) for x in layers(sub)]

    local = sorted({type(layer).__name__ for layer in layers(model) if type(layer).__module__ == "__main__"})
    if local:
        raise ConfigError(f"compare(model=...): {', '.join(local)} is defined in __main__ (a notebook or script), "
                          "so the processes that train cannot import it to load the model; move the class to a "
                          "module on PYTHONPATH (registered with @keras.saving.register_keras_serializable())")
    path = run_dir / INPUTS_DIR / "model.keras"
    if _same_model_as_recorded(path, model):
        return str(path)
    path = _inputs(run_dir) / "model.keras"
    try:
        model.save(path)
    except Exception as e:  # Keras raises ValueError, TypeError or NotImplementedError for what it cannot save
        raise ConfigError(f"compare(model=...): the model cannot be saved as a .keras file ({type(e).__name__}: "
                          f"{' '.join(str(e).split())[:300]}); give its custom layers get_config() and "
                          "@keras.saving.register_keras_serializable(), or pass a factory 'module:function'") from None
    return str(path)


def _same_model_as_recorded(path: Path, model: Any) -> bool:
    """True when a resumed run saved ``inputs/model.keras`` and ``model``'s weights are the
    run's initial weights (their SHA-256, ``workload/workload.json``): it is not saved again;
    False for a new run.

    Raises:
        ConfigError: another model (other weights or shapes): a resume would overwrite the
            model the run's records were trained from (user test, helper-31: its next
            configurations failed on a weight-shape mismatch blamed on the user's factory).
    """
    import json

    import numpy as np

    from distbench.workload import META_FILE, WORKLOAD_DIR, weights_sha256

    meta_file = path.parent.parent / WORKLOAD_DIR / META_FILE
    if not (path.exists() and meta_file.exists()):
        return False
    meta = json.loads(meta_file.read_text())
    weights = [np.asarray(w, dtype=np.float32) for w in model.get_weights()]
    if weights_sha256(weights) == meta.get("initial_weights_sha256"):
        return True
    shapes = [list(w.shape) for w in weights]
    what = ("weight shapes " + str(shapes) + " against the run's " + str(meta.get("weight_shapes"))
            if shapes != meta.get("weight_shapes") else "the same shapes with other weights")
    raise ConfigError(f"compare(resume=True): model= is not the model this run was trained from ({what}): a run "
                      "compares strategies from one set of initial weights; pass the same model (or leave model "
                      "out: the run's is used), or leave resume out and give a new out= to compare this one")


class Results:
    """A run directory's results, as :func:`compare` returns them (also ``Results("runs/x")``).

    Attributes:
        run_dir: the run directory.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        if not (self.run_dir / "results.jsonl").exists():
            raise ConfigError(f"Results({str(run_dir)!r}): " + ("no such directory" if not self.run_dir.exists() else
                              "no results.jsonl there (not a run directory, or a run that finished nothing yet)"))

    @property
    def raw(self) -> list[dict[str, Any]]:
        """Every record (dicts, as in ``results.jsonl``)."""
        from distbench.results.store import read_records

        return read_records(self.run_dir)

    @property
    def records(self) -> Any:
        """The records as a pandas DataFrame: one row per configuration and repeat, with the
        main fields (training seconds, samples/s, accuracy, time to target, status, reason).
        The number columns are floats, ``NaN`` where a record has none (a target never
        reached, a configuration that did not train)."""
        import pandas as pd

        numbers = ("final_test_accuracy", "time_to_target_s", "train_s", "samples_per_s")
        rows = [{"config_id": r.get("config_id"), "strategy": r.get("strategy"), "workers": r.get("workers"),
                 "repeat": r.get("repeat"), "status": str(r.get("status")),
                 "final_test_accuracy": r.get("final_test_accuracy"), "time_to_target_s": r.get("time_to_target_s"),
                 "train_s": (r.get("timings") or {}).get("train_s"), "samples_per_s": r.get("samples_per_s"),
                 "reason": r.get("reason")} for r in self.raw]
        df = pd.DataFrame(rows)
        for col in numbers:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        return df

    def advise(self, target: str | None = None, target_accuracy: float | None = None,
               node_step: float | None = None) -> Any:
        """The recommendation (:class:`distbench.results.advice.Advice`; ``str()`` of it is
        ``distbench advise``'s text), optionally for a ``target`` cluster and another accuracy;
        ``node_step``: seconds of ``single``'s step at the run's global batch on one target
        node, as in :meth:`predict` (``distbench advise --node-step``)."""
        from distbench.calibrate import ensure
        from distbench.results.advice import advise, keep_accuracy, parse_target
        from distbench.results.records import retarget

        _check_target(target, optional=True)
        _check_accuracy(target_accuracy)
        recs = self.raw if target_accuracy is None else retarget(self.raw, target_accuracy)
        if target is not None:
            ensure(self.run_dir)
        tgt = parse_target(target, "target=") if target is not None else None
        for line in tgt.warnings() if tgt is not None else []:  # user test (helper-27): said by predict only
            warnings.warn(f"target={target!r}: {line}", stacklevel=2)
        if node_step is not None:
            if tgt is None:
                raise ConfigError("node_step= needs target= (the cluster whose node it was measured on)")
            tgt = dataclasses.replace(tgt, node_step_s=_check_node_step(node_step))
            _refuse_emulated_node_step(tgt.emulated)
        return keep_accuracy(advise(recs, self.run_dir, tgt), str(self.run_dir), target_accuracy, target)

    @property
    def headline(self) -> str:
        """The recommendation's first sentence."""
        return self.advise().headline

    def predict(self, target: str, node_step: float | None = None, target_accuracy: float | None = None,
                against: "str | Path | Results | None" = None) -> Any:
        """Each strategy's predicted epoch time, time to target (``warmup_s`` +
        ``epochs_to_target`` x ``epoch_s``, both as measured in the run) and rank on ``target`` (the
        per-strategy model of ``distbench predict --target``), as a pandas DataFrame whose
        ``attrs["inputs"]`` holds what the prediction rests on, as ``--json`` gives it:
        ``measured`` and ``assumed`` (lists of sentences), ``validated`` (the error band
        the validation measured, and what of the target lies outside it), ``model_bytes``,
        ``n_train``, ``global_batch``, ``cores``, ``target_accuracy``, ``not_predicted`` (and
        ``not_predicted_once``: parameter-server rows whose window held the whole run); and
        ``attrs["target"]`` the cluster as read (nodes, per_node, workers, bandwidth_Bps,
        latency_s, emulated, gpus, text).

        Args:
            target: the cluster as text, e.g. ``"4 nodes x 2, 10 Gbit/s"``.
            node_step: seconds of ``single``'s step at the run's global batch measured on one
                target node (default: the nodes compute like this machine).
            target_accuracy: the accuracy the time to target counts to (default: the run's).
            against: a run made on that cluster (a directory or :class:`Results`), as
                ``predict --against``: the columns ``measured_epoch_s``, ``measured_ttt_s``
                (medians over its repeats at the target's worker count), ``epoch_ratio`` and
                ``ttt_ratio`` (predicted / measured), and ``attrs["against_warning"]`` when
                that run cannot check the prediction ('' otherwise; also warned, as a ``UserWarning``).

        Raises:
            ConfigError: a target that cannot be parsed, a ``node_step`` that is not seconds > 0,
                a ``target_accuracy`` outside (0, 1], an ``against`` that is no run directory,
                or what the model misses (naming the command).
        """
        import pandas as pd

        from distbench import costmodel
        from distbench.calibrate import ensure
        from distbench.results.advice import parse_target

        _check_target(target)
        _check_accuracy(target_accuracy)
        if node_step is not None:
            node_step = _check_node_step(node_step)
        tgt = parse_target(target, "target=")
        for line in tgt.warnings():
            warnings.warn(f"target={target!r}: {line}", stacklevel=2)
        if node_step is not None:
            _refuse_emulated_node_step(tgt.emulated)
        ensure(self.run_dir)
        try:
            preds, inputs = costmodel.predict_strategies(self.run_dir, tgt.cluster(node_step), target_accuracy)
        except ValueError as e:
            raise ConfigError(f"predict: {e}") from None
        nothing = costmodel.nothing_distributed(preds, inputs)
        if nothing:
            raise ConfigError(f"predict: {nothing}")
        df = pd.DataFrame([{"rank": p.rank, "strategy": p.label, "workers": p.workers, "epoch_s": p.epoch_s,
                            "time_to_target_s": p.time_to_target_s, "epochs_to_target": p.epochs_to_target,
                            "warmup_s": p.warmup_s, **{f"{k}_s": v for k, v in p.terms_s.items()},
                            "notes": "; ".join(p.notes), "missing": p.missing} for p in preds])
        df.attrs["inputs"] = inputs
        df.attrs["target"] = tgt.data()
        if against is not None:  # user test (helper-17): the CLI had --against, Python had not
            other = str(against.run_dir if isinstance(against, Results) else against)
            if not (Path(other) / "results.jsonl").is_file():
                raise ConfigError(f"against={other!r}: expected a run directory holding results.jsonl (a run made on "
                                  "the target cluster)")
            differs = costmodel.other_model_or_data(self.run_dir, other)
            if differs:  # user test (helper-36)
                raise ConfigError(f"against={other!r} trained another model or other data ({differs}), so it checks "
                                  f"nothing of this prediction; give a run of this workload made on the target")
            rows = {a["strategy"]: a for a in costmodel.against(preds, costmodel.measured_on(other, tgt.workers))}
            for col, key in (("measured_epoch_s", "measured_epoch_median_s"), ("epoch_ratio", "epoch_ratio"),
                             ("measured_ttt_s", "measured_ttt_median_s"), ("ttt_ratio", "ttt_ratio")):
                df[col] = [rows.get(name, {}).get(key) for name in df["strategy"]]
            df.attrs["against_warning"] = costmodel.against_mismatch(self.run_dir, other, tgt.cluster(node_step))
            if df.attrs["against_warning"]:  # user test (helper-20): the CLI prints it; a notebook showed nothing
                warnings.warn(f"against={other!r}: {df.attrs['against_warning']}", stacklevel=2)
        return df

    @property
    def report(self) -> dict[str, Path]:
        """The report files that exist: ``html``, ``md``, ``csv``, ``json`` and the plots (``plots``: a folder)."""
        names = {"html": "report.html", "md": "report.md", "csv": "summary.csv", "json": "summary.json",
                 "plots": "plots"}
        return {k: self.run_dir / v for k, v in names.items() if (self.run_dir / v).exists()}

    def __repr__(self) -> str:
        return f"Results({str(self.run_dir)!r}): {len(self.raw)} record(s); {self.headline}"

    def _repr_html_(self) -> str:
        """Jupyter: the headline, the summary table and the plots inline."""
        import base64
        import html

        import pandas as pd

        parts = [f"<p><b>{html.escape(self.headline)}</b></p>"]
        if "csv" in self.report:
            parts.append(pd.read_csv(self.report["csv"]).to_html(index=False))
        for png in sorted((self.run_dir / "plots").glob("*.png"))[:4] if "plots" in self.report else []:
            data = base64.b64encode(png.read_bytes()).decode()
            parts.append(f'<img alt="{html.escape(png.name)}" src="data:image/png;base64,{data}" width="480"/>')
        return "\n".join(parts)


def _check_accuracy(target_accuracy: Any) -> None:
    """Refuse a ``target_accuracy=`` that is not a test accuracy in (0, 1]."""
    if target_accuracy is None or (isinstance(target_accuracy, (int, float)) and not isinstance(target_accuracy, bool)
                                   and 0 < target_accuracy <= 1):
        return
    from distbench.results.records import accuracy_hint

    raise ConfigError(f"target_accuracy={target_accuracy!r}: expected a test accuracy in (0, 1]"
                      f"{accuracy_hint(target_accuracy)}")


def _refuse_emulated_node_step(emulated: bool) -> None:
    """Raise ConfigError for a ``node_step=`` on an emulated target (its nodes are this machine)."""
    if emulated:
        from distbench.costmodel import EMULATED_NODE_STEP

        raise ConfigError(EMULATED_NODE_STEP.replace("--node-step", "node_step="))


def _check_node_step(node_step: Any) -> float:
    """``node_step`` as seconds > 0: a number of seconds (warned about, :class:`UserWarning`,
    outside 1 us .. 10 s), a text with its unit (``"4ms"``, ``"250us"``, ``"0.5s"``) or
    without one (``"0.004"``: seconds, warned about as a number).

    Raises:
        ConfigError: not a finite number of seconds > 0.
    """
    bare = not isinstance(node_step, str)  # a number: warned about outside 1 us .. 10 s, as the CLI's bare one
    if isinstance(node_step, str):  # "4ms", "250us", as distbench predict --node-step takes it
        from distbench.text import SECONDS

        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*([a-zµ]*)\s*", node_step, re.I)
        if m and not m[2]:  # "5": seconds, as the CLI's bare --node-step 5 (user test, helper-18)
            node_step, bare = float(m[1]), True
        elif m and m[2].lower() in SECONDS:
            node_step = float(m[1]) * SECONDS[m[2].lower()]
    if not (isinstance(node_step, (int, float)) and not isinstance(node_step, bool) and math.isfinite(node_step)
            and node_step > 0):
        raise ConfigError(f"node_step={node_step!r}: expected seconds > 0 (single's step at the run's global "
                          "batch, measured on one target node), e.g. node_step=0.004 or node_step=\"4ms\"")
    if bare and not 1e-6 <= node_step <= 10:  # as distbench predict --node-step warns about a bare number
        hint = f"did you mean milliseconds (node_step={node_step / 1e3:g})?" if node_step > 10 else \
            "expected the seconds of one step (e.g. node_step=0.004 for 4 ms)"
        warnings.warn(f"node_step={node_step!r} is {node_step:g} seconds per step: {hint}", UserWarning,
                      stacklevel=3)
    return float(node_step)


def _check_target(target: Any, optional: bool = False) -> None:
    """Refuse a ``target=`` that is not a text such as ``"4 nodes x 2, 10 Gbit/s"``."""
    if (target is None and optional) or isinstance(target, str):
        return
    raise ConfigError(f"target={target!r}: expected the cluster as text, e.g. target=\"4 nodes x 2, 10 Gbit/s\"")

"""The run directory: what makes one (the workload saved once, the config recorded) and
what a later run may do with it (``--resume`` with the same workload, ``--out`` refusing a
foreign directory)."""

from __future__ import annotations

import logging
import json
import shutil
from pathlib import Path
from typing import Any, Callable

from distbench.config import ConfigError, ExperimentConfig, from_dict
from distbench.workload import CONFIG_FILE, WORKLOAD_DIR, Workload, checked_dataset, read_recorded

_LOG = logging.getLogger("distbench.harness.rundir")
WORKLOAD_SECTIONS = ("data", "model", "training", "ps", "tf")
"""The sections a resume must keep: the workload, and the strategies' own settings, which a
configuration's id does not name (user test, helper-39: a resume at another
``ps.communication_window`` pooled repeats of two windows under one configuration, and no
report said so)."""
NOT_WORKLOAD = {("model", "factory_dir"), ("ps", "windows"), ("ps", "host"), ("ps", "port")}
"""Keys of those sections that say where, not what (a run recorded before ``factory_dir``
existed records none), or that name configurations by themselves (each window of
``ps.windows`` is a configuration of its own): a resume may change them."""


def recorded_config(run_dir: Path) -> ExperimentConfig:
    """The config recorded in ``run_dir`` (keys added since then hold their defaults).

    Raises:
        ConfigError: no readable config file there, or one this version cannot read.
    """
    path = run_dir / CONFIG_FILE
    try:
        raw = read_recorded(run_dir)
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
            data/model/training settings, or the strategies' (``[ps]``, ``[tf]``), differ
            from the recorded ones (naming each
            setting, its recorded and given value and the flag that changed it).
    """
    if not (run_dir / WORKLOAD_DIR).exists():
        return
    if not resume:
        raise ConfigError(f"run directory {run_dir} already holds a run: pass --resume to continue it, "
                          "or choose a new --out directory")
    raw = read_recorded(run_dir)
    new = cfg.to_dict()
    defaults = ExperimentConfig().to_dict()  # keys added since the run was made hold their defaults
    flags = flags or {}
    old = {sec: {**defaults[sec], **raw.get(sec, {})} for sec in WORKLOAD_SECTIONS}
    changed = [(sec, k) for sec in WORKLOAD_SECTIONS for k, v in new[sec].items()
               if old[sec].get(k) != v and (sec, k) not in NOT_WORKLOAD]
    if not changed:
        return
    keys = [f"{sec}.{k}" for sec, k in changed]
    diff = "; ".join(f"{key} recorded {old[sec].get(k)!r}, given {new[sec][k]!r}"
                     + (f" by {flags[key]}" if key in flags else "") for key, (sec, k) in zip(keys, changed))
    named = list(dict.fromkeys(flags[key] for key in keys if key in flags))  # a preset sets several keys
    fix = (f"drop {' and '.join(named)} (the recorded values are used)" if named else
           "give the recorded values in CONFIG_FILE, or leave CONFIG_FILE out to use the recorded config")
    if keys == ["training.target_accuracy"]:  # scored after the run: no new training needed
        fix += (f"; to score the recorded runs against another target, use 'distbench report {run_dir} "
                f"--target-accuracy {new['training']['target_accuracy']}'")
    what = "the workload" if all(sec in ("data", "model", "training") for sec, _ in changed) else \
        "the workload and the strategies' settings"
    raise ConfigError(f"--resume: {what} must stay identical to the run in {run_dir}, but {diff}; "
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
        before_model: called once those checks pass, before the model is built or imported
            (``distbench run``: :func:`~distbench.harness.evaluate.hide_accelerators`, which
            imports TensorFlow quietly and off the GPUs; a Horovod rank keeps its GPU).

    Returns:
        the run's :class:`~distbench.workload.Workload`.

    Raises:
        ConfigError: see :func:`check_run_dir`; the data or the model are invalid; on
            resume, ``[model] factory`` cannot be imported from here.
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
    if cfg.model.factory:  # a new run's model build checks it; on resume every configuration failed on it, each
        from distbench.models.sources import import_factory  # leaving a failed record (user test, helper-35)

        if before_model is not None:  # TensorFlow quiet before the module imports it (helper-36: a resume printed
            before_model()  # TensorFlow's start-up lines)

        import_factory(cfg.model.factory, cfg.model.factory_dir)
    (run_dir / CONFIG_FILE).write_text(json.dumps(resumed_config(cfg, run_dir), indent=2))  # new sweep settings
    return Workload.load(run_dir)


def resumed_config(cfg: ExperimentConfig, run_dir: Path) -> dict[str, Any]:
    """The config a resumed sweep records in ``run_dir``: ``cfg``'s settings, with ``[run]``'s
    strategies and worker counts the union of those recorded and those of this sweep, and
    the larger repeats, so that the file still describes every configuration the run holds
    (user test, helper-31: ``--resume --strategies single`` narrowed a run of 8 strategies to
    one, which a later plain ``--resume`` then continued)."""
    new = cfg.to_dict()
    try:
        old = json.loads((run_dir / CONFIG_FILE).read_text()).get("run") or {}
    except (OSError, ValueError, AttributeError):
        return new
    run = new["run"]
    run["strategies"] = list(dict.fromkeys([*(old.get("strategies") or []), *run["strategies"]]))
    run["workers"] = sorted({*(w for w in old.get("workers") or [] if isinstance(w, int)), *run["workers"]})
    if isinstance(old.get("repeats"), int) and isinstance(run["repeats"], int):
        run["repeats"] = max(old["repeats"], run["repeats"])
    return new

"""Experiment configuration: TOML -> validated dataclasses, with clear errors.

A config file has the sections ``[data]``, ``[model]``, ``[training]``, ``[run]``,
``[ps]``, ``[tf]``, ``[spark]``, ``[mpi]``, ``[cluster]`` and ``[scenario]`` (straggler scenarios).
Each section is a dataclass in its own module of this package, with its parsing and its
checks: :mod:`~distbench.config.data`, :mod:`~distbench.config.model`,
:mod:`~distbench.config.training` (``[training]`` and ``[run]``), :mod:`~distbench.config.engines`
(``[ps]``, ``[tf]``, ``[mpi]``), :mod:`~distbench.config.spark`, :mod:`~distbench.config.cluster`
and :mod:`~distbench.config.scenario`, all built on :mod:`~distbench.config.values` (the
typed section builder and its coercion helpers). This module holds the whole experiment,
reads files and applies presets and overrides; every key is optional and falls back to the default below
(digits, a small MLP, every strategy available here, 2 workers; the embedded default
experiment, :func:`embedded_default`, trains a larger MLP for longer). Unknown sections or
keys and values of the wrong type or out of range raise :class:`ConfigError`, whose message
names the key, the value received and what is allowed; the CLI turns it into exit status 2
with that one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distbench.contracts import INPUTS_DIR, ConfigError
from distbench.config.cluster import ClusterConfig, EmulateConfig, check_cluster
from distbench.config.data import DATASETS, DataConfig, check_data
from distbench.config.engines import MPIConfig, PSConfig, TFConfig, check_engines
from distbench.config.model import ACTIVATIONS, APPLICATIONS, MODELS, ModelConfig, check_model
from distbench.config.scenario import ScenarioConfig, build_scenario, check_scenario
from distbench.config.spark import SparkConfig, check_spark_config
from distbench.config.training import AUTO_REPEATS, OPTIMIZERS, RunConfig, TrainingConfig, check_training_and_run
from distbench.config.values import build

__all__ = ["ACTIVATIONS", "APPLICATIONS", "AUTO_REPEATS", "DATASETS", "MODELS", "OPTIMIZERS", "PRESETS", "SECTIONS",
           "ClusterConfig", "ConfigError", "DataConfig", "EmulateConfig", "ExperimentConfig", "MPIConfig",
           "ModelConfig", "PSConfig", "RunConfig", "ScenarioConfig", "SparkConfig", "TFConfig", "TrainingConfig",
           "apply_preset", "embedded_default", "from_dict", "load", "override", "validate"]


@dataclass
class ExperimentConfig:
    """A whole experiment: data, model, training, sweep and engine settings."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    run: RunConfig = field(default_factory=RunConfig)
    ps: PSConfig = field(default_factory=PSConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    mpi: MPIConfig = field(default_factory=MPIConfig)
    tf: TFConfig = field(default_factory=TFConfig)
    scenario: ScenarioConfig = field(default_factory=ScenarioConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON-able dicts."""
        return dataclasses.asdict(self)


def validate(cfg: ExperimentConfig) -> ExperimentConfig:
    """Check values and cross-field constraints; return ``cfg`` (``data.path`` and
    ``model.path`` made absolute). Each section is checked by the module of this package
    that defines it.

    Raises:
        ConfigError: naming the key, the value and what is allowed.
    """
    check_data(cfg.data)
    check_model(cfg.model)
    check_training_and_run(cfg.training, cfg.run)
    check_engines(cfg.ps, cfg.tf, cfg.run.strategies)
    check_spark_config(cfg.spark.master, cfg.spark.conf)
    check_scenario(cfg)
    check_cluster(cfg.cluster, cfg.run.workers)
    return cfg


SECTIONS = {
    "data": DataConfig,
    "model": ModelConfig,
    "training": TrainingConfig,
    "run": RunConfig,
    "ps": PSConfig,
    "spark": SparkConfig,
    "mpi": MPIConfig,
    "tf": TFConfig,
    "scenario": ScenarioConfig,
    "cluster": ClusterConfig,
}


def from_dict(raw: dict[str, Any]) -> ExperimentConfig:
    """Build and validate a config from a parsed TOML document.

    Raises:
        ConfigError: unknown section/key, wrong type or impossible value.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"config must be a TOML table, got {type(raw).__name__}")
    parts = {}
    for section, value in raw.items():
        if not isinstance(value, dict):
            owner = next((n for n, c in SECTIONS.items() if section in {f.name for f in dataclasses.fields(c)}), None)
            hint = f"put it under [{owner}]" if owner else "keys belong in a section: " + ", ".join(
                f"[{n}]" for n in SECTIONS)
            raise ConfigError(f"top-level key {section!r} = {value!r} is outside any section; {hint}")
        if section not in SECTIONS:
            close = difflib.get_close_matches(section, SECTIONS, 1, 0.6)
            hint = f"did you mean [{close[0]}]? " if close else ""
            raise ConfigError(f"unknown section [{section}]; {hint}allowed sections: {', '.join(SECTIONS)}")
        parts[section] = (build_scenario(value) if section == "scenario"
                          else build(section, SECTIONS[section], value))
    return validate(ExperimentConfig(**parts))


def embedded_default() -> ExperimentConfig:
    """The embedded default experiment (``distbench run`` with no config file; written out in
    ``examples/default.toml``): digits, an MLP with two Dense layers of 512 units, 40 epochs,
    target test accuracy 0.97 (the fields' defaults otherwise: global batch 64, plain SGD at
    learning rate 0.3), every strategy, 2 workers, repeats ``"auto"``.

    It differs from a config file's defaults (the field defaults of :class:`ModelConfig`,
    :class:`TrainingConfig` and :class:`RunConfig`) in four keys, ``model.hidden``,
    ``training.epochs``, ``training.target_accuracy`` and ``run.repeats``, for the first
    run's sake: that run asks which strategy wins here and should end with an answer that
    holds up. Its training is long enough that the first epoch's one-off warm-up is under 10%
    of ``single``'s training time on a 2-core machine (about 5%; with the fields' defaults, a
    64-unit MLP for 10 epochs, it was 50-80%, and the report compared warm-ups of 0.1 s); the
    target is one the synchronous strategies reach after about 8 of the 40 epochs (0.9 was
    reached in the first 1-3, where the warm-up is a large share of the time to it); and it
    repeats until the recommendation can separate the leaders (one run each gives no
    recommendation). A config
    file keeps the fields' defaults: it names its own sweep (window, straggler or link-rate
    sweeps, clusters, large models), whose runs can cost minutes each, and a file written
    before this default changed runs what it ran then.
    """
    return ExperimentConfig(model=ModelConfig(hidden=[512, 512]),
                            training=TrainingConfig(epochs=40, target_accuracy=0.97),
                            run=RunConfig(repeats=AUTO_REPEATS))


def load(path: str | os.PathLike[str] | None) -> ExperimentConfig:
    """Read a TOML config file (``None`` = the embedded default) and validate it. A ``.json``
    file is read as JSON with the same sections: a run directory's ``config.json`` (what
    that run used), so ``distbench run DIR/config.json --out DIR --resume --repeats 3``
    continues a run exactly as it was configured.

    The embedded default (:func:`embedded_default`) differs from an empty file in four keys.

    Raises:
        ConfigError: unreadable file, TOML (or JSON) syntax error, or invalid content.
    """
    if path is None:
        return validate(embedded_default())
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {str(p)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text") from None
    if p.suffix.lower() == ".json":
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"config file {str(p)!r} is not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {str(p)!r}: expected a JSON object of sections, got {type(raw).__name__}")
        return from_dict(relocated_inputs(raw, p.parent))  # a run directory's, copied or moved
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {e}") from None
    return from_dict(raw)


def relocated_inputs(raw: Any, run_dir: str | os.PathLike[str]) -> Any:
    """A run directory's recorded config ``raw`` with ``data.path``, ``data.test_path`` and
    ``model.path`` that name another run directory's ``inputs/`` file pointed at ``run_dir``'s
    where it holds the same file (``distbench.compare`` saves its arrays and model there and
    records the paths absolute): a copied or moved run directory reads its own inputs (it read
    the original's, or failed where that was gone). ``raw`` is changed in place and returned."""
    rd = Path(run_dir)
    for sec, key in (("data", "path"), ("data", "test_path"), ("model", "path")):
        section = raw.get(sec) if isinstance(raw, dict) else None
        value = section.get(key) if isinstance(section, dict) else None
        if not isinstance(value, str) or not value:
            continue
        old, here = Path(value), rd / INPUTS_DIR / Path(value).name
        if old.parent.name == INPUTS_DIR and here.exists() and old.parent.resolve() != here.parent.resolve():
            section[key] = str(here.resolve())
    return raw


# Presets from the dist-keras tuning guide (its recipes per goal). dist-keras' batch_size is
# per worker; distbench's is global, so global = per-worker batch x workers.
PRESETS: dict[str, dict[str, Any]] = {
    "local-validation": {"run__strategies": ["spark_ps:adag"], "run__workers": [2],
                         "ps__communication_window": 8, "training__global_batch_size": 32 * 2},
    "production": {"run__strategies": ["spark_ps:adag"], "run__workers": [10],
                   "ps__communication_window": 12, "training__global_batch_size": 32 * 10},
    "max-throughput": {"run__strategies": ["spark_ps:downpour"], "run__workers": [10],
                       "ps__communication_window": 4, "training__global_batch_size": 128 * 10},
    "elastic": {"run__strategies": ["spark_ps:aeasgd"], "run__workers": [10],
                "ps__communication_window": 32, "training__global_batch_size": 32 * 10},
}


def apply_preset(cfg: ExperimentConfig, name: str) -> ExperimentConfig:
    """Apply preset ``name`` (see :data:`PRESETS`) on top of ``cfg``; flags applied later win.

    Raises:
        ConfigError: unknown preset, or the result is invalid.
    """
    if name not in PRESETS:
        close = [p for p in PRESETS if name and p.startswith(name)] or difflib.get_close_matches(name, PRESETS, 2, 0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise ConfigError(f"unknown preset {name!r}; {hint}expected one of {', '.join(PRESETS)}")
    return override(cfg, **PRESETS[name])


def override(cfg: ExperimentConfig, **values: Any) -> ExperimentConfig:
    """Apply ``section.key=value`` style overrides (``None`` values are ignored).

    Keys are given as ``section__key`` (e.g. ``run__workers=[4]``). Returns a new,
    validated config.
    """
    raw = cfg.to_dict()
    for dotted, v in values.items():
        if v is None:
            continue
        section, key = dotted.split("__", 1)
        raw[section][key] = v
    return from_dict(raw)

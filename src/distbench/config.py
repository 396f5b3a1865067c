"""Experiment configuration: TOML -> validated dataclasses, with clear errors.

A config file has the sections ``[data]``, ``[model]``, ``[training]``, ``[run]``,
``[ps]``, ``[tf]``, ``[spark]``, ``[mpi]``, ``[cluster]`` and ``[scenario]`` (straggler scenarios,
:mod:`distbench.scenario`); every key is optional and falls back to the default below
(digits, a small MLP, every strategy available here, 2 workers; the embedded default
experiment, :func:`embedded_default`, trains a larger MLP for longer). Unknown sections or
keys and values of the wrong type or out of range raise :class:`ConfigError`, whose message
names the key, the value received and what is allowed; the CLI turns it into exit status 2
with that one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distbench.contracts import ConfigError
from distbench.cluster.spec import check_cluster, total_slots
from distbench.scenario import ScenarioConfig, build_scenario, check_scenario
from distbench.values import build


DATASETS = ("digits", "breast_cancer", "mnist", "fashion_mnist", "synthetic", "npz", "parquet")
MODELS = ("mlp", "cnn")
# model.name -> keras.applications constructor (built with weights=None, logits output).
APPLICATIONS = {
    "convnext_tiny": "ConvNeXtTiny", "convnext_small": "ConvNeXtSmall", "convnext_base": "ConvNeXtBase",
    "convnext_large": "ConvNeXtLarge", "convnext_xlarge": "ConvNeXtXLarge",
    "densenet121": "DenseNet121", "densenet169": "DenseNet169", "densenet201": "DenseNet201",
    **{f"efficientnet_b{i}": f"EfficientNetB{i}" for i in range(8)},
    **{f"efficientnet_v2_{k.lower()}": f"EfficientNetV2{k}" for k in ("B0", "B1", "B2", "B3", "S", "M", "L")},
    "inception_resnet_v2": "InceptionResNetV2", "inception_v3": "InceptionV3",
    "mobilenet": "MobileNet", "mobilenet_v2": "MobileNetV2",
    "mobilenet_v3_small": "MobileNetV3Small", "mobilenet_v3_large": "MobileNetV3Large",
    "nasnet_mobile": "NASNetMobile", "nasnet_large": "NASNetLarge",
    "resnet50": "ResNet50", "resnet101": "ResNet101", "resnet152": "ResNet152",
    "resnet50_v2": "ResNet50V2", "resnet101_v2": "ResNet101V2", "resnet152_v2": "ResNet152V2",
    "vgg16": "VGG16", "vgg19": "VGG19", "xception": "Xception",
}
FACTORY_FORM = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "selu", "gelu", "silu", "swish", "softplus", "leaky_relu",
               "relu6", "linear")
OPTIMIZERS = ("sgd", "adam", "rmsprop")
LR_SCALING = ("none", "linear")


@dataclass
class DataConfig:
    """Dataset selection and split.

    Attributes:
        name: one of ``digits`` (scikit-learn's bundled 8x8 digits, no download),
            ``breast_cancer`` (scikit-learn's bundled Wisconsin breast-cancer table, 30
            features, 2 classes, no download), ``mnist``/``fashion_mnist`` (local Keras
            ``.npz`` or IDX files at ``path``), ``synthetic`` (random images/labels of
            ``image_shape``, for throughput), ``npz`` (your arrays ``x``, ``y`` and
            optionally ``x_test``, ``y_test`` in one ``.npz``), ``parquet`` (your Parquet
            files, read block by block).
        path: file or directory for mnist/fashion_mnist; the ``.npz`` file for npz; a
            Parquet file, directory or glob (local or any filesystem URI pyarrow reads) for parquet.
        test_path: parquet: the test split's file, directory or glob ("" = hold out
            whole row groups of ``path``).
        features_col: parquet: the feature column (a list or fixed-size-list column), or
            a list of numeric columns, one feature each.
        label_col: parquet: the label column (class indices, or one-hot lists).
        feature_shape: reshape each flat feature vector to this shape (npz, parquet);
            [] = as stored.
        validation_fraction, test_fraction: stratified, seeded split fractions.
        samples: number of synthetic samples.
        image_shape: synthetic image shape (H, W, C).
        classes: number of classes; 0 = inferred (max label + 1, or the one-hot width;
            synthetic: 10).
    """

    name: str = "digits"
    path: str = ""
    test_path: str = ""
    features_col: str | list[str] = ""
    label_col: str = ""
    feature_shape: list[int] = field(default_factory=list)
    validation_fraction: float = 0.1
    test_fraction: float = 0.2
    samples: int = 4096
    image_shape: list[int] = field(default_factory=lambda: [32, 32, 3])
    classes: int = 0


@dataclass
class ModelConfig:
    """Model spec (see :mod:`distbench.models`): one of three sources.

    Attributes:
        name: ``mlp`` (Dense layers), ``cnn`` (Conv2D blocks + Dense), or a
            keras.applications model (:data:`APPLICATIONS`: ``resnet50``, ``mobilenet_v2``...,
            built with ``weights=None`` and a logits output).
        hidden: Dense layer widths (units) for ``mlp``; also the head of ``cnn``.
        filters: Conv2D filter counts for ``cnn`` (one 3x3 conv + 2x2 max-pool each).
        activation: hidden activation (a Keras activation name).
        dropout: dropout rate after each hidden Dense layer, in [0, 1).
        factory: ``"package.module:function"``: the user's function
            ``(input_shape, num_classes) -> keras.Model`` (uncompiled); replaces ``name``.
        path: a saved Keras 3 model (``.keras``) whose architecture and weights are the
            initial ones; replaces ``name``. Made absolute when the config is validated.
        reinit: with ``path``: re-run the architecture's initializers with the run's seed
            instead of using the file's weights.
    """

    name: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [64])
    filters: list[int] = field(default_factory=lambda: [16, 32])
    activation: str = "relu"
    dropout: float = 0.0
    factory: str = ""
    path: str = ""
    reinit: bool = False


@dataclass
class TrainingConfig:
    """What every strategy trains with (the fairness contract, docs/architecture.md).

    Attributes:
        epochs: passes over the training split.
        global_batch_size: samples per optimizer step summed over replicas; the
            per-replica batch is ``global_batch_size // workers``.
        optimizer: local Keras optimizer: ``sgd``, ``adam`` or ``rmsprop``.
        learning_rate: base learning rate.
        momentum: SGD momentum.
        lr_scaling: ``none`` or ``linear`` (lr x replicas, Goyal et al. 2017); recorded.
        target_accuracy: test accuracy for time-to-accuracy, in (0, 1].
        seed: seed for the split, the initial weights and the shuffling.
        threads: intra-op CPU threads per process; 0 = cores // processes.
    """

    epochs: int = 10
    global_batch_size: int = 64
    optimizer: str = "sgd"
    learning_rate: float = 0.3
    momentum: float = 0.0
    lr_scaling: str = "none"
    target_accuracy: float = 0.9
    seed: int = 42
    threads: int = 0


@dataclass
class RunConfig:
    """The sweep: which strategies, worker counts, repeats, and limits.

    Attributes:
        strategies: registered strategy names, or ``["all"]`` for every one.
        workers: worker (replica) counts to sweep, each >= 1.
        repeats: repetitions of each configuration, or ``"auto"`` (:data:`AUTO_REPEATS`):
            every configuration runs once, then only the leader and the runner-up that
            the recommendation cannot separate yet run again, one more run each per round,
            up to :data:`distbench.results.advice.MIN_REPEATS` runs each
            (:func:`distbench.results.advice.more_runs`). The embedded default
            (:func:`embedded_default`) uses ``"auto"``; a config file without the key 1.
        timeout_s: wall-clock limit per configuration, seconds.
        out: run directory ("" = ``runs/<timestamp>``).
        device: ``auto`` (GPUs where TensorFlow can use them; every configuration is
            ``unavailable`` on a machine whose GPUs it cannot use), ``cpu`` (the CPU, GPUs
            hidden) or ``gpu`` (refused without one): :mod:`distbench.gpu`.
    """

    strategies: list[str] = field(default_factory=lambda: ["all"])
    workers: list[int] = field(default_factory=lambda: [2])
    repeats: int | Literal["auto"] = 1
    timeout_s: float = 900.0
    out: str = ""
    device: Literal["auto", "cpu", "gpu"] = "auto"

    @property
    def auto_repeats(self) -> bool:
        """``repeats = "auto"``: the sweep decides the repeats as it goes."""
        return self.repeats == AUTO_REPEATS

    @property
    def first_repeats(self) -> int:
        """Runs of every configuration before any adaptive round: 1 under ``"auto"``."""
        return 1 if self.repeats == AUTO_REPEATS else int(self.repeats)


AUTO_REPEATS = "auto"
"""``run.repeats`` (and ``--repeats``) for adaptive repeats (:class:`RunConfig`)."""


@dataclass
class PSConfig:
    """Parameter-server optimizer settings (ps_async). 0 / "" = the optimizer's default.

    Attributes:
        communication_window: local mini-batches between commits (0 = default).
        rho: elastic force for AEASGD/EAMSGD/EASGD (Zhang et al. 2015).
        learning_rate: eta in alpha = eta * rho for the elastic optimizers.
        momentum: EAMSGD Nesterov momentum.
        windows: communication windows to sweep (one configuration each); empty = none.
        host: address the server binds (reachable by executors).
        port: server port, 0 = any free port.
    """

    communication_window: int = 0
    rho: float = 5.0
    learning_rate: float = 0.1
    momentum: float = 0.9
    windows: list[int] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0


@dataclass
class TFConfig:
    """Settings of TensorFlow's multi-process strategies.

    Attributes:
        collective: MultiWorkerMirroredStrategy's all-reduce: ``ring`` | ``nccl`` | ``auto``.
        ps_tasks: parameter-server tasks of ``tf_ps``.
    """

    collective: str = "ring"
    ps_tasks: int = 1


@dataclass
class SparkConfig:
    """Spark session settings.

    Attributes:
        master: Spark master URL ("" = ``local[N]`` with N = workers): ``local``,
            ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[W,C,MB]``,
            ``spark://host:port[,host:port]``, ``yarn`` or ``k8s://https://host:port``
            (checked by :func:`distbench.ps_async.spark_spec.check_spark_config`).
        conf: extra Spark properties, e.g. ``{"spark.executor.memory" = "2g"}``; those
            that set the barrier slots or fail deep in the JVM are checked too.
        share_session: ``distbench run`` runs the sweep's ``spark_ps`` configurations in
            one Spark application (one engine process per master and thread count,
            :mod:`distbench.harness.spark_engine`); false = a new Spark application per
            configuration.
    """

    master: str = ""
    conf: dict[str, str] = field(default_factory=dict)
    share_session: bool = True


@dataclass
class MPIConfig:
    """Settings of the ``mpi_ps`` strategies' MPI launch.

    Attributes:
        share_engine: ``distbench run`` runs the sweep's ``mpi_ps`` configurations on one
            ``mpirun`` job whose ranks stay up between them (one per rank count and thread
            count, :mod:`distbench.harness.mpi_engine`); false = a new ``mpirun`` per
            configuration. Only on this machine (not under ``[cluster]``).
    """

    share_engine: bool = True


@dataclass
class EmulateConfig:
    """An emulated cluster on this machine (``[cluster] emulate = {...}``): one Linux
    network namespace per host, joined by a bridge, each link rate-limited
    (:mod:`distbench.cluster.emulated`; needs root).

    Attributes:
        hosts: emulated hosts (network namespaces), >= 1.
        slots: processes per host, >= 1.
        bandwidth: each host's link rate in tc units (``"100mbit"``, ``"1gbit"``,
            ``"500kbit"``, ``"64000bit"``) or ``"unlimited"``; a list sweeps the rates.
        subnet: private IPv4 network of the emulated hosts (the bridge takes the first
            address, host k the (k+2)-th); must not overlap a route or address of this machine.
        launcher: how processes start on the hosts: ``agent`` (``ip netns exec`` behind
            ssh's calling convention) or ``ssh`` (a real ``sshd`` per host, reached as
            real hosts are: keys made for the cluster and removed with it).
    """

    hosts: int = 2
    slots: int = 1
    bandwidth: str | list[str] = "unlimited"
    subnet: str = "10.231.0.0/24"
    launcher: str = "agent"


@dataclass
class ClusterConfig:
    """Where the workers run: this machine (the default), real hosts over ssh, or an
    emulated cluster (checked by :func:`distbench.cluster.spec.check_cluster`).

    Attributes:
        hosts: real hosts as ``"host:slots"``, e.g. ``["node1:2", "node2:2"]``; empty =
            this machine only.
        launcher: how processes start on the hosts: ``ssh`` (the only one for real hosts).
        ssh_port: the hosts' ssh port.
        python: the interpreter on the hosts ("" = this one, ``sys.executable``).
        workdir: the working directory on the hosts ("" = the current directory).
        emulate: an emulated cluster instead of ``hosts`` (:class:`EmulateConfig`);
            ``None`` = none.
    """

    hosts: list[str] = field(default_factory=list)
    launcher: str = "ssh"
    ssh_port: int = 22
    python: str = ""
    workdir: str = ""
    emulate: EmulateConfig | None = None

    def total_slots(self) -> int:
        """Processes the cluster holds: the sum of the hosts' slots, or emulated hosts x
        slots; 0 when no cluster is configured (this machine only)."""

        return total_slots(self)


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


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key} = {value!r}: expected one of {', '.join(allowed)}")


def _positive(key: str, value: float, minimum: float = 1) -> None:
    if value < minimum:
        raise ConfigError(f"{key} = {value!r}: must be >= {minimum}")


def validate(cfg: ExperimentConfig) -> ExperimentConfig:
    """Check values and cross-field constraints; return ``cfg`` (``data.path`` and
    ``model.path`` made absolute). Each section is checked by its own function here, and
    ``[spark]``, ``[scenario]`` and ``[cluster]`` by the modules that own those rules.

    Raises:
        ConfigError: naming the key, the value and what is allowed.
    """
    _check_data(cfg.data)
    _check_model(cfg.model)
    _check_training_and_run(cfg.training, cfg.run)
    _check_ps_and_tf(cfg)
    from distbench.ps_async.spark_spec import check_spark_config  # here: its package imports NumPy

    check_spark_config(cfg.spark.master, cfg.spark.conf)
    check_scenario(cfg)
    check_cluster(cfg.cluster, cfg.run.workers)
    return cfg


def _check_data(d: DataConfig) -> None:
    """``[data]``: the dataset name, its files (made absolute), columns, fractions and shapes."""
    _choice("data.name", d.name, DATASETS)
    if d.name in ("mnist", "fashion_mnist", "npz"):
        if not d.path:
            what = ("an .npz file with arrays x and y (optionally x_test, y_test)" if d.name == "npz" else
                    "a Keras-format .npz (x_train, y_train, x_test, y_test) or a directory of IDX files")
            raise ConfigError(f"data.path is empty but data.name = {d.name!r} needs a local file: "
                              f"set data.path to {what}")
        if not Path(d.path).expanduser().exists():
            raise ConfigError(f"data.path = {d.path!r}: no such file or directory (relative paths are read from "
                              f"the directory distbench runs in, {os.getcwd()})")
        d.path = str(Path(d.path).expanduser().resolve())  # recorded absolute: --resume works from anywhere
    if d.name == "parquet":
        for key in ("path", "test_path"):  # local paths and globs recorded absolute; URIs (hdfs://, s3://) as given
            value = getattr(d, key)
            if value and "://" not in value:
                setattr(d, key, os.path.abspath(os.path.expanduser(value)))
        if not d.path:
            raise ConfigError("data.path is empty but data.name = 'parquet' needs the training data: set "
                              "data.path to a Parquet file, a directory of them or a glob (e.g. 'data/*.parquet')")
        missing = [k for k in ("features_col", "label_col") if not getattr(d, k)]
        if missing:
            raise ConfigError(f"data.name = 'parquet' needs {' and '.join('data.' + k for k in missing)}: name the "
                              "feature column (or a list of numeric columns) and the label column, "
                              'e.g. features_col = "features", label_col = "label"')
        cols = d.features_col if isinstance(d.features_col, list) else [d.features_col]
        if not all(cols) or len(set(cols)) < len(cols):
            raise ConfigError(f"data.features_col = {d.features_col!r}: expected distinct, non-empty column names")
        if d.label_col in cols:
            raise ConfigError(f"data.label_col = {d.label_col!r} is also in data.features_col = {d.features_col!r}: "
                              "the model would read the label as a feature (test accuracy 1.0 by construction); "
                              "name feature columns other than the label column")
    elif d.test_path or d.features_col or d.label_col:
        given = [k for k in ("test_path", "features_col", "label_col") if getattr(d, k)]
        raise ConfigError(f"data.{given[0]} is set but data.name = {d.name!r} does not read it: "
                          "it applies to data.name = 'parquet' only; remove it or set the name")
    if d.feature_shape:
        if d.name not in ("npz", "parquet") or any(s < 1 for s in d.feature_shape):
            raise ConfigError(f"data.feature_shape = {d.feature_shape!r}: expected sizes >= 1, for data.name = "
                              f"'npz' or 'parquet' only (got {d.name!r})")
    for key, frac in (("data.validation_fraction", d.validation_fraction),
                      ("data.test_fraction", d.test_fraction)):
        if not 0.0 < frac < 0.5:
            raise ConfigError(f"{key} = {frac!r}: must be in (0, 0.5)")
    _positive("data.samples", d.samples, 10)
    if len(d.image_shape) not in (2, 3) or any(s < 1 for s in d.image_shape):
        raise ConfigError(f"data.image_shape = {d.image_shape!r}: expected [H, W] or [H, W, C], all >= 1")
    if d.classes != 0:
        _positive("data.classes", d.classes, 2)  # 0 = inferred


def _check_model(m: ModelConfig) -> None:
    """``[model]``: its source, widths, filters, activation and dropout."""
    _check_model_source(m)
    if not m.hidden or any(h < 1 for h in m.hidden):
        raise ConfigError(f"model.hidden = {m.hidden!r}: expected a non-empty list of widths >= 1")
    if any(f < 1 for f in m.filters) or (m.name == "cnn" and not m.filters):
        raise ConfigError(f"model.filters = {m.filters!r}: expected a non-empty list of counts >= 1")
    _choice("model.activation", m.activation, ACTIVATIONS)
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout = {m.dropout!r}: must be in [0, 1)")


def _check_training_and_run(t: TrainingConfig, r: RunConfig) -> None:
    """``[training]`` and ``[run]``: epochs, batch, optimizer, rates, target; strategies,
    worker counts (each must divide the global batch), repeats, timeout."""
    _positive("training.epochs", t.epochs)
    _positive("training.global_batch_size", t.global_batch_size)
    _choice("training.optimizer", t.optimizer, OPTIMIZERS)
    _choice("training.lr_scaling", t.lr_scaling, LR_SCALING)
    if not 0 < t.learning_rate < math.inf:
        raise ConfigError(f"training.learning_rate = {t.learning_rate!r}: must be a finite number > 0, e.g. 0.1")
    if not 0.0 <= t.momentum < 1.0:
        raise ConfigError(f"training.momentum = {t.momentum!r}: must be in [0, 1)")
    if not 0.0 < t.target_accuracy <= 1.0:
        raise ConfigError(f"training.target_accuracy = {t.target_accuracy!r}: must be in (0, 1]")
    _positive("training.threads", t.threads, 0)
    if not r.strategies:
        raise ConfigError("run.strategies is empty: list strategy names (see 'distbench list') or 'all'")
    if not r.workers:
        raise ConfigError("run.workers is empty: give at least one worker count, e.g. [2]")
    for n in r.workers:
        _positive("run.workers", n)
        if t.global_batch_size < n:
            raise ConfigError(
                f"training.global_batch_size = {t.global_batch_size} is smaller than run.workers = {n}: "
                "every replica needs at least one sample per step; raise the batch or lower the workers"
            )
        if t.global_batch_size % n:
            lcm = math.lcm(*r.workers)
            fits = lcm * max(1, round(t.global_batch_size / lcm))
            raise ConfigError(
                f"training.global_batch_size = {t.global_batch_size} is not divisible by run.workers = {n}: "
                "every replica must get the same per-replica batch; pick a multiple of every worker count "
                f"({', '.join(map(str, r.workers))}: a multiple of {lcm}, e.g. --batch-size {fits} or "
                f"global_batch_size = {fits} under [training])"
            )
    if r.repeats != AUTO_REPEATS:
        _positive("run.repeats", r.repeats)
    if not 0 < r.timeout_s < math.inf:
        raise ConfigError(f"run.timeout_s = {r.timeout_s!r}: must be a finite number of seconds > 0")


def _check_ps_and_tf(cfg: ExperimentConfig) -> None:
    """``[ps]`` and ``[tf]``: windows, the elastic moving rate, port; collective, ps tasks."""
    _positive("ps.communication_window", cfg.ps.communication_window, 0)
    for i, w in enumerate(cfg.ps.windows):
        _positive(f"ps.windows[{i}]", w)
    if not 0 < cfg.ps.rho < math.inf:
        raise ConfigError(f"ps.rho = {cfg.ps.rho!r}: must be a finite number > 0")
    if not 0 < cfg.ps.learning_rate < math.inf:
        raise ConfigError(f"ps.learning_rate = {cfg.ps.learning_rate!r}: must be a finite number > 0")
    alpha = cfg.ps.learning_rate * cfg.ps.rho
    if alpha >= 1:  # each exchange moves a replica and the centre alpha of the way to each other
        raise ConfigError(f"ps.learning_rate x ps.rho = {cfg.ps.learning_rate:g} x {cfg.ps.rho:g} = {alpha:g}: the "
                          "elastic optimizers' moving rate alpha must be < 1 (each exchange moves the replica and "
                          "the centre alpha of the way towards each other; 1 or more overshoots, Zhang, "
                          "Choromanska, LeCun 2015); lower ps.learning_rate or ps.rho, e.g. 0.1 x 5 = 0.5")
    _choice("tf.collective", cfg.tf.collective, ("ring", "nccl", "auto"))
    _positive("tf.ps_tasks", cfg.tf.ps_tasks)
    if not 0 <= cfg.ps.port <= 65535:
        raise ConfigError(f"ps.port = {cfg.ps.port!r}: must be in 0..65535 (0 = any free port)")


def _check_model_source(m: ModelConfig) -> None:
    """Check ``[model]``'s source keys (``name`` | ``factory`` | ``path``); make ``path`` absolute.

    Raises:
        ConfigError: unknown name, two sources, a factory not of the form
            ``module:function``, a path that is not an existing ``.keras`` file, or
            ``reinit`` without ``path``.
    """
    if m.name not in MODELS and m.name not in APPLICATIONS:
        raise ConfigError(f"model.name = {m.name!r}: expected mlp, cnn or a keras.applications model: "
                          + ", ".join(APPLICATIONS) + " (or set model.factory / model.path for your own model)")
    if m.factory and m.path:
        raise ConfigError(f"model.factory = {m.factory!r} and model.path = {m.path!r} are both set: "
                          "choose one source for the model")
    if (m.factory or m.path) and m.name != "mlp":
        key = "factory" if m.factory else "path"
        raise ConfigError(f"model.name = {m.name!r} and model.{key} are both set: remove model.name "
                          f"(model.{key} replaces it)")
    if m.factory and not FACTORY_FORM.fullmatch(m.factory):
        raise ConfigError(f"model.factory = {m.factory!r}: expected 'package.module:function', "
                          "e.g. \"examples.my_model:build\"")
    if m.reinit and not m.path:
        raise ConfigError("model.reinit = true needs model.path (a saved .keras model to re-initialise)")
    if m.path:
        p = Path(m.path).expanduser()
        if p.suffix != ".keras":
            raise ConfigError(f"model.path = {m.path!r}: expected a Keras 3 '.keras' file "
                              "(save one with model.save(\"model.keras\"))")
        if not p.is_file():
            raise ConfigError(f"model.path = {m.path!r}: no such file")
        m.path = str(p.resolve())


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
        return from_dict(raw)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {e}") from None
    return from_dict(raw)


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

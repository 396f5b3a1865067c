"""The Workload: what is identical for every configuration of a run (fairness contract).

Dataset and split, model spec, one saved set of initial weights, loss, local optimizer,
metrics, seed, epochs and global batch size. It is created once per run
(:meth:`Workload.create`), saved under ``<run_dir>/workload/``, and loaded by every
configuration (:meth:`Workload.load`), which checks the dataset fingerprint and the
initial-weights SHA-256 so no strategy can start from different data or weights.

While a sweep runs, an in-memory dataset's splits are also kept in
``<run_dir>/workload/dataset-cache.npz`` (:meth:`Workload.write_dataset_cache`), so the
configurations' processes read the split arrays instead of loading and splitting the
source again (digits: importing scikit-learn and splitting took ~1.4 s per process on 2
cores); what they read must match the recorded fingerprint, else they load the source.
The sweep's own process always loads the source, so a resumed run still detects a
changed data file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from distbench import config as config_mod
from distbench.config import ConfigError, ExperimentConfig, TrainingConfig
from distbench.config.engines import ELASTIC, PSConfig
from distbench.data import Dataset, fingerprint, load_dataset
from distbench.data.base import DataError
from distbench.models.output import LossSpec, check_labels
from distbench.text import join_and, window_fix

_LOG = logging.getLogger("distbench.workload")
WORKLOAD_DIR = "workload"
WEIGHTS_FILE = "initial_weights.npz"
META_FILE = "workload.json"
CONFIG_FILE = "config.json"
DATASET_CACHE = "dataset-cache.npz"
DATASET_CACHE_MAX_BYTES = 1 << 30
"""Larger in-memory datasets are not copied into the run directory (the processes load the source)."""
_SPLIT_ARRAYS = ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test")


def read_recorded(run_dir: str | Path) -> dict[str, Any]:
    """``RUN_DIR/config.json`` as a dict, its inputs' paths pointed at this run directory's
    ``inputs/`` where it was copied or moved (:func:`distbench.config.relocated_inputs`).

    Raises:
        OSError: no readable ``config.json``; ValueError: it is not JSON.
    """
    return config_mod.relocated_inputs(json.loads((Path(run_dir) / CONFIG_FILE).read_text()), run_dir)


def _labels_text(labels: np.ndarray) -> str:
    shown = ", ".join(str(int(v)) for v in labels[:10])
    return "{" + shown + (f", ... ({len(labels)} in all)" if len(labels) > 10 else "") + "}"


def check_label_coverage(ds: Dataset, configured_classes: int) -> None:
    """Refuse a test split none of whose labels occurs in training; warn when some test
    labels, or some of the classes inferred from the largest label, never occur.

    Args:
        ds: the loaded dataset (its :meth:`~distbench.data.Dataset.label_counts`).
        configured_classes: ``data.classes`` (0: inferred from the labels).

    Raises:
        DataError: the test labels and the training labels are disjoint (every test
            prediction would be wrong: e.g. a ``y_test`` numbered in another scheme).
    """
    counts = ds.label_counts()
    train, test = np.flatnonzero(counts["train"]), np.flatnonzero(counts["test"])
    unseen = np.setdiff1d(test, train)
    if len(test) and len(unseen) == len(test):
        raise DataError(f"dataset {ds.name!r}: the test split's labels {_labels_text(test)} never occur in the "
                        f"training split (labels {_labels_text(train)}): no model can predict them, so test "
                        "accuracy would be 0; the test labels must use the training labels' class indices "
                        "(check y_test, or data.test_path)")
    if len(unseen):
        n = int(counts["test"][unseen].sum())
        _LOG.warning("dataset %r: %d of %d test samples have labels %s that never occur in the training split; "
                     "no model can predict them, so test accuracy is at most %.3f", ds.name, n,
                     int(counts["test"].sum()), _labels_text(unseen), 1 - n / counts["test"].sum())
    present = np.flatnonzero(counts["train"] + counts["val"] + counts["test"])
    if not configured_classes and len(present) < ds.num_classes:
        _LOG.warning("dataset %r: %d classes inferred from the largest label (%d), but only %d occur %s: the model "
                     "gets %d outputs and chance accuracy is taken over %d classes; if the labels should be "
                     "0..%d, renumber them; if some classes are absent on purpose, set data.classes = %d",
                     ds.name, ds.num_classes, ds.num_classes - 1, len(present), _labels_text(present),
                     ds.num_classes, ds.num_classes, len(present) - 1, ds.num_classes)


def _absent_classes(ds: Dataset, configured_classes: int) -> str:
    """For a model that does not fit the data's classes: the labels' numbering where fewer
    labels occur than the classes inferred from the largest (user test, helper-35: labels
    5..7 and a model of 3 outputs were told only to change the model), else ''."""
    counts = ds.label_counts()
    present = np.flatnonzero(counts["train"] + counts["val"] + counts["test"])
    if configured_classes or len(present) >= ds.num_classes:
        return ""
    return (f"; only {len(present)} labels occur, {_labels_text(present)}, and {ds.num_classes} classes are inferred "
            f"from the largest: if the model's outputs are these classes, renumber the labels 0..{len(present) - 1}")


def weights_sha256(weights: list[np.ndarray]) -> str:
    """SHA-256 (hex) over each array's dtype, shape and raw bytes, in order."""
    h = hashlib.sha256()
    for w in weights:
        a = np.ascontiguousarray(w)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_weights(path: Path, weights: list[np.ndarray]) -> None:
    """Save a list of arrays to ``path`` (.npz, keys ``w0, w1, ...``), no pickle."""
    np.savez(path, **{f"w{i}": w for i, w in enumerate(weights)})


def load_weights(path: Path) -> list[np.ndarray]:
    """Load arrays saved by :func:`save_weights`, in order."""
    with np.load(path, allow_pickle=False) as z:
        return [z[f"w{i}"] for i in range(len(z.files))]


def checked_dataset(cfg: ExperimentConfig) -> Dataset:
    """Load the dataset of ``cfg`` and check it against the run's settings; needs no
    TensorFlow (so ``distbench run`` reports bad data before importing it).

    Args:
        cfg: the run's validated config (its ``data`` and ``training`` sections).

    Returns:
        the split dataset. Logs a warning for data that train but can mislead (test
        labels unseen in training, unused inferred classes, an uneven last batch, large
        feature values).

    Raises:
        DataError: the dataset cannot be loaded, or holds an invalid value (every value of
            a block-read source is checked here, once).
        ConfigError: the training split is smaller than one global batch; the labels are
            not int class indices.
    """
    ds = load_dataset(cfg.data, cfg.training.seed)
    check_batch(cfg, ds)
    ds.validate()  # block-read sources: every value checked once, before any configuration starts
    check_label_coverage(ds, cfg.data.classes)
    warn_uneven_batch(cfg, ds)
    warn_windows(cfg, ds)
    warn_elastic_settings(cfg)
    check_feature_scale(ds)
    if ds.in_memory:
        check_labels(ds.y_train, f"dataset {cfg.data.name!r}")
    return ds


@dataclass
class Workload:
    """Everything a strategy needs to train the common model.

    Attributes:
        config: the run's validated experiment config.
        dataset: the split dataset (identical in every process: checked by fingerprint).
        initial_weights: the saved initial weights (list of float32 arrays).
        initial_weights_sha256: SHA-256 of ``initial_weights`` (see :func:`weights_sha256`).
        data_sha256: dataset fingerprint.
        run_dir: the run directory.
        loss: the loss read from the model when the workload was created (saved in
            ``workload.json``); ``None`` until known (then :meth:`build_model` reads it
            from the model it builds).
        non_trainable: positions, in ``initial_weights`` (``model.get_weights()`` order),
            of the non-trainable weights (BatchNormalization's moving statistics), which
            follow their own rule (docs/architecture.md, "Non-trainable state"); ``None``
            until known (then :meth:`non_trainable_indices` reads them from a built model).
    """

    config: ExperimentConfig
    dataset: Dataset
    initial_weights: list[np.ndarray]
    initial_weights_sha256: str
    data_sha256: str
    run_dir: Path
    loss: LossSpec | None = None
    non_trainable: list[int] | None = None

    # ----------------------------------------------------------- construction
    @classmethod
    def create(cls, cfg: ExperimentConfig, run_dir: str | Path, dataset: Dataset | None = None) -> "Workload":
        """Build the dataset and initial weights from ``cfg`` and save them in ``run_dir``.

        The initial weights come from Keras initializers seeded with
        ``cfg.training.seed`` (or from the saved model of ``model.path``). Writes
        ``config.json``, ``workload/workload.json`` and ``workload/initial_weights.npz``.

        The model is built from ``cfg.model`` (any source), checked against the data
        (:func:`distbench.models.check_model`) and its loss read from its output.

        Args:
            cfg: the run's validated config.
            run_dir: the run directory (must exist).
            dataset: :func:`checked_dataset` of ``cfg`` when the caller has it already
                (``distbench run`` checks the data before importing TensorFlow); else
                loaded and checked here.

        Raises:
            DataError: the dataset cannot be loaded, or holds an invalid value.
            ConfigError: the training split is smaller than one global batch; the labels
                are not int class indices; the model cannot be built or does not fit the
                data (wrong input or output shape, not a classifier).
        """
        ds = dataset if dataset is not None else checked_dataset(cfg)
        import keras

        from distbench.models import build_model, check_model, model_source, num_parameters

        run_dir = Path(run_dir)
        keras.utils.set_random_seed(cfg.training.seed)
        model = build_model(cfg.model, ds.input_shape, ds.num_classes)
        weights = [np.asarray(w, dtype=np.float32) for w in model.get_weights()]
        try:
            loss = check_model(model, cfg.model, ds.input_shape, ds.num_classes)
        except ConfigError as e:
            raise ConfigError(f"{e}{_absent_classes(ds, cfg.data.classes)}") from None
        wdir = run_dir / WORKLOAD_DIR
        wdir.mkdir(parents=True, exist_ok=True)
        save_weights(wdir / WEIGHTS_FILE, weights)
        meta = {
            "data_sha256": fingerprint(ds),
            "initial_weights_sha256": weights_sha256(weights),
            "input_shape": list(ds.input_shape),
            "num_classes": ds.num_classes,
            "sizes": ds.sizes(),
            "data": ds.details,
            "model": model_source(cfg.model),
            "loss": loss.to_dict(),
            "non_trainable": non_trainable_positions(model),
            "num_parameters": num_parameters(weights),
            "weight_shapes": [list(w.shape) for w in weights],
        }
        (wdir / META_FILE).write_text(json.dumps(meta, indent=2))
        (run_dir / CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
        return cls(cfg, ds, weights, meta["initial_weights_sha256"], meta["data_sha256"], run_dir, loss,
                   meta["non_trainable"])

    @classmethod
    def load(cls, run_dir: str | Path, cached: bool = False) -> "Workload":
        """Load the workload saved in ``run_dir`` and verify data and weights hashes.

        Args:
            run_dir: the run directory.
            cached: read the dataset from the sweep's cache when it is there and matches the
                recorded fingerprint (:func:`cached_dataset`; a configuration's process);
                False loads the source (the sweep's process, so a changed file is detected).

        Raises:
            ConfigError: ``run_dir`` holds no workload, or its data/weights no longer
                match the recorded hashes (e.g. the data file changed since the run began).
        """
        run_dir = Path(run_dir)
        wdir = run_dir / WORKLOAD_DIR
        try:
            raw = read_recorded(run_dir)
            meta = json.loads((wdir / META_FILE).read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"{run_dir} holds no readable workload ({e}); start a new run "
                              "with 'distbench run --out DIR'") from None
        cfg = config_mod.from_dict(raw)
        ds = cached_dataset(run_dir, cfg.data.name, meta) if cached else None
        if ds is None:
            ds = load_dataset(cfg.data, cfg.training.seed)
        if fingerprint(ds) != meta["data_sha256"]:
            raise ConfigError(f"dataset {cfg.data.name!r} differs from the one recorded in {wdir} "
                              "(fingerprint mismatch): the data file changed; start a new run directory")
        weights = load_weights(wdir / WEIGHTS_FILE)
        sha = weights_sha256(weights)
        if sha != meta["initial_weights_sha256"]:
            raise ConfigError(f"{wdir / WEIGHTS_FILE} does not match its recorded SHA-256; "
                              "the file was modified: start a new run directory")
        return cls(cfg, ds, weights, sha, meta["data_sha256"], run_dir, LossSpec.from_dict(meta.get("loss")),
                   meta.get("non_trainable"))

    def write_dataset_cache(self) -> Path | None:
        """Save the in-memory splits to ``run_dir/workload/dataset-cache.npz`` for the
        sweep's processes (:meth:`load` with ``cached=True``); the sweep removes it at its
        end (:func:`remove_dataset_cache`).

        Returns:
            The file's path, or None where nothing is cached: a block-read (Parquet)
            dataset, or splits over :data:`DATASET_CACHE_MAX_BYTES` (1 GiB).

        Raises:
            OSError: the run directory is not writable.
        """
        ds = self.dataset
        if not ds.in_memory:
            return None
        arrays = {k: getattr(ds, k) for k in _SPLIT_ARRAYS}
        if sum(a.nbytes for a in arrays.values()) > DATASET_CACHE_MAX_BYTES:
            return None
        path = self.run_dir / WORKLOAD_DIR / DATASET_CACHE
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
        return path

    # ------------------------------------------------------------- training
    def learning_rate(self, replicas: int) -> float:
        """The local learning rate for ``replicas`` replicas (``lr_scaling`` applied)."""
        return learning_rate(self.config.training, replicas)

    def non_trainable_indices(self) -> list[int]:
        """Positions of the non-trainable weights in ``initial_weights`` (see the attribute)."""
        if self.non_trainable is None:
            self.non_trainable = non_trainable_positions(self.build_model())
        return list(self.non_trainable)

    def build_model(self, replica: int = 0) -> Any:
        """Build the Keras model and load the initial weights into it.

        Keras' random generators are seeded with ``training.seed + replica`` first, so the
        random layers (Dropout) draw the same masks in every run of a configuration, and
        different ones on different replicas of one run. A workload whose loss is not
        known yet (a Horovod rank that received the workload from rank 0) reads it from
        the model built here.

        Args:
            replica: the replica (rank, worker) that will train this model.

        Raises:
            ValueError: the model built here does not fit the saved initial weights (a
                factory that builds another architecture in another process), naming the rule.
        """
        import keras

        from distbench.models import build_model, check_model

        keras.utils.set_random_seed(self.config.training.seed + replica)
        ds = self.dataset
        model = build_model(self.config.model, ds.input_shape, ds.num_classes)
        try:
            model.set_weights(self.initial_weights)
        except ValueError as e:  # a factory whose architecture depends on the process or a random draw
            shapes = [tuple(w.shape) for w in self.initial_weights]
            rule = (f"{self.config.model.path} no longer holds the model this run started from (the file was "
                    "replaced since: restore it, or start a new run directory)" if self.config.model.path else
                    "the model must have the same architecture every time it is built (a factory must not depend "
                    "on randomness, the process or the host; README, 'Your own model')")  # helper-31: a path too
            raise ValueError(f"the model built in this process does not match the run's initial weights ({e}; saved "
                             f"shapes {shapes[:6]}{'...' if len(shapes) > 6 else ''}): {rule}") from None
        if self.loss is None:
            self.loss = check_model(model, self.config.model, ds.input_shape, ds.num_classes)
        return model

    def make_optimizer(self, replicas: int = 1) -> Any:
        """Build the local Keras optimizer named in the config (see :func:`make_optimizer`)."""
        return make_optimizer(self.config.training, replicas)

    def loss_spec(self) -> LossSpec:
        """The workload's loss (read from the model by building it if not known yet)."""
        if self.loss is None:
            self.build_model()
        assert self.loss is not None  # set by build_model
        return self.loss

    def loss_fn(self) -> Any:
        """Per-sample loss (reduction none) of the workload: the sparse categorical or
        binary cross-entropy, on logits or probabilities as the model outputs them
        (:class:`~distbench.models.output.LossSpec`)."""
        return self.loss_spec().make(reduction=None)

    def steps_per_epoch(self) -> int:
        """Optimizer steps per epoch: ``n_train // global_batch_size`` (same for every strategy)."""
        return len(self.dataset.train) // self.config.training.global_batch_size

    def describe(self) -> dict[str, Any]:
        """Workload facts for records: dataset, sizes, model source, its output (logits or
        probabilities) and loss, parameters, hashes, how the test split was made (Parquet:
        ``test_split``, with rows per class), and the configured learning rate
        (``learning_rate``: ``training.learning_rate`` before any strategy's own rule; the
        record's top-level ``learning_rate`` is the one its strategy trained with)."""
        from distbench.models import model_source, num_parameters

        loss = self.loss_spec()
        return {
            "dataset": self.config.data.name,
            "sizes": self.dataset.sizes(),
            "model": model_source(self.config.model),
            "model_output": loss.output,
            "loss": loss.loss,
            "num_parameters": num_parameters(self.initial_weights),
            "num_classes": self.dataset.num_classes,
            "shuffle": self.dataset.details.get("shuffle", "rows"),
            "data_sha256": self.data_sha256,
            "learning_rate": self.config.training.learning_rate,
            **({"test_split": self.dataset.details["test_split"]} if "test_split" in self.dataset.details else {}),
        }


def non_trainable_positions(model: Any) -> list[int]:
    """Positions of ``model``'s non-trainable variables in ``model.get_weights()`` order."""
    ids = {id(v) for v in model.non_trainable_variables}
    return [i for i, v in enumerate(model.weights) if id(v) in ids]


def learning_rate(t: TrainingConfig, replicas: int) -> float:
    """The local learning rate for ``replicas`` replicas (``t.lr_scaling`` applied)."""
    return t.learning_rate * (replicas if t.lr_scaling == "linear" else 1)


def make_optimizer(t: TrainingConfig, replicas: int = 1) -> Any:
    """Build the local Keras optimizer of training config ``t`` for ``replicas`` replicas."""
    import keras

    lr = learning_rate(t, replicas)
    if t.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=lr, momentum=t.momentum)
    if t.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate=lr)
    return keras.optimizers.RMSprop(learning_rate=lr)


DROPPED_SHARE_WARNING = 0.1
"""Share of the training split left out of every epoch (the last partial global batch) above which a warning says so."""
FEATURE_MAGNITUDE_WARNING = 1e3
"""Largest |feature| of an in-memory training split above which a warning suggests standardising."""


def check_batch(cfg: ExperimentConfig, ds: Dataset) -> None:
    """Raise :class:`ConfigError` if the training split cannot fill one global batch."""
    n, g = len(ds.train), cfg.training.global_batch_size
    if n < g:
        raise ConfigError(
            f"training.global_batch_size = {g} exceeds the "
            f"{n} training samples of {cfg.data.name!r}: lower the batch size"
        )


def warn_windows(cfg: ExperimentConfig, ds: Dataset) -> None:
    """Warn about a window that is not used (``ps.windows`` in a sweep without a parameter
    server, ``ps.communication_window`` next to a ``ps.windows`` sweep) and about one at least as
    long as the steps a replica takes in the whole run: its centre is updated once, at the
    end, and its curve has nothing to compare before that (user test, helper-40: window
    100000 against 13 steps per epoch trained without a word, test accuracy 0.43 against
    single's 0.78)."""
    ps = cfg.ps
    if not any(s == "all" or s.startswith(("spark_ps:", "mpi_ps:")) for s in cfg.run.strategies):
        unused = ([f"ps.windows {list(ps.windows)}"] if ps.windows else []) + (
            [f"ps.communication_window = {ps.communication_window}"] if ps.communication_window else [])
        if unused:  # user test (helper-42, helper-44): the sweep ran without a word
            _LOG.warning("%s %s not used: no parameter-server strategy (spark_ps:..., mpi_ps:...) is in this sweep",
                         join_and(unused), "are" if len(unused) > 1 else "is")
        return
    if ps.windows and ps.communication_window:
        _LOG.warning("ps.communication_window = %d is not used: ps.windows %s sweeps the window; leave one out",
                     ps.communication_window, list(ps.windows))
    steps = len(ds.train) // cfg.training.global_batch_size
    run = steps * cfg.training.epochs
    for w in dict.fromkeys(ps.windows or [ps.communication_window]):
        if w and w >= run:
            _LOG.warning("communication window %d: each parameter-server replica takes %d steps in the whole run "
                         "(%d epoch%s x %d), so the centre is updated once, at the end: %s", w, run,
                         cfg.training.epochs, "" if cfg.training.epochs == 1 else "s", steps,
                         window_fix(run, cfg.training.epochs))


def warn_elastic_settings(cfg: ExperimentConfig) -> None:
    """Warn about ``[ps] rho``, ``learning_rate`` (the elastic optimizers' moving rate) or
    ``momentum`` (EAMSGD's) set away from their defaults in a sweep without an optimizer
    that reads them (user test, helper-43: they were taken without a word since they stopped
    being checked there)."""
    ran = {s.rpartition(":")[2] for s in cfg.run.strategies}
    if "all" in cfg.run.strategies:
        return
    ps, default = cfg.ps, PSConfig()
    for keys, readers, who in ((("rho", "learning_rate"), ELASTIC, "the elastic optimizers (aeasgd, eamsgd or easgd "
                                "of spark_ps: or mpi_ps:) read"), (("momentum",), ("eamsgd",), "eamsgd reads")):
        unused = [f"ps.{k} = {getattr(ps, k):g}" for k in keys if getattr(ps, k) != getattr(default, k)]
        if unused and not ran & set(readers):
            _LOG.warning("%s %s not used: only %s %s, and this sweep has none", join_and(unused),
                         "are" if len(unused) > 1 else "is", who, "them" if len(unused) > 1 else "it")


def warn_uneven_batch(cfg: ExperimentConfig, ds: Dataset) -> None:
    """Warn when the last partial global batch, left out of every epoch, is over
    :data:`DROPPED_SHARE_WARNING` of the training split, suggesting :func:`even_batch`.
    Called once the data are validated: a warning about data about to be rejected misleads."""
    n, g = len(ds.train), cfg.training.global_batch_size
    if n % g > DROPPED_SHARE_WARNING * n:
        _LOG.warning("training.global_batch_size = %d with %d training samples: each epoch takes %d step(s) and "
                     "leaves %d samples (%.0f%%) out (a different %d each epoch: the last partial global batch is "
                     "dropped); choose a batch size that divides the split more evenly, e.g. %d", g, n, n // g,
                     n % g, 100 * (n % g) / n, n % g, even_batch(n, g, cfg.run.workers))


def even_batch(n: int, g: int, workers: Sequence[int]) -> int:
    """A global batch size near ``g`` that leaves at most :data:`DROPPED_SHARE_WARNING` of
    ``n`` training samples out of each epoch and that every worker count of ``workers``
    divides (as the config requires), for the warning of :func:`warn_uneven_batch` to suggest.

    Returns:
        The multiple of ``lcm(workers)`` in ``[g/2, 2g]`` (and at most ``n``) that divides
        ``n``, closest to ``g`` (user test, helper-35: 66 for 432 samples still dropped 36
        where 72 drops none); else the one that drops under the threshold, closest to ``g``;
        else the one that drops least; else ``lcm(workers)``.
    """
    step = math.lcm(*workers) if workers else 1
    cands = [b for b in range(step, min(n, 2 * g) + 1, step) if 2 * b >= g]
    if not cands:
        return step
    limit = DROPPED_SHARE_WARNING * n
    return min(cands, key=lambda b: (n % b > limit, n % b > 0, abs(b - g) if n % b <= limit else n % b))


def check_feature_scale(ds: Dataset) -> None:
    """Warn when an in-memory training split's features reach :data:`FEATURE_MAGNITUDE_WARNING`
    in magnitude: unscaled inputs train poorly (a model may only learn the majority class)."""
    if not ds.in_memory or not ds.x_train.size:
        return
    m = float(np.max(np.abs(ds.x_train)))
    if m > FEATURE_MAGNITUDE_WARNING:
        _LOG.warning("dataset %r: features reach %.3g in magnitude (largest |x| of the training split): neural "
                     "networks train poorly on unscaled inputs (a model may learn only the most frequent class); "
                     "standardise each feature, e.g. (x - mean) / std with the training split's statistics",
                     ds.name, m)


def cached_dataset(run_dir: str | Path, name: str, meta: dict[str, Any] | None = None) -> Dataset | None:
    """The dataset from the sweep's cache (:meth:`Workload.write_dataset_cache`), or None
    when there is none, it is unreadable, or its fingerprint is not the recorded one (then
    the caller loads the source).

    Args:
        run_dir: the run directory.
        name: the dataset's name (``cfg.data.name``).
        meta: the workload's ``workload.json`` (read from ``run_dir`` when None).
    """
    wdir = Path(run_dir) / WORKLOAD_DIR
    try:
        if meta is None:
            meta = json.loads((wdir / META_FILE).read_text())
        with np.load(wdir / DATASET_CACHE, allow_pickle=False) as z:
            ds = Dataset.from_arrays(name, *(z[k] for k in _SPLIT_ARRAYS), int(meta["num_classes"]),
                                     meta.get("data") or {})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ds if fingerprint(ds) == meta.get("data_sha256") else None


def remove_dataset_cache(run_dir: str | Path) -> None:
    """Delete the sweep's dataset cache (at the sweep's end; nothing if there is none)."""
    (Path(run_dir) / WORKLOAD_DIR / DATASET_CACHE).unlink(missing_ok=True)

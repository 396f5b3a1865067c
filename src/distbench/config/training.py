"""The ``[training]`` section (what every strategy trains with) and the ``[run]`` section
(the sweep), checked together: every worker count must divide the global batch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from distbench.contracts import ConfigError, accuracy_hint
from distbench.config.values import at_least, choice

OPTIMIZERS = ("sgd", "adam", "rmsprop")
LR_SCALING = ("none", "linear")


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


def check_training_and_run(t: TrainingConfig, r: RunConfig) -> None:
    """``[training]`` and ``[run]``: epochs, batch, optimizer, rates, target; strategies,
    worker counts (each must divide the global batch, unless ``single`` alone runs), repeats,
    timeout."""
    at_least("training.epochs", t.epochs)
    at_least("training.global_batch_size", t.global_batch_size)
    choice("training.optimizer", t.optimizer, OPTIMIZERS)
    choice("training.lr_scaling", t.lr_scaling, LR_SCALING)
    if not 0 < t.learning_rate < math.inf:
        raise ConfigError(f"training.learning_rate = {t.learning_rate!r}: must be a finite number > 0, e.g. 0.1")
    if not 0.0 <= t.momentum < 1.0:
        raise ConfigError(f"training.momentum = {t.momentum!r}: must be in [0, 1)")
    if not 0.0 < t.target_accuracy <= 1.0:
        raise ConfigError(f"training.target_accuracy = {t.target_accuracy!r}: must be in (0, 1]"
                          f"{accuracy_hint(t.target_accuracy)}")
    at_least("training.threads", t.threads, 0)
    if not r.strategies:
        raise ConfigError("run.strategies is empty: list strategy names (see 'distbench list') or 'all'")
    if not r.workers:
        raise ConfigError("run.workers is empty: give at least one worker count, e.g. [2]")
    for n in r.workers:
        at_least("run.workers", n)
        if set(r.strategies) == {"single"}:  # one replica whatever the worker counts say
            continue
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
        at_least("run.repeats", r.repeats)
    if not 0 < r.timeout_s < math.inf:
        raise ConfigError(f"run.timeout_s = {r.timeout_s!r}: must be a finite number of seconds > 0")

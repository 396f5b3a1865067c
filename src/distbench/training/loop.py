"""The loop core every replica loop is built on.

Every strategy's training loop (the tf.distribute loop of ``single``, ``mirrored`` and
``multi_worker_mirrored``, a Horovod rank, a parameter-server replica, ``tf_ps``'s
coordinator) is this core plus its own step function and exchange. The core owns what
must be the same everywhere for the comparison to be fair:

- CPU threads: :func:`threads_per_process` (one rule for every process) and
  :func:`configure_threads` (set before TensorFlow runs its first op);
- **trace before the clock**: :meth:`TrainLoop.trace` runs the strategy's tracing (its
  step or epoch ``tf.function``) before the training clock starts and records
  ``trace_s``, as MLPerf's training rules leave compilation out of the timed run;
- the training clock and per-epoch snapshots (:class:`~distbench.training.output.SnapshotRecorder`:
  the copy time is excluded from the clock);
- the non-trainable state rule: after each epoch, off the clock and before the snapshot,
  every replica runs the strategy's ``sync`` (the synchronous strategies average the
  replicas' BatchNormalization moving statistics and write the mean back to every
  replica; docs/architecture.md, "Non-trainable state"), so the evaluated model is one
  well-defined model;
- epoch hooks: after each epoch, every hook gets an :class:`EpochEnd`. Hooks come from the
  caller and from ``DISTBENCH_EPOCH_HOOKS`` (comma-separated ``module:function`` names,
  imported in the training process): the tests inject faults this way (a rank that dies
  after epoch 1), never through code in the loop.

To change how every strategy snapshots or traces, change this file.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from distbench.training.output import Snapshot, SnapshotRecorder

EPOCH_HOOKS_ENV = "DISTBENCH_EPOCH_HOOKS"


def threads_per_process(configured: int, processes: int) -> int:
    """Intra-op CPU threads for each of ``processes`` processes sharing this machine.

    Args:
        configured: ``training.threads`` (0 = derive from the cores).
        processes: training processes on this machine.

    Returns:
        ``configured`` if set, else ``max(1, cores // processes)``.
    """
    return configured if configured else max(1, (os.cpu_count() or 1) // max(1, processes))


def configure_threads(intra_op: int, inter_op: int = 0) -> dict[str, int]:
    """Set TensorFlow's CPU thread pools before any TF op runs; return what was set.

    Args:
        intra_op: threads inside one op (0 = TensorFlow's default).
        inter_op: ops run concurrently (0 = TensorFlow's default).
    """
    import tensorflow as tf

    if intra_op:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    return {"intra_op_threads": intra_op, "inter_op_threads": inter_op}


@dataclass(frozen=True)
class EpochEnd:
    """What an epoch hook is told after each epoch.

    Attributes:
        epoch: epochs completed (1-based).
        epochs: epochs in the run.
        steps: steps completed so far (this replica's optimizer steps, or the centre's
            updates for a coordinator).
        loss: the last training loss the epoch reported (``None`` if it reports none).
        replica: this loop's replica, rank or worker index (``None`` for a single loop).
        elapsed_s: training seconds so far (snapshots excluded).
    """

    epoch: int
    epochs: int
    steps: int
    loss: float | None
    replica: int | None
    elapsed_s: float


EpochHook = Callable[[EpochEnd], None]


def hooks_from_env() -> list[EpochHook]:
    """The epoch hooks named in ``DISTBENCH_EPOCH_HOOKS`` (``module:function``, comma-separated).

    Raises:
        ValueError: a name is not ``module:function`` or cannot be imported.
    """
    out: list[EpochHook] = []
    for ref in filter(None, (r.strip() for r in os.environ.get(EPOCH_HOOKS_ENV, "").split(","))):
        mod, _, attr = ref.partition(":")
        try:
            out.append(getattr(importlib.import_module(mod), attr))
        except (ImportError, AttributeError, ValueError) as e:
            raise ValueError(f"{EPOCH_HOOKS_ENV} names {ref!r}, which cannot be loaded ({e}); expected "
                             "module:function") from None
    return out


@dataclass
class LoopResult:
    """The clock's view of one training run.

    Attributes:
        train_s: training seconds, first step to the end of ``finish``, snapshots excluded.
        first_step_unix: Unix time the first step began.
        trace_s: seconds spent tracing before the clock (0 when nothing was traced).
        steps: the last steps count an epoch reported.
        loss: the last loss an epoch reported (``None`` if none did).
        snapshots: per-epoch snapshots (empty when the loop takes none).
        start_unix, end_unix: Unix times of the first step and of the end of training.
    """

    train_s: float
    first_step_unix: float
    trace_s: float
    steps: int
    loss: float | None
    snapshots: list[Snapshot] = field(default_factory=list)
    start_unix: float = 0.0
    end_unix: float = 0.0


class TrainLoop:
    """One replica's (or one coordinator's) run of ``epochs`` epochs.

    Args:
        epochs: epochs to run.
        get_weights: returns the model's current weights; a snapshot is taken after
            every epoch when given (``None``: this loop takes no snapshots, e.g. a
            parameter-server replica, whose snapshots are the centre's).
        replica: this loop's replica, rank or worker index, for hooks and progress lines.
        hooks: epoch hooks besides those of ``DISTBENCH_EPOCH_HOOKS``.
        label: prefix of the progress line printed after each epoch (``None``: no line).
        sync: called after every epoch on every replica, off the clock and before the
            snapshot (collectives allowed: every replica calls it at the same point).

    Raises:
        ValueError: ``DISTBENCH_EPOCH_HOOKS`` names something that cannot be loaded.
    """

    def __init__(self, epochs: int, get_weights: Callable[[], Sequence[Any]] | None = None, *,
                 replica: int | None = None, hooks: Sequence[EpochHook] = (), label: str | None = "",
                 sync: Callable[[], None] | None = None) -> None:
        self.epochs = epochs
        self.sync = sync
        self.get_weights = get_weights
        self.replica = replica
        self.hooks = list(hooks) + hooks_from_env()
        self.label = label
        self.trace_s = 0.0

    def trace(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (the strategy's tracing) before the clock and add its time to ``trace_s``."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.trace_s += time.perf_counter() - t0

    def run(self, run_epoch: Callable[[int], tuple[int, float | None]],
            finish: Callable[[], None] | None = None) -> LoopResult:
        """Start the clock, run every epoch, call the hooks and take snapshots, stop the clock.

        Args:
            run_epoch: trains epoch ``e`` (0-based) and returns ``(steps so far, last loss)``.
            finish: work that still counts as training after the last epoch (e.g. a
                parameter-server replica's commit of its last partial window).

        Returns:
            :class:`LoopResult`.
        """
        rec = SnapshotRecorder()
        rec.start()
        start_unix = rec.first_step_unix or time.time()
        steps, loss = 0, None
        for epoch in range(self.epochs):
            steps, loss = run_epoch(epoch)
            if self.sync is not None:
                rec.off_clock(self.sync)
            if self.get_weights is not None:
                rec.take(epoch + 1, steps, self.get_weights)
            info = EpochEnd(epoch + 1, self.epochs, steps, loss, self.replica, rec.elapsed())
            for hook in self.hooks:
                hook(info)
            if self.label is not None:
                tail = f", last loss {loss:.4f}" if loss is not None and np.isfinite(loss) else ""
                print(f"{self.label}epoch {epoch + 1}/{self.epochs} done: {steps} steps{tail}", flush=True)
        if finish is not None:
            finish()
        train_s = rec.stop()
        return LoopResult(train_s, start_unix, self.trace_s, steps, loss, rec.snapshots, start_unix, time.time())

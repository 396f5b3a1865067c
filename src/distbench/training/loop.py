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
- straggler scenarios: :class:`StepDelay`, built by :meth:`TrainLoop.step_delay` from the
  configuration's :class:`~distbench.config.scenario.Scenario` and the replica index, delays a
  replica's every step by ``(slowdown - 1)`` x the step's own measured compute time (plus
  jitter), inside the step function of every strategy (the same graph ops everywhere);
- epoch hooks: after each epoch, every hook gets an :class:`EpochEnd`. Hooks come from the
  caller and from ``DISTBENCH_EPOCH_HOOKS`` (comma-separated ``module:function`` names,
  imported in the training process): the tests inject faults this way (a rank that dies
  after epoch 1), never through code in the loop.

To change how every strategy snapshots or traces, change this file.
"""

from __future__ import annotations

import importlib
import os
import threading
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


class StepDelay:
    """One replica's injected per-step delay under a straggler scenario.

    The replica's step is timed in the graph, with ``tf.timestamp`` ops, from :meth:`start`
    (before the forward pass) to :meth:`finish` (its local gradients computed, before any
    exchange); then the replica sleeps ``(slowdown - 1) x compute`` seconds (a host
    callback, ``tf.numpy_function``), so the step takes ``slowdown`` times its own compute
    time, plus, with jitter, a random delay ``D ~ Exponential(mean theta)`` with
    ``theta = cv x base / (1 - cv)`` and ``base = slowdown x compute``: the step time
    ``base + D`` is a shifted exponential (the straggler model of Lee, Lam, Pedarsani,
    Papailiopoulos and Ramchandran, "Speeding Up Distributed Machine Learning Using Codes",
    IEEE Trans. Inf. Theory 2018) whose coefficient of variation is ``cv``. Delaying before
    the exchange is what a slow device does: a synchronous all-reduce waits for it, an
    asynchronous replica's commit is simply later.

    :meth:`start`, :meth:`finish` and :meth:`tape` add graph ops to a step ``tf.function``
    only when the delay is active; an inactive delay returns its inputs unchanged, so a run
    without a scenario traces exactly the graph it always did. Under a scenario every
    replica's delay is active and traces the same ops (Horovod matches the tensors it
    all-reduces across ranks by their op names, which an extra op on one rank only would
    change): two timestamps and a ``tf.cond`` whose branch, the host callback, runs only on
    a replica that is delayed (slowdown above 1, or jitter). An unslowed replica, and every
    replica of the sweep's ``slowdown = 1`` baseline, pays two timestamp ops per step.

    Args:
        slowdown: factor on this replica's step time (>= 1).
        jitter_cv: the step time's coefficient of variation from jitter, in [0, 1).
        seed: seed of the jitter's generator (``numpy.random.default_rng``).
        enabled: add the timing ops (default: only when ``slowdown > 1`` or ``jitter_cv > 0``).
    """

    def __init__(self, slowdown: float = 1.0, jitter_cv: float = 0.0, seed: Any = 0,
                 enabled: bool | None = None) -> None:
        self.slowdown = float(slowdown)
        self.jitter_cv = float(jitter_cv)
        self.delays = self.slowdown > 1 or self.jitter_cv > 0
        self.enabled = self.delays if enabled is None else bool(enabled)
        self._rng = np.random.default_rng(seed)
        self._t0: Any = None  # the start timestamp of the step being traced
        self._lock = threading.Lock()
        self.steps = 0
        self.compute_s = 0.0
        self.delay_s = 0.0

    @classmethod
    def for_replica(cls, scenario: Any, replica: int | None) -> "StepDelay":
        """The delay of replica ``replica`` under ``scenario`` (a :class:`~distbench.config.scenario.Scenario`
        or ``None``: inactive): the slowdown if it is the scenario's slow worker, the jitter for
        every replica; active on every replica (see the class docstring)."""
        if scenario is None:
            return cls()
        r = replica or 0
        return cls(scenario.slowdown if scenario.worker == r else 1.0, scenario.jitter_cv, (scenario.jitter_seed, r),
                   enabled=True)

    @property
    def active(self) -> bool:
        """True when this replica's steps are timed (and delayed when the slowdown or jitter says so)."""
        return self.enabled

    def delay_for(self, compute_s: float) -> float:
        """Seconds to sleep after a step whose compute took ``compute_s`` seconds (draws the jitter)."""
        base = self.slowdown * compute_s
        extra = base - compute_s
        if self.jitter_cv > 0:
            extra += float(self._rng.exponential(self.jitter_cv * base / (1 - self.jitter_cv)))
        return extra

    def sleep(self, compute_s: Any) -> np.float64:
        """Host side, after a step whose compute took ``compute_s`` seconds: sleep the delay,
        count it, return it."""
        compute = float(compute_s)
        delay = self.delay_for(compute)
        if delay > 0:
            time.sleep(delay)
        with self._lock:
            self.steps += 1
            self.compute_s += compute
            self.delay_s += delay
        return np.float64(delay)

    def start(self, x: Any, after: Sequence[Any] = ()) -> Any:
        """``x`` (a step's input tensor), made to depend on the step's start timestamp, which
        itself waits for ``x`` and for the tensors ``after``. A step loop inside one graph
        (a ``tf.range`` loop) passes a tensor that depends on the previous step's update:
        a timestamp with no inputs could run as soon as the loop enters the next iteration,
        before the previous step ended, and the compute time would hold that wait."""
        if not self.active:
            return x
        import tensorflow as tf

        with tf.control_dependencies([x, *after]):
            self._t0 = tf.timestamp()
        with tf.control_dependencies([self._t0]):
            return tf.identity(x)

    def finish(self, grads: Sequence[Any]) -> list[Any]:
        """``grads`` (the step's local gradients), made to wait for the delay."""
        if not self.active:
            return list(grads)
        import tensorflow as tf

        if self._t0 is None:
            raise RuntimeError("StepDelay.finish before start: call start(x) on the step's input first")
        ready = [g for g in tf.nest.flatten(list(grads), expand_composites=True) if g is not None]
        with tf.control_dependencies(ready):
            compute = tf.timestamp() - self._t0
        slept = tf.cond(tf.constant(self.delays),  # a constant per replica: the same ops on every one
                        lambda: tf.numpy_function(self.sleep, [compute], tf.float64, stateful=True),
                        lambda: tf.constant(0.0, tf.float64))
        with tf.control_dependencies([slept]):
            return [None if g is None else tf.identity(g) for g in grads]

    def tape(self, **kwargs: Any) -> Any:
        """A ``tf.GradientTape`` whose ``gradient`` applies :meth:`finish` (a plain tape when
        inactive). A subclass, so wrappers that derive from the tape's class and call its
        ``gradient`` before their exchange (``hvd.DistributedGradientTape``) delay the local
        gradients, not the averaged ones."""
        import tensorflow as tf

        if not self.active:
            return tf.GradientTape(**kwargs)
        delay = self

        class DelayedGradientTape(tf.GradientTape):
            def gradient(self, target: Any, sources: Any, *args: Any, **kw: Any) -> Any:
                grads = super().gradient(target, sources, *args, **kw)
                if isinstance(grads, (list, tuple)):
                    return type(grads)(delay.finish(grads))
                return delay.finish([grads])[0]

        return DelayedGradientTape(**kwargs)

    def summary(self) -> dict[str, Any]:
        """What was injected: slowdown, jitter cv, steps, summed compute and delay seconds
        (counted by the host callback, so only on a replica that is delayed)."""
        return {"slowdown": self.slowdown, "jitter_cv": self.jitter_cv, "steps": self.steps,
                "compute_s": self.compute_s, "delay_s": self.delay_s}


class StopTraining(Exception):
    """Raised by a ``run_epoch`` (or ``finish``) of :meth:`TrainLoop.run` to end training
    early and cleanly: the clock stops there and :attr:`LoopResult.stopped` keeps the
    message (a parameter-server replica whose weights became non-finite, or one whose
    peer left a synchronous run)."""


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
        step_delays: :meth:`StepDelay.summary` of each delayed replica of this loop,
            by replica index (empty unless a replica was delayed).
        stopped: the :class:`StopTraining` message when training ended early, else ``None``.
    """

    train_s: float
    first_step_unix: float
    trace_s: float
    steps: int
    loss: float | None
    snapshots: list[Snapshot] = field(default_factory=list)
    start_unix: float = 0.0
    end_unix: float = 0.0
    step_delays: dict[int, dict[str, Any]] = field(default_factory=dict)
    stopped: str | None = None


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
        scenario: the configuration's straggler :class:`~distbench.config.scenario.Scenario`
            (``None``: none); :meth:`step_delay` gives each replica's delay.

    Raises:
        ValueError: ``DISTBENCH_EPOCH_HOOKS`` names something that cannot be loaded.
    """

    def __init__(self, epochs: int, get_weights: Callable[[], Sequence[Any]] | None = None, *,
                 replica: int | None = None, hooks: Sequence[EpochHook] = (), label: str | None = "",
                 sync: Callable[[], None] | None = None, scenario: Any = None) -> None:
        self.epochs = epochs
        self.scenario = scenario
        self._delays: dict[int, StepDelay] = {}
        self.sync = sync
        self.get_weights = get_weights
        self.replica = replica
        self.hooks = list(hooks) + hooks_from_env()
        self.label = label
        self.trace_s = 0.0

    def step_delay(self, replica: int | None = None) -> StepDelay:
        """The :class:`StepDelay` of ``replica`` (default this loop's replica), one per replica;
        a step function calls its :meth:`~StepDelay.start` and :meth:`~StepDelay.tape`."""
        r = self.replica if replica is None else replica
        r = r or 0
        if r not in self._delays:
            self._delays[r] = StepDelay.for_replica(self.scenario, r)
        return self._delays[r]

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

        Either may raise :class:`StopTraining` to end training there (the clock stops, the
        result's ``stopped`` says why); any other exception propagates.

        Returns:
            :class:`LoopResult`.
        """
        rec = SnapshotRecorder()
        rec.start()
        start_unix = rec.first_step_unix or time.time()
        steps, loss, stopped = 0, None, None
        try:
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
        except StopTraining as e:
            stopped = str(e)
            if self.label is not None:
                print(f"{self.label}stopped early: {stopped}", flush=True)
        train_s = rec.stop()
        delays = {r: d.summary() for r, d in sorted(self._delays.items()) if d.delays}
        for r, d in delays.items():
            if self.label is not None:
                print(f"{self.label}replica {r} delayed {d['delay_s']:.2f} s over {d['steps']} steps (compute "
                      f"{d['compute_s']:.2f} s, slowdown {d['slowdown']:g}, jitter cv {d['jitter_cv']:g})", flush=True)
        return LoopResult(train_s, start_unix, self.trace_s, steps, loss, rec.snapshots, start_unix, time.time(),
                          delays, stopped)

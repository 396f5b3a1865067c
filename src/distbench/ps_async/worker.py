"""One model replica of a parameter-server run, whatever engine carries it.

:func:`train_replica` is what runs inside a Spark task (and, later, an MPI rank): it
builds the Workload's Keras model from a :class:`ReplicaSpec`, loads the initial
weights, trains on its shard with the Workload's local optimizer, and every
``communication_window`` local mini-batches exchanges with the parameter server
through :class:`~distbench.ps_async.client.WorkerSession`, which applies the
optimizer's worker rule (:mod:`distbench.ps_async.rules`). The last partial window is
committed, not dropped. The replica knows nothing about the optimizer beyond its name.

The local optimizer is the Workload's, unless the optimizer's rule spec prescribes the
local step (``OptimizerSpec.local_sgd``: EAMSGD's Nesterov momentum, Zhang, Choromanska,
LeCun 2015, Alg. 2). The loop is :class:`~distbench.training.loop.TrainLoop` (trace before
the clock, epoch hooks); snapshots are the centre's, taken on the server side.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from distbench import gpu
from distbench.config import DataConfig, ModelConfig, TrainingConfig
from distbench.models.output import LossSpec
from distbench.procinfo import current_namespace
from distbench.config.scenario import Scenario


@dataclass
class ReplicaSpec:
    """Everything a replica needs, small enough to ship to an executor: no data, only
    where to read it (each replica reads its own shard, :func:`load_shard_split`).

    Attributes:
        data: the data source's config; with ``training.seed`` it rebuilds the dataset in
            the replica's process, which must match ``data_sha256`` (the workload's
            fingerprint).
        model: model spec; ``input_shape`` (H, W, C) and ``num_classes`` complete it.
        initial_weights: the Workload's initial weights (float32 arrays).
        training: training config (epochs, global batch, local optimizer, seed).
        num_workers: N replicas.
        steps_per_epoch: optimizer steps each replica runs per epoch
            (``n_train // global_batch``, as for every strategy).
        optimizer: PS optimizer name (``adag``...); ``params`` its resolved parameters.
        address, secret: the parameter server's endpoint and the per-run secret.
        threads: intra-op CPU threads for this replica's TensorFlow.
        timeout_s: seconds to wait for any server reply.
        loss: the workload's loss (which cross-entropy, logits or probabilities).
        non_trainable: positions of the non-trainable weights (see
            :class:`~distbench.ps_async.client.WorkerSession`).
        scenario: the straggler :class:`~distbench.config.scenario.Scenario` (None: none); each
            replica's loop core delays its steps (replica = ``worker_id``).
    """

    data: DataConfig
    data_sha256: str
    model: ModelConfig
    input_shape: tuple[int, ...]
    num_classes: int
    initial_weights: list[np.ndarray]
    training: TrainingConfig
    num_workers: int
    steps_per_epoch: int
    optimizer: str
    params: dict[str, Any]
    address: str
    secret: bytes
    threads: int = 1
    timeout_s: float = 120.0
    extra: dict[str, Any] = field(default_factory=dict)
    loss: LossSpec = field(default_factory=LossSpec)
    non_trainable: list[int] = field(default_factory=list)
    scenario: Scenario | None = None

    @property
    def per_replica_batch(self) -> int:
        """Samples per local mini-batch: global batch / N."""
        return self.training.global_batch_size // self.num_workers

    def exchanges(self) -> int:
        """Commits (async) or barrier rounds (sync) each replica makes in the whole run."""
        total = self.steps_per_epoch * self.training.epochs
        w = self.params["communication_window"]
        return self.training.epochs if w is None else math.ceil(total / w)


def load_shard_split(spec: ReplicaSpec) -> Any:
    """The training split, built in this process from ``spec.data`` and checked against the
    workload's fingerprint (in-memory sources load whole; Parquet opens its footers only
    and is read block by block, one shard's rows at a time).

    Raises:
        ValueError: the data built here differ from the workload's (files changed, or a
            host whose copy differs).
    """
    from distbench.data import fingerprint, load_dataset

    ds = load_dataset(spec.data, spec.training.seed)
    if fingerprint(ds) != spec.data_sha256:
        raise ValueError(f"dataset {spec.data.name!r} read by this replica differs from the run's (fingerprint "
                         "mismatch): every host needs the same data files at the same path")
    return ds.train


def train_replica(spec: ReplicaSpec, worker_id: int, split: Any = None,
                  ready: Callable[[], None] | None = None,
                  client_factory: Callable[..., Any] | None = None, attempt: int = 0) -> dict[str, Any]:
    """Train one replica on its shard against the parameter server.

    The shard is the ``worker_id``-th contiguous row range of an in-memory training split,
    or every N-th row of one read block by block (Parquet, stored in any order); each
    epoch the replica visits it in a permutation seeded by ``(seed, epoch, worker_id)``
    (:func:`~distbench.training.schedule.shard_batches`: rows in memory, blocks then
    rows for Parquet), one batch in memory at a time.

    Args:
        spec: the replica spec.
        worker_id: this replica's id, 0..N-1.
        split: the training :class:`~distbench.data.splits.Split` (default: built here by
            :func:`load_shard_split`).
        ready: called once the model is built and before the first pull; an engine
            passes its barrier here so that every replica starts training together.
        client_factory: builds the transport's client with :class:`PSClient`'s signature
            (default :class:`PSClient`, ZeroMQ; the MPI engine passes its own).
        attempt: the engine's attempt number of this replica (a Spark task retry): commit
            sequence numbers start at ``attempt << 32``, so a re-run replica's new deltas are
            applied while a resent commit of the same attempt is still applied only once.

    Returns:
        ``{"worker": id, "steps", "exchanges", "start_unix", "end_unix", "staleness": [tau...]}``,
        with ``"step_delay"`` (:meth:`~distbench.training.loop.StepDelay.summary`) when a
        straggler scenario delayed this replica. A replica whose weights became non-finite
        stops training at that exchange (nothing non-finite is sent), tells the server it is
        done and returns with ``"diverged"`` (the message); a replica of a synchronous
        optimizer whose peer left that way stops at its next barrier and returns with
        ``"stopped"`` (the server's message).

    Raises:
        ValueError: the shard is too small for ``steps_per_epoch`` local batches.
        distbench.ps_async.client.PSError: the server rejected a message or did not answer.
    """
    import tensorflow as tf

    from distbench.training.loop import TrainLoop, configure_threads
    from distbench.training.step import replica_step

    if spec.threads:
        configure_threads(spec.threads)
    device = gpu.place(worker_id)[0]  # one GPU per replica, round robin (before any op); else the CPU
    from distbench.ps_async.client import PSClient, WorkerSession

    split = split if split is not None else load_shard_split(spec)
    model, opt = _replica_model(spec, worker_id)
    loss_obj = spec.loss.make(reduction="sum_over_batch_size")  # the workload's loss, mean over the batch
    loop = TrainLoop(spec.training.epochs, replica=worker_id,
                     label=f"worker {worker_id} (pid {os.getpid()}, attempt {attempt}): ", scenario=spec.scenario)
    delay = loop.step_delay()
    run_steps = _steps_graph(replica_step(model, opt, loss_obj, lambda: delay))
    data = iter(_pipeline(split, spec, worker_id))  # created before the clock starts
    loop.trace(lambda: run_steps.get_concrete_function(data, tf.TensorSpec((), tf.int32)))
    if ready is not None:
        ready()
    client = (client_factory or PSClient)(spec.address, spec.secret, worker_id, spec.initial_weights,
                                          timeout_s=spec.timeout_s)
    session = WorkerSession(client, spec.optimizer, _overrides(spec), non_trainable=spec.non_trainable)
    session.seq = attempt << 32
    window = session.window
    count = {"steps": 0, "since": 0, "exchanges": 0}
    state: dict[str, str] = {}
    load, exchange = _exchanger(model, session, worker_id, count, state)
    run_epoch, finish = _windowed_epochs(run_steps, data, spec.steps_per_epoch, window, count, exchange)
    try:
        load(session.start())
        res = loop.run(run_epoch, finish)
        session.finish()
    finally:
        client.close()
    return {"worker": worker_id, "steps": count["steps"], "exchanges": count["exchanges"],
            "start_unix": res.start_unix, "end_unix": res.end_unix, "staleness": list(session.staleness),
            "attempt": attempt, "trace_s": loop.trace_s, "netns": current_namespace(),
            "device": device,
            "host": socket.gethostname(), **({"step_delay": delay.summary()} if delay.delays else {}),
            **({"diverged": state["diverged"]} if "diverged" in state else
               {"stopped": res.stopped} if res.stopped else {})}


def _steps_graph(step: Callable[..., Any]) -> Any:
    """``run_steps(iterator, k)``: ``k`` steps in one graph.

    The steps between two exchanges run inside one graph (a tf.while_loop over the input
    iterator), as the tf.distribute loop runs its epoch, instead of a Python call and a
    Python batch per step (with them and Keras' get/set_weights, one-worker spark_ps:adag
    reached 0.79 of single's steady samples/s, benchmarks/step_time.py; the profile is
    benchmarks/profile_step.py). autograph=False: the same tracing mode as Horovod's loop.
    """
    import tensorflow as tf

    from distbench.training.step import while_steps

    @tf.function(autograph=False)
    def run_steps(iterator: Any, k: Any) -> Any:
        return while_steps(step, iterator, k)

    return run_steps


def _windowed_epochs(run_steps: Any, data: Any, steps_per_epoch: int, window: int | None, count: dict[str, int],
                     exchange: Callable[[], None]) -> tuple[Callable[[int], tuple[int, float | None]],
                                                            Callable[[], None]]:
    """The loop core's ``(run_epoch, finish)`` for a replica: each epoch runs its steps in
    chunks up to the next exchange every ``window`` local steps (``None``: model averaging,
    one exchange per epoch); ``finish`` commits the last partial window instead of dropping it."""
    import tensorflow as tf

    def run_epoch(epoch: int) -> tuple[int, float | None]:
        loss, left = None, steps_per_epoch
        while left:  # chunks of steps up to the next exchange (or the epoch's end)
            k = left if window is None else min(left, window - count["since"])
            loss = run_steps(data, tf.constant(k, tf.int32))
            left -= k
            count["steps"] += k
            count["since"] += k
            if window is not None and count["since"] == window:
                exchange()
        if window is None:  # model averaging: once per epoch
            exchange()
        return count["steps"], None if loss is None else float(loss)

    def finish() -> None:
        if count["since"]:
            exchange()

    return run_epoch, finish


def _replica_model(spec: ReplicaSpec, worker_id: int) -> tuple[Any, Any]:
    """The replica's model (seeded as ``Workload.build_model`` seeds it: reproducible
    Dropout) and its local optimizer, built (the optimizer's own local SGD where it has one)."""
    import keras

    from distbench.models import build_model
    from distbench.ps_async.rules import get_optimizer
    from distbench.workload import make_optimizer

    keras.utils.set_random_seed(spec.training.seed + worker_id)
    model = build_model(spec.model, spec.input_shape, spec.num_classes)
    local_sgd = get_optimizer(spec.optimizer).local_sgd
    opt = keras.optimizers.SGD(**local_sgd(spec.params)) if local_sgd else make_optimizer(spec.training, 1)
    opt.build(model.trainable_variables)
    return model, opt


def _exchanger(model: Any, session: Any, worker_id: int, count: dict[str, int],
               state: dict[str, str]) -> tuple[Callable[[list], None], Callable[[], None]]:
    """``(load, exchange)`` for a replica: ``load(arrays)`` sets the model's weights;
    ``exchange()`` commits them (``count["since"]`` local steps) and loads the server's reply.

    ``exchange`` raises :class:`~distbench.training.loop.StopTraining` when the weights became
    non-finite (``state["diverged"]`` says so: the server accepts only finite updates) or a
    synchronous peer left; other :class:`~distbench.ps_async.client.PSError` s propagate.
    """
    from distbench.ps_async.client import PSError
    from distbench.ps_async.protocol import all_finite
    from distbench.training.loop import StopTraining

    # The model's weights in get_weights() order, as their backing tf.Variables: Keras'
    # get_weights/set_weights walk the layers and check every shape on each call (about 3x
    # the copies' own time); the server's replies are checked against the template already.
    held = [v.value for v in model.weights]

    def load(arrays: list) -> None:
        for v, a in zip(held, arrays, strict=True):
            v.assign(a)

    def exchange() -> None:
        weights = [v.numpy() for v in held]
        if not all(all_finite(a) for a in weights):  # the server would refuse the commit
            state["diverged"] = (f"replica {worker_id}'s weights became non-finite (NaN or inf) after "
                                 f"{count['steps']} local steps: it diverged (a learning rate too high for "
                                 "this model and data?), and the parameter server accepts only finite "
                                 "updates, so training stopped there")
            raise StopTraining(state["diverged"])
        try:
            load(session.exchange(weights, count["since"]))
        except PSError as e:
            if e.kind != "left":
                raise
            raise StopTraining(str(e)) from None
        count["since"], count["exchanges"] = 0, count["exchanges"] + 1

    return load, exchange


def params_from_config(cfg: Any, optimizer: str, window: int | None = None) -> dict[str, Any]:
    """The optimizer's parameters: its defaults (:data:`~distbench.ps_async.rules.DEFAULTS`),
    overridden by the ``[ps]`` config (``communication_window`` 0 keeps the default;
    ``rho``/``learning_rate``/``momentum`` only where the optimizer has them) and by
    ``window`` (a window sweep's value).

    Args:
        cfg: the :class:`~distbench.config.ExperimentConfig`.

    Raises:
        KeyError: unknown optimizer; ValueError: a bad parameter value.
    """
    from distbench.ps_async.rules import DEFAULTS, resolve_params

    over: dict[str, Any] = {}
    if window or cfg.ps.communication_window:
        over["communication_window"] = window or cfg.ps.communication_window
    for k in ("rho", "learning_rate", "momentum"):
        if k in DEFAULTS[optimizer]:
            over[k] = getattr(cfg.ps, k)
    return resolve_params(optimizer, over)


def replica_spec(workload: Any, num_workers: int, optimizer: str, params: dict[str, Any], address: str,
                 secret: bytes, threads: int, timeout_s: float, scenario: Scenario | None = None) -> ReplicaSpec:
    """The :class:`ReplicaSpec` of ``workload`` (a :class:`~distbench.workload.Workload`)."""
    ds = workload.dataset
    return ReplicaSpec(workload.config.data, workload.data_sha256, workload.config.model, ds.input_shape,
                       ds.num_classes, workload.initial_weights,
                       workload.config.training, num_workers, workload.steps_per_epoch(), optimizer, params,
                       address, secret, threads=threads, timeout_s=timeout_s, loss=workload.loss_spec(),
                       non_trainable=workload.non_trainable_indices(), scenario=scenario)




def _pipeline(split: Any, spec: ReplicaSpec, worker_id: int) -> Any:
    """The ``tf.data`` pipeline of the replica's local batches over the whole run, exactly
    :func:`~distbench.training.schedule.shard_batches`: an in-memory split is gathered by
    index from one copy of the shard's rows (:func:`~distbench.training.schedule.shard_indices`);
    a block split streams through a generator over ``shard_batches`` (one block in memory)."""
    import tensorflow as tf

    from distbench.training.schedule import shard_batches, shard_bounds, shard_indices
    from distbench.training.tf_loop import gather_dataset

    t, B, n = spec.training, spec.per_replica_batch, spec.num_workers
    if split.in_memory:
        lo, hi = shard_bounds(len(split), worker_id, n)
        idx = shard_indices(len(split), t.epochs, t.seed, B, worker_id, n, spec.steps_per_epoch) - lo
        return gather_dataset(idx, split.x[lo:hi], split.y[lo:hi], B)
    sig = (tf.TensorSpec((B, *split.sample_shape), tf.float32), tf.TensorSpec((B,), tf.int32))
    return tf.data.Dataset.from_generator(
        lambda: shard_batches(split, t.epochs, t.seed, B, worker_id, n, spec.steps_per_epoch),
        output_signature=sig).prefetch(2)


def _overrides(spec: ReplicaSpec) -> dict[str, Any]:
    """The resolved parameters minus derived ones (``alpha`` is recomputed)."""
    return {k: v for k, v in spec.params.items() if k != "alpha"}

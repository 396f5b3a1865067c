"""The custom training loop shared by every tf.distribute strategy.

One loop, so that ``single`` (OneDeviceStrategy), ``mirrored`` (MirroredStrategy) and,
in multi-process form, ``multi_worker_mirrored`` have identical semantics: the same
global batch per optimizer step, the same number of steps per epoch, the same samples
in the same order (:mod:`distbench.training.schedule`), the loss averaged over the
global batch with ``tf.nn.compute_average_loss`` and gradients summed across replicas
by the strategy (TensorFlow's custom-training-loop guide, "Custom training with
tf.distribute.Strategy"). Keras 3 ``model.fit`` is not used because it is broken under
MultiWorkerMirroredStrategy (keras-team/keras#20585).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distbench.training import batchnorm
from distbench.training.loop import TrainLoop
from distbench.training.output import TrainOutput
from distbench.training.schedule import replica_batches, replica_indices
from distbench.training.step import replica_step
from distbench.workload import Workload


ONE_REPLICA_PLAIN_INPUT = True
"""One replica in sync reads the plain ``tf.data`` pipeline instead of a distributed dataset
(see :func:`train_with_strategy`); the tests turn it off to compare the two paths."""


def gather_dataset(indices: np.ndarray, x: np.ndarray, y: np.ndarray, batch: int) -> Any:
    """A ``tf.data`` pipeline of ``(x[i], y[i])`` batches for consecutive ``batch``-sized runs of ``indices``.

    The data stay in one in-memory copy; each batch is gathered from it by index, so a
    pipeline over many epochs costs one copy of the indices, not of the samples.

    Args:
        indices: int sample indices, shape ``(k * batch,)`` (a remainder is dropped).
        x: samples, shape ``(n, ...)``.
        y: labels, shape ``(n,)``.
        batch: samples per element (the per-replica batch size).

    Returns:
        A ``tf.data.Dataset`` of ``(x_batch, y_batch)`` with shapes ``(batch, ...)``, ``(batch,)``.
    """
    import tensorflow as tf

    xt, yt = tf.constant(x), tf.constant(y)
    return (tf.data.Dataset.from_tensor_slices(indices).batch(batch, drop_remainder=True)
            .map(lambda i: (tf.gather(xt, i), tf.gather(yt, i))).prefetch(2))


def input_pipeline(split: Any, epochs: int, seed: int, global_batch: int, ranks: list[int],
                   world_size: int) -> Any:
    """The ``tf.data`` pipeline feeding replicas ``ranks`` (of ``world_size``) their slice of
    every global batch, over all epochs, in step order (replica ``ranks[0]``'s batch of a
    step, then ``ranks[1]``'s, ...; :mod:`distbench.training.schedule`).

    In-memory data (:attr:`~distbench.data.splits.Split.in_memory`) are gathered by index
    from one copy (:func:`gather_dataset`); data read block by block (Parquet) stream
    through a generator over :func:`~distbench.training.schedule.replica_batches`, which
    holds one row group and one batch at a time, so no process ever holds the training
    set whole and nothing becomes a graph constant.

    Args:
        split: the training :class:`~distbench.data.splits.Split`.
        epochs, seed, global_batch: the run's.
        ranks: the global replica indices this pipeline feeds.
        world_size: replicas in sync.

    Returns:
        A ``tf.data.Dataset`` of ``(x, y)`` per-replica batches: float32 ``(B, *sample_shape)``
        and int32 ``(B,)``, ``B = global_batch // world_size``.
    """
    import tensorflow as tf

    B = global_batch // world_size
    if split.in_memory:
        idx = replica_indices(len(split), global_batch, epochs, seed, ranks, world_size)
        return gather_dataset(idx, split.x, split.y, B)
    spec = (tf.TensorSpec((B, *split.sample_shape), tf.float32), tf.TensorSpec((B,), tf.int32))
    return tf.data.Dataset.from_generator(
        lambda: replica_batches(split, epochs, seed, global_batch, ranks, world_size), output_signature=spec
    ).prefetch(2)


def average_non_trainable(strategy: Any, model: Any) -> Any:
    """A function that sets every replica's non-trainable variables (BatchNormalization's
    moving mean and variance) to their mean over the replicas, or None if the model has none.

    Each replica updates its own copy of these variables from its own per-replica batches
    (Keras' default, unsynchronised BatchNormalization; its batch statistics in training
    are per replica as well); reading the model would give replica 0's. Averaging them
    after every epoch, off the clock, does not change training (a training step uses the
    batch statistics) and makes every replica hold, and the evaluation see, the same
    statistics: those of all the training data of the epoch. Under
    ``MultiWorkerMirroredStrategy`` the mean is a collective all-reduce over the workers.
    """
    import tensorflow as tf

    variables = [v.value for v in model.non_trainable_variables if v.value.dtype.is_floating]  # not seed states
    if not variables:
        return None

    @tf.function
    def replica_means() -> Any:
        local = strategy.run(lambda: [tf.identity(v) for v in variables])
        return [strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None) for v in local]

    def sync() -> None:
        for v, mean in zip(variables, replica_means()):
            v.assign(mean)

    return sync


def replica_id() -> int:
    """The global index of the replica whose step function is being traced (0 outside a
    replica context); MirroredStrategy traces each local replica's step separately, and
    MultiWorkerMirroredStrategy numbers replicas across workers, so the id is a constant."""
    import tensorflow as tf

    ctx = tf.distribute.get_replica_context()
    rid = tf.get_static_value(ctx.replica_id_in_sync_group) if ctx is not None else 0
    if rid is None:
        raise ValueError("the replica's id is not a constant in this strategy's step: a straggler scenario "
                         "cannot pick its slow replica here")
    return int(rid)


def run_iterator(strategy: Any, workload: Workload) -> Any:
    """The input iterator of a whole run under ``strategy``: every replica's slice of every
    global batch, in step order, over all epochs (:func:`input_pipeline`).

    One pipeline and one iterator for the whole run, created before the clock starts:
    building a distributed dataset and iterator per epoch cost 3-4x ``model.fit``'s training
    time on small workloads (benchmarks/harness_overhead.py). Two or more replicas in sync
    read a distributed dataset (``distribute_datasets_from_function``: input pipeline p
    feeds its local replicas, replica r the r-th ``global_batch / replicas`` slice). One
    replica reads the plain pipeline, as a Horovod rank and a parameter-server replica do:
    there is nothing to distribute, and the distributed iterator's per-step cost doubled
    ``single``'s epoch time on the digits MLP (9 ms against a Horovod rank's 4.5 ms;
    docs/architecture.md, pitfalls).
    """
    cfg, train = workload.config.training, workload.dataset.train
    replicas, G = strategy.num_replicas_in_sync, workload.config.training.global_batch_size
    if replicas == 1 and ONE_REPLICA_PLAIN_INPUT:
        return iter(input_pipeline(train, cfg.epochs, cfg.seed, G, [0], 1))

    def dataset_fn(ctx: Any) -> Any:
        local = replicas // ctx.num_input_pipelines
        first = ctx.input_pipeline_id * local
        return input_pipeline(train, cfg.epochs, cfg.seed, G, list(range(first, first + local)), replicas)

    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def train_with_strategy(strategy: Any, workload: Workload, scenario: Any = None) -> TrainOutput:
    """Train ``workload``'s model under a ``tf.distribute`` strategy.

    Args:
        strategy: a ``tf.distribute.Strategy`` (OneDevice, Mirrored, MultiWorkerMirrored).
        workload: the run's workload (data, model, initial weights, optimizer).
        scenario: the configuration's straggler :class:`~distbench.config.scenario.Scenario`
            (``None``: none). Each replica's step is delayed by the loop core's
            :class:`~distbench.training.loop.StepDelay` between its local gradients and the
            all-reduce: under MirroredStrategy the replicas share one process and one graph,
            and a delayed replica delays the synchronous step, as a slow device does.

    Input comes from :func:`run_iterator`: each replica gets exactly its ``global_batch /
    replicas`` slice of every global batch, so every strategy sees the same samples per
    step whatever its process and device layout.

    Returns:
        :class:`TrainOutput` with the final weights, per-epoch snapshots and timings.
        ``steps`` counts optimizer steps; ``samples`` counts samples of all replicas.
    """
    import tensorflow as tf

    cfg = workload.config.training
    ds = workload.dataset
    replicas = strategy.num_replicas_in_sync
    G = cfg.global_batch_size
    with strategy.scope():
        model = workload.build_model()
        optimizer = workload.make_optimizer(replicas)
        # Create the optimizer's slots now, in the strategy's scope: lazily created
        # inside the first tf.function call they break replica context under Mirrored.
        optimizer.build(model.trainable_variables)
    loss_obj = workload.loss_fn()
    loop = TrainLoop(cfg.epochs, model.get_weights, label="", scenario=scenario)
    step_fn = replica_step(model, optimizer,
                           lambda y, logits: tf.nn.compute_average_loss(loss_obj(y, logits), global_batch_size=G),
                           lambda: loop.step_delay(replica_id() if scenario is not None else 0))

    n = len(ds.train)
    steps_per_epoch = n // G

    # The whole epoch runs inside one graph (a tf.range loop over the distributed iterator),
    # as Keras' fit does with its iterator: a Python loop issuing one call per step cost
    # 3-7x the training time of model.fit here (benchmarks/harness_overhead.py).
    @tf.function
    def train_epoch(iterator: Any) -> Any:
        loss = tf.constant(0.0)
        for _ in tf.range(steps_per_epoch):
            x, y = next(iterator)
            per_replica = strategy.run(step_fn, args=(x, y) if scenario is None else (x, y, loss))
            loss = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return loss

    sync = average_non_trainable(strategy, model) if replicas > 1 else None
    iterator = run_iterator(strategy, workload)
    loop.sync = sync
    loop.trace(lambda: train_epoch.get_concrete_function(iterator))

    def run_epoch(epoch: int) -> tuple[int, float]:
        loss = float(train_epoch(iterator))
        return (epoch + 1) * steps_per_epoch, loss

    res = loop.run(run_epoch)
    return TrainOutput(
        final_weights=[np.asarray(w, dtype=np.float32) for w in model.get_weights()],
        snapshots=res.snapshots,
        train_s=res.train_s,
        first_step_unix=res.first_step_unix,
        steps=res.steps,
        samples=res.steps * G,
        replicas=replicas,
        extra={"last_train_loss": res.loss, "steps_per_epoch": steps_per_epoch, "trace_s": res.trace_s,
               "batchnorm": batchnorm.describe(model, "tf.distribute all-reduce"),
               **({"step_delays": res.step_delays} if res.step_delays else {})},
    )

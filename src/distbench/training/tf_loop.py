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

from distbench.training.output import SnapshotRecorder, TrainOutput
from distbench.training.schedule import epoch_order, replica_slice
from distbench.workload import Workload


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


def train_with_strategy(
    strategy: Any,
    workload: Workload,
    worker_rank: int = 0,
    num_workers: int = 1,
) -> TrainOutput:
    """Train ``workload``'s model under a ``tf.distribute`` strategy.

    Args:
        strategy: a ``tf.distribute.Strategy`` (OneDevice, Mirrored, MultiWorkerMirrored).
        workload: the run's workload (data, model, initial weights, optimizer).
        worker_rank: this process's index among the processes feeding the strategy
            (0 for single-process strategies).
        num_workers: number of input-feeding processes (1 for single-process strategies);
            each feeds its contiguous ``global_batch / num_workers`` share of every batch.

    Returns:
        :class:`TrainOutput` with the final weights, per-epoch snapshots and timings.
        ``steps`` counts optimizer steps; ``samples`` counts samples of all replicas.
    """
    import tensorflow as tf

    cfg = workload.config.training
    ds = workload.dataset
    replicas = strategy.num_replicas_in_sync
    G = cfg.global_batch_size
    local_batch = G // num_workers
    with strategy.scope():
        model = workload.build_model()
        optimizer = workload.make_optimizer(replicas)
        # Create the optimizer's slots now, in the strategy's scope: lazily created
        # inside the first tf.function call they break replica context under Mirrored.
        optimizer.build(model.trainable_variables)
    loss_obj = workload.loss_fn()
    variables = model.trainable_variables

    def step_fn(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_obj(y, logits), global_batch_size=G)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        per_replica = strategy.run(step_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    n = len(ds.y_train)
    steps_per_epoch = n // G
    rec = SnapshotRecorder()
    steps = 0
    last_loss = float("nan")
    for epoch in range(cfg.epochs):
        order = epoch_order(n, G, epoch, cfg.seed).reshape(steps_per_epoch, G)
        mine = np.concatenate([replica_slice(b, worker_rank, num_workers) for b in order])
        data = (tf.data.Dataset.from_tensor_slices((ds.x_train[mine], ds.y_train[mine]))
                .batch(local_batch, drop_remainder=True).with_options(options).prefetch(2))
        if epoch == 0:
            rec.start()
        for x, y in strategy.experimental_distribute_dataset(data):
            loss = train_step(x, y)
            steps += 1
        last_loss = float(loss)
        rec.take(epoch + 1, steps, model.get_weights)
    train_s = rec.stop()
    return TrainOutput(
        final_weights=[np.asarray(w, dtype=np.float32) for w in model.get_weights()],
        snapshots=rec.snapshots,
        train_s=train_s,
        first_step_unix=rec.first_step_unix or 0.0,
        steps=steps,
        samples=steps * G,
        replicas=replicas,
        extra={"last_train_loss": last_loss, "steps_per_epoch": steps_per_epoch},
    )

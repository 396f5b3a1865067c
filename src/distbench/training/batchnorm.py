"""BatchNormalization under the synchronous strategies: per-replica or synchronized batch
statistics, the same rule for tf.distribute and Horovod.

A Keras ``BatchNormalization`` layer normalises each training batch with that batch's
mean and variance. Under a synchronous strategy a replica sees only its per-replica batch
(``global_batch_size / replicas`` samples), so by default its statistics differ from those
``single`` computes over the whole global batch, and the strategies train a (slightly)
different model. ``BatchNormalization(synchronized=True)`` asks for the moments over the
global batch (Ioffe & Szegedy 2015, Algorithm 1, with the mini-batch being the global
batch; "cross-replica" or "sync" batch normalization, Peng et al. 2018, MegDet, Sec. 3.3):

- under tf.distribute (``mirrored``, ``multi_worker_mirrored``) Keras does it itself: its
  TensorFlow backend all-reduces each layer's sum, sum of squares and count through the
  replica context;
- under Horovod there is no replica context, so Keras would silently fall back to the
  per-rank batch; :func:`synchronize_with_horovod` makes those layers all-reduce the same
  three quantities with ``hvd.allreduce(op=Sum)`` instead (as Horovod's own
  ``SyncBatchNormalization`` does for Keras 2), differentiable through Horovod's allreduce
  gradient.

Either way the mean is ``sum / count`` and the variance ``E[x^2] - E[x]^2`` over the global
batch, so the synchronous strategies compute what ``single`` computes. The parameter-server
optimizers train asynchronous replicas on their own batches: there is no global batch to
synchronize over, and the flag has no effect there.
"""

from __future__ import annotations

from typing import Any


def batchnorm_layers(model: Any) -> list[Any]:
    """Every ``keras.layers.BatchNormalization`` in ``model``, nested models included, in
    a fixed (depth-first, layer) order: the same on every rank for the same architecture.

    Args:
        model: a built ``keras.Model`` (or any layer with ``.layers``).

    Returns:
        The layers, possibly empty.
    """
    import keras

    found: list[Any] = []

    def walk(layer: Any) -> None:
        if isinstance(layer, keras.layers.BatchNormalization):
            found.append(layer)
        for sub in getattr(layer, "layers", ()) or ():
            walk(sub)

    for layer in getattr(model, "layers", ()):
        walk(layer)
    return found


def describe(model: Any, synchronized_by: str) -> str:
    """What a record's ``details.batchnorm`` says about the model's BatchNormalization layers.

    Args:
        model: the model the replica trains.
        synchronized_by: what synchronizes ``synchronized=True`` layers in this strategy
            (e.g. ``"tf.distribute all-reduce"``, ``"Horovod allreduce"``).

    Returns:
        ``"none"``, or e.g. ``"2 layers: 2 synchronized (batch moments over the global
        batch by Horovod allreduce), 0 per-replica"``.
    """
    layers = batchnorm_layers(model)
    if not layers:
        return "none"
    sync = sum(1 for layer in layers if getattr(layer, "synchronized", False))
    return (f"{len(layers)} layers: {sync} synchronized (batch moments over the global batch by {synchronized_by}), "
            f"{len(layers) - sync} per-replica (batch moments over each replica's per-replica batch)")


def synchronize_with_horovod(hvd: Any, model: Any) -> int:
    """Make ``model``'s ``BatchNormalization(synchronized=True)`` layers compute their
    training-batch moments over every Horovod rank's batch.

    Replaces each such layer's moment computation (Keras' ``_moments``; unmasked inputs,
    which is every convolutional and dense use) with one ``hvd.allreduce(op=Sum)`` of the
    concatenated per-channel ``[sum(x), sum(x^2), count]``; mean = sum/count, variance =
    ``max(E[x^2] - mean^2, 0)``, exactly the arithmetic of Keras' TensorFlow backend for
    tf.distribute. Masked inputs keep Keras' own (per-rank) computation, as Keras does.
    Collectives are named by the layer's position, which is the same on every rank.

    Args:
        hvd: the initialised ``horovod.tensorflow`` module.
        model: the rank's model, built and before its step is traced.

    Returns:
        The number of layers synchronized (0: the model has none with ``synchronized=True``).

    Raises:
        RuntimeError: this Keras has no per-layer ``_moments`` to override (a Keras change):
            the message says the layers would otherwise train per rank.
    """
    import tensorflow as tf

    layers = [layer for layer in batchnorm_layers(model) if getattr(layer, "synchronized", False)]
    for i, layer in enumerate(layers):
        keras_moments = getattr(layer, "_moments", None)
        if keras_moments is None or not hasattr(layer, "_reduction_axes"):
            raise RuntimeError(f"BatchNormalization layer {layer.name!r} has synchronized=True, but this Keras "
                               "version has no per-layer _moments distbench could route through Horovod: it "
                               "would normalise per rank; set synchronized=False to train with per-rank statistics")

        def moments(inputs: Any, mask: Any, _layer: Any = layer, _keras: Any = keras_moments,
                    _name: str = f"distbench_sync_bn_{i}") -> Any:
            if mask is not None:
                return _keras(inputs, mask)
            axes = list(_layer._reduction_axes)
            x = tf.cast(inputs, tf.float32)
            channels = tf.reduce_sum(x, axis=axes)
            count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), tf.float32)
            local = tf.concat([tf.reshape(channels, [-1]), tf.reshape(tf.reduce_sum(tf.square(x), axis=axes), [-1]),
                               tf.reshape(count, [1])], axis=0)
            total = hvd.allreduce(local, op=hvd.Sum, name=_name)
            c = tf.size(channels)
            n = total[2 * c]
            mean = tf.reshape(total[:c] / n, tf.shape(channels))
            var = tf.maximum(tf.reshape(total[c:2 * c] / n, tf.shape(channels)) - tf.square(mean), 0.0)
            return tf.cast(mean, inputs.dtype), tf.cast(var, inputs.dtype)

        layer._moments = moments
    return len(layers)

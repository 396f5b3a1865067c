"""The replica step every TensorFlow strategy runs, written once.

One step of one replica: the forward pass on its per-replica batch, the loss, the local
gradients (on the tape of the loop core's :class:`~distbench.training.loop.StepDelay`, so
a straggler scenario delays them before any exchange), an optional gradient exchange
(Horovod wraps the tape), and the local optimizer's update. The strategies differ only in
how the loss is reduced (over the global batch under tf.distribute, over the local batch
for a Horovod rank or a parameter-server replica), in the exchange, and in where the step
runs (a ``strategy.run`` replica function, a rank's graph, a replica's window of steps).

:func:`while_steps` is the graph loop of ``k`` steps over an input iterator that Horovod's
epoch and a parameter-server replica's window share (``autograph=False``: the same
tracing mode in both; AutoGraph would transpile Horovod's tape and allreduce code).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def replica_step(model: Any, optimizer: Any, loss: Callable[[Any, Any], Any], delay: Callable[[], Any], *,
                 sources: Sequence[Any] | None = None, wrap_tape: Callable[[Any], Any] | None = None,
                 strict: bool = False) -> Callable[..., Any]:
    """A step function ``step(x, y, *previous) -> loss`` for one replica.

    Args:
        model: the replica's Keras model.
        optimizer: its Keras optimizer, built on ``model.trainable_variables``.
        loss: ``loss(y, logits) -> scalar`` as the strategy reduces it (e.g. the mean over
            the local batch, or ``tf.nn.compute_average_loss`` over the global batch).
        delay: returns this replica's :class:`~distbench.training.loop.StepDelay`, called
            while the step is traced (under ``MirroredStrategy`` each replica's is found from
            its replica context then).
        sources: what the gradients are taken with respect to (default the trainable
            variables; Horovod needs their backing ``tf.Variable`` s).
        wrap_tape: wraps the tape before ``gradient`` (``hvd.DistributedGradientTape``:
            the allreduce of the local gradients).
        strict: zip gradients and variables strictly (a count mismatch raises).

    Returns:
        ``step(x, y, *previous)``: ``x`` float32 ``(per-replica batch, *sample_shape)``,
        ``y`` int32 ``(per-replica batch,)``; ``previous`` the tensors the step's start
        waits for under a scenario (the previous step's loss); returns the step's loss,
        which under a scenario waits for this step's update.
    """
    import tensorflow as tf

    variables = model.trainable_variables
    targets = list(sources) if sources is not None else variables

    def step(x: Any, y: Any, *previous: Any) -> Any:
        d = delay()
        x = d.start(x, previous)  # under a scenario: after the previous step's update
        with d.tape() as tape:
            value = loss(y, model(x, training=True))
        grads = (wrap_tape(tape) if wrap_tape is not None else tape).gradient(value, targets)
        optimizer.apply_gradients(zip(grads, variables, strict=strict))
        if d.active:  # the loss handed to the next step waits for this step's update
            with tf.control_dependencies([variables[-1].value.read_value()]):
                value = tf.identity(value)
        return value

    return step


def while_steps(step: Callable[..., Any], iterator: Any, k: Any) -> Any:
    """Run ``step`` ``k`` times on batches of ``iterator`` inside the current graph
    (``tf.while_loop``), each step given the previous step's loss; returns the last loss
    (NaN for ``k = 0``). Call it inside a ``tf.function(autograph=False)``."""
    import tensorflow as tf

    def body(i: Any, loss: Any) -> Any:
        x, y = iterator.get_next()
        return i + 1, step(x, y, loss)

    _, loss = tf.while_loop(lambda i, _: i < k, body, (tf.constant(0), tf.constant(float("nan"))))
    return loss

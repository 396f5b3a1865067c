"""BatchNormalization(synchronized=True) under Horovod: the batch moments are those of the
global batch (every rank's share together), as Keras computes them under tf.distribute,
and gradients flow through them; without the flag each rank keeps its own moments."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.conftest import requires

RANK_SCRIPT = """
import os
import numpy as np
import horovod.tensorflow as hvd
import keras
import tensorflow as tf
from distbench.training.batchnorm import synchronize_with_horovod

hvd.init()
rng = np.random.default_rng(0)
x = rng.normal(2.0, 3.0, size=(8, 4, 4, 3)).astype(np.float32)  # the global batch; each rank takes its half
mine = x[hvd.rank() * 4:(hvd.rank() + 1) * 4]
inputs = keras.Input((4, 4, 3))
model = keras.Model(inputs, [keras.layers.BatchNormalization(synchronized=True)(inputs),
                             keras.layers.BatchNormalization()(inputs)])
n = synchronize_with_horovod(hvd, model)
sync_bn, local_bn = model.layers[1], model.layers[2]

@tf.function
def step(v):
    with tf.GradientTape() as tape:
        tape.watch(v)
        a, b = model(v, training=True)
        loss = tf.reduce_sum(a * a)
    return a, b, tape.gradient(loss, v)

a, b, grad = step(tf.constant(mine))
want = (x[hvd.rank() * 4:(hvd.rank() + 1) * 4] - x.mean(axis=(0, 1, 2))) / np.sqrt(x.var(axis=(0, 1, 2)) + 1e-3)
own = (mine - mine.mean(axis=(0, 1, 2))) / np.sqrt(mine.var(axis=(0, 1, 2)) + 1e-3)
ok = (n == 1 and np.allclose(a.numpy(), want, atol=1e-4) and np.allclose(b.numpy(), own, atol=1e-4)
      and not np.allclose(want, own, atol=1e-2) and bool(np.all(np.isfinite(grad.numpy()))))
moving = sync_bn.moving_mean.numpy()  # momentum 0.99 from 0: 0.01 x the global batch mean on every rank
ok = ok and np.allclose(moving, 0.01 * x.mean(axis=(0, 1, 2)), atol=1e-5)
os.write(1, f"SYNCBN rank={hvd.rank()} ok={ok}\\n".encode())
"""


def test_describe_counts_synchronized_and_per_replica_layers():
    import keras

    from distbench.training.batchnorm import batchnorm_layers, describe

    inner = keras.Sequential([keras.Input((3,)), keras.layers.BatchNormalization(synchronized=True)])
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.BatchNormalization()(inner(inputs)))
    assert len(batchnorm_layers(model)) == 2  # the nested model's layer too
    assert describe(model, "Horovod allreduce").startswith(
        "2 layers: 1 synchronized (batch moments over the global batch by Horovod allreduce), 1 per-replica")
    assert describe(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), "x") == "none"


@pytest.mark.integration
@requires(module="horovod")
def test_synchronized_layers_normalise_with_the_global_batch_under_horovod(tmp_path):
    from distbench.launch import commands as C
    from distbench.launch.process import ProcSpec, log_tail, run_processes

    script = tmp_path / "syncbn.py"
    script.write_text(textwrap.dedent(RANK_SCRIPT))
    argv, env = C.horovodrun_command(2, "localhost:2", [sys.executable, str(script)], tmp_path / "g", 60,
                                     sys.executable)
    log = tmp_path / "gloo.log"
    res = run_processes([ProcSpec("gloo", argv, env, log)], timeout_s=180)
    text = log.read_text()
    assert res.ok, log_tail(log)
    for rank in (0, 1):
        assert f"SYNCBN rank={rank} ok=True" in text, text[-3000:]
